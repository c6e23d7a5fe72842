package kerneltables

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/gen/configs"
	"github.com/toyml/toy/gen/internal/gentest"
)

// novelSpec is an engine spec whose Sampling group has options no code of the generator names
// (a bounded number, a count, an enumerated string, a bool), with the DFlash group the tables
// also need.
const novelSpec = `package spec

// Sampling is a sampling group of options the generator has never seen.
//
//kernelgen:options overlay
type Sampling struct {
	// Warmth is a number from 0 to 2.
	Warmth float64 ` + "`" + `json:"warmth" default:"1" min:"0" max:"2"` + "`" + `
	// Beams is how many beams to keep.
	Beams int ` + "`" + `json:"beams" default:"1" min:"1"` + "`" + `
	// Mode picks a way.
	Mode string ` + "`" + `json:"mode" default:"a" enum:"a,b,c"` + "`" + `
	// Verbose says more.
	Verbose bool ` + "`" + `json:"verbose" default:"false"` + "`" + `
}

// DFlash pairs a model with a drafter.
//
//kernelgen:options
type DFlash struct {
	// Gamma is the block size.
	Gamma int ` + "`" + `json:"gamma" default:"8" min:"1"` + "`" + `
	// WindowSize is the drafter's window.
	WindowSize int ` + "`" + `json:"window_size" default:"64" min:"0"` + "`" + `
	// MaskTokenID is the mask token.
	MaskTokenID int ` + "`" + `json:"mask_token_id" default:"0" min:"0"` + "`" + `
}
`

// loadSpec loads src as an engine spec package written under testdata/ (go/packages loads it
// from the module).
func loadSpec(t *testing.T, name, src string) []*configs.Config {
	root := gentest.RepoRoot(t)
	work, err := filepath.Abs(filepath.Join("testdata", "work-"+name))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(work, 0o755))
	t.Cleanup(func() { os.RemoveAll(work) })
	require.NoError(t, os.WriteFile(filepath.Join(work, "spec.go"), []byte(src), 0o644))
	rel, err := filepath.Rel(root, work)
	require.NoError(t, err)
	cs, err := configs.Load(root, "./"+filepath.ToSlash(rel))
	require.NoError(t, err)
	return cs
}

// kernelsWithModel writes a kernels/ tree of one cpu target and one model, m, whose MODEL.toml
// ends with body, and returns its root.
func kernelsWithModel(t *testing.T, body string) string {
	root := t.TempDir()
	for path, data := range map[string]string{
		"kernels/cpu/HARDWARE.toml":   "[hardware]\nbackend = \"cpu\"\n",
		"kernels/models/m/MODEL.toml": "[model]\nmatch_names = [\"m\"]\n\n[[model_types]]\nmodel_type = \"m\"\n\n" + body,
	} {
		p := filepath.Join(root, filepath.FromSlash(path))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
	}
	return root
}

