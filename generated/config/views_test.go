package config

import (
	"flag"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonNames are the JSON names of the fields of the struct type of v.
func jsonNames(v any) []string {
	t := reflect.TypeOf(v)
	names := make([]string, t.NumField())
	for i := range names {
		names[i] = t.Field(i).Tag.Get("json")
	}
	return names
}

// errLines are the messages errors.Join put in err, one a line; none for nil.
func errLines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

// randomShape is a Shape whose every field is drawn around and beyond its bounds: small and
// large ints (some negative, some not multiples of the others), floats up to 2 with an
// occasional NaN, and enums that are sometimes no value the spec lists.
func randomShape(r *rand.Rand) Shape {
	w := DefaultShape()
	v := reflect.ValueOf(&w).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Int:
			switch r.IntN(3) {
			case 0:
				f.SetInt(int64(r.IntN(12) - 2))
			case 1:
				f.SetInt(int64(r.IntN(5000)))
			default:
				f.SetInt(int64(r.IntN(3_000_000)))
			}
		case reflect.Float32:
			x := r.Float64()*2 - 0.1
			if r.IntN(10) == 0 {
				x = math.NaN()
			}
			f.SetFloat(x)
		case reflect.Bool:
			f.SetBool(r.IntN(2) == 0)
		case reflect.String:
			if r.IntN(4) == 0 {
				f.SetString("bogus")
			}
		}
	}
	return w
}

// TestViewsValidateTheirFields checks the Validate of each family's config (the views Gpt2 and
// Vit, the shape's type Llama) against the view of every family's, on random shapes: it reports
// exactly the messages of Shape.Validate that name only fields it holds, in the same order (a
// multiple-of rule whose other field it lacks, such as n_heads of n_kv_heads for gpt2, is not
// its).
func TestViewsValidateTheirFields(t *testing.T) {
	all := jsonNames(Shape{})
	views := []struct {
		name     string
		fields   []string
		validate func(Shape) error
	}{
		{"gpt2", jsonNames(Gpt2{}), func(w Shape) error { return w.Gpt2().Validate() }},
		{"vit", jsonNames(Vit{}), func(w Shape) error { return w.Vit().Validate() }},
		{"llama", jsonNames(Llama{}), func(w Shape) error { return w.Llama().Validate() }},
	}
	r := rand.New(rand.NewPCG(1, 2))
	checked := map[string]int{}
	for range 3000 {
		w := randomShape(r)
		whole := errLines(w.Validate())
		for _, v := range views {
			var want []string
			for _, line := range whole {
				ours := true
				for _, word := range strings.Fields(line) {
					if slices.Contains(all, word) && !slices.Contains(v.fields, word) {
						ours = false
					}
				}
				if ours {
					want = append(want, line)
				}
			}
			got := errLines(v.validate(w))
			require.Equal(t, want, got, "%s view of %+v", v.name, w)
			checked[v.name] += len(got)
		}
	}
	for _, v := range views {
		assert.Greater(t, checked[v.name], 1000, "%s: the random shapes should break many bounds", v.name)
	}
	// A view's valid preset is valid, and the shape's n_kv_heads does not make gpt2's n_heads invalid.
	g, err := Gpt2Preset("gpt2-demo")
	require.NoError(t, err)
	g.NHeads, g.DModel = 4, 192
	assert.NoError(t, g.Validate())
	assert.Error(t, g.Shape().Validate(), "n_heads 4 is not a multiple of the shape's default n_kv_heads 3")
	vit := DefaultVit()
	vit.PatchSize = 5
	assert.Equal(t, []string{"image_size 224 is not a multiple of patch_size 5"}, errLines(vit.Validate()))
}

// TestViewFlags parses a family view's flags over a preset: it has a flag for each field it
// holds (and its alias) and no other, with the usage its family words its own way where the
// spec gives one and the shape's otherwise; Apply sets exactly the fields whose flags were
// set and returns the view's validation.
func TestViewFlags(t *testing.T) {
	fs := flag.NewFlagSet("gpt2", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flags := NewGpt2Flags(fs, DefaultGpt2())
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	assert.Equal(t, []string{"c", "context", "d-ff", "d-model", "init-scale", "layer-norm-eps", "n-heads", "n-layers", "tied-output", "vocab"}, names)
	assert.Equal(t, "the hidden width of the GELU feed-forward block (4·d_model in GPT-2)", fs.Lookup("d-ff").Usage)
	assert.Equal(t, "the number of tokens", fs.Lookup("vocab").Usage)
	assert.Equal(t, "alias of -context", fs.Lookup("c").Usage)
	assert.Equal(t, "0.02", fs.Lookup("init-scale").DefValue)
	require.NoError(t, fs.Parse([]string{"-d-ff", "100", "-c", "64", "-tied-output=false", "-init-scale", "0.5"}))
	c, err := Gpt2Preset("gpt2-demo")
	require.NoError(t, err)
	want := c
	want.DFF, want.Context, want.TiedOutput, want.InitScale = 100, 64, false, 0.5
	require.NoError(t, flags.Apply(&c))
	assert.Equal(t, want, c)

	fs = flag.NewFlagSet("vit", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	vflags := NewVitFlags(fs, DefaultVit())
	assert.Nil(t, fs.Lookup("vocab"))
	assert.Nil(t, fs.Lookup("context"))
	assert.Equal(t, "the hidden width of the GELU MLP", fs.Lookup("d-ff").Usage)
	require.NoError(t, fs.Parse([]string{"-patch-size", "5", "-classes", "1"}))
	v := DefaultVit()
	err = vflags.Apply(&v)
	assert.Equal(t, 5, v.PatchSize)
	assert.Equal(t, 1, v.Classes)
	assert.Equal(t, []string{"image_size 224 is not a multiple of patch_size 5", "classes 1 is below the minimum 2"}, errLines(err))
}