// TestPresetsTakeTheSpecsOptions: the keys of a [sampling.NAME] preset are the json names of
// the Sampling spec's fields, whatever they are: options the generator names nowhere are set
// in the spec's order as their Go types and emitted into the table, and their min, max and
// enum tags, their types, and the keys the spec lacks (temperature, which this spec has not)
// are refused at the line that sets them.
func TestPresetsTakeTheSpecsOptions(t *testing.T) {
	opts := loadSpec(t, "novel-sampling", novelSpec)

	root := kernelsWithModel(t, "[sampling.p]\nverbose = true\nmode = \"b\"\nbeams = 3\nwarmth = 0.5\n")
	ts, err := load(root, "kernels", opts)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Len(t, ts[0].Models, 1)
	require.Len(t, ts[0].Models[0].Presets, 1)
	var keys []string
	var values []any
	for _, s := range ts[0].Models[0].Presets[0].Given {
		keys = append(keys, s.Field.JSON)
		values = append(values, s.Value)
	}
	assert.Equal(t, []string{"warmth", "beams", "mode", "verbose"}, keys, "the spec's order")
	assert.Equal(t, []any{0.5, 3, "b", true}, values)
	files, err := emit(ts, tablePackage{ImportPath: "example.com/tables", PkgName: "tables", Source: "kernels"})
	require.NoError(t, err)
	models := string(files["models.go"])
	for _, want := range []string{`Warmth:\s+new\(0\.5\)`, `Beams:\s+new\(3\)`, `Mode:\s+new\("b"\)`, `Verbose:\s+new\(true\)`} {
		assert.Regexp(t, regexp.MustCompile(want), models)
	}

	root = kernelsWithModel(t, "[sampling.p]\nwarmth = 2.5\nbeams = 0\nmode = \"d\"\nverbose = 1\ntemperature = 0.7\n")
	_, err = load(root, "kernels", opts)
	require.Error(t, err)
	assert.Equal(t, strings.Join([]string{
		"kernels/models/m/MODEL.toml:8: preset p: warmth 2.5 is above the maximum 2",
		"kernels/models/m/MODEL.toml:9: preset p: beams 0 is below the minimum 1",
		`kernels/models/m/MODEL.toml:10: preset p: mode "d" is not one of a, b, c`,
		"kernels/models/m/MODEL.toml:11: preset p: verbose 1 is not a bool",
		"kernels/models/m/MODEL.toml:12: unknown key sampling.p.temperature",
	}, "\n"), err.Error())
}

// goTypes is the Go type of a preset's value for each kind of option.
var goTypes = map[string]reflect.Type{
	"float64": reflect.TypeFor[float64](), "float32": reflect.TypeFor[float32](), "int": reflect.TypeFor[int](),
	"int64": reflect.TypeFor[int64](), "uint64": reflect.TypeFor[uint64](), "bool": reflect.TypeFor[bool](),
	"string": reflect.TypeFor[string](),
}

// FuzzSamplingPreset feeds the body of a [sampling.p] preset to the loader with the repository's
// Sampling spec: it never panics; a preset it takes sets only keys it wrote, each a field of the
// spec whose value has the field's Go type and passes the field's bounds; and every error it
// gives names a file under kernels/.
func FuzzSamplingPreset(f *testing.F) {
	for _, seed := range []string{
		"temperature = 0.7\ntop_k = 20\n",
		"seed = 3\nfrequency_penalty = -2\npresence_penalty = 2.0\n",
		"temperature = -1\n",
		"top_k = 1.5\n",
		"seed = -4\n",
		"logit_bias = { 1 = 2.0 }\n",
		"nonsense = \"x\"\n",
		"repeat_last_n = -1\nrepeat_penalty = 1\nmin_p = 1\ntop_p = 0\n",
		"temperature = [1, 2]\n",
		"[sampling.p.inner]\nx = 1\n",
	} {
		f.Add(seed)
	}
	opts := optionSpecs(f)
	sampling := configs.OptionGroup(opts, "Sampling")
	f.Fuzz(func(t *testing.T, body string) {
		root := kernelsWithModel(t, "[sampling.p]\n"+body)
		ts, err := load(root, "kernels", opts)
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				assert.True(t, strings.HasPrefix(line, "kernels/"), "an error names the file: %q", line)
			}
			return
		}
		var written map[string]map[string]map[string]any
		_, err = toml.Decode("[sampling.p]\n"+body, &written)
		require.NoError(t, err, "the loader took a preset TOML refuses")
		for _, s := range ts[0].Models[0].Presets[0].Given {
			assert.Contains(t, sampling.Fields, s.Field)
			assert.Contains(t, written["sampling"]["p"], s.Field.JSON)
			assert.Equal(t, goTypes[s.Field.Kind], reflect.TypeOf(s.Value), s.Field.JSON)
			assert.Empty(t, s.Field.Check(fmt.Sprint(s.Value)), "%s = %v", s.Field.JSON, s.Value)
		}
	})
}
