package tokenizer

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func docs(s ...string) [][]byte {
	var out [][]byte
	for _, x := range s {
		out = append(out, []byte(x))
	}
	return out
}

func TestTrainSmall(t *testing.T) {
	// Chunks "ab", " ab" x2, " cd": (a,b) occurs 3 times, then (Ġ,ab) 2
	// times, then nothing twice.
	tok, err := Train(slices.Values(docs("ab ab ab cd")), 1000, TrainOptions{})
	require.NoError(t, err)
	v := tok.Vocab()
	assert.Equal(t, []string{"a b", "Ġ ab"}, v.Merges)
	assert.Equal(t, 259, tok.VocabSize())
	assert.Equal(t, "<|endoftext|>", v.Tokens[0])
	assert.Equal(t, TypeControl, v.Types[0])
	assert.Equal(t, "Ā", v.Tokens[1]) // byte 0
	assert.Equal(t, "ab", v.Tokens[257])
	assert.Equal(t, "Ġab", v.Tokens[258])
	assert.Equal(t, int32(0), v.BOS)
	assert.Equal(t, int32(0), v.EOS)
	assert.Equal(t, "gpt-2", tok.Pre())
	assert.Equal(t, []int32{257, 258, 1 + ' ', 1 + 'c', 1 + 'd'}, tok.Encode("ab ab cd", EncodeOptions{}))

	// Ties go to the pair whose bytes sort first: (Ġ,z), (x,y), (z,w) all
	// occur twice.
	tok, err = Train(slices.Values(docs("xy xy zw zw")), 1000, TrainOptions{Special: []string{}})
	require.NoError(t, err)
	assert.Equal(t, []string{"Ġ z", "Ġz w", "x y"}, tok.Vocab().Merges)
	assert.Equal(t, 256+3, tok.VocabSize())
	assert.Equal(t, int32(-1), tok.BOS())

	// The vocabulary size caps the merges.
	tok, err = Train(slices.Values(docs("xy xy zw zw")), 258, TrainOptions{Special: []string{}})
	require.NoError(t, err)
	assert.Equal(t, []string{"Ġ z", "Ġz w"}, tok.Vocab().Merges)

	// Overlapping pairs: "aaaa" merges (a,a) twice per word, not three
	// times.
	tok, err = Train(slices.Values(docs("aaaa", "aaaa")), 1000, TrainOptions{Special: []string{}})
	require.NoError(t, err)
	assert.Equal(t, []string{"a a", "aa aa"}, tok.Vocab().Merges)
	assert.Equal(t, []int32{257}, tok.Encode("aaaa", EncodeOptions{}))
}

func TestTrainSpecialAndOptions(t *testing.T) {
	texts := docs("<|im_start|>user hello hello<|im_end|>", "hello<|endoftext|>hello")
	tok, err := Train(slices.Values(texts), 300, TrainOptions{
		Special: []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"},
		BOS:     "<|im_start|>", EOS: "<|im_end|>", AddEOS: true,
	})
	require.NoError(t, err)
	assert.Equal(t, int32(1), tok.BOS())
	assert.Equal(t, int32(2), tok.EOS())
	// Special tokens were cut out: no merge crosses "<|".
	for _, m := range tok.Vocab().Merges {
		assert.NotContains(t, m, "<", m)
	}
	ids := tok.Encode("hello<|im_end|>", EncodeOptions{ParseSpecial: true, AddSpecial: true})
	assert.Equal(t, int32(2), ids[len(ids)-1])
	assert.Equal(t, int32(2), ids[len(ids)-2])

	for _, c := range []struct {
		vocab int
		opts  TrainOptions
		want  string
	}{
		{200, TrainOptions{}, "below the 257 special and byte tokens"},
		{300, TrainOptions{Pre: "nope"}, "unknown pre-tokenizer"},
		{300, TrainOptions{BOS: "<s>"}, `BOS "<s>" is not one of the special tokens`},
		{300, TrainOptions{Special: []string{"a", "a"}}, "given twice"},
		{300, TrainOptions{Special: []string{""}}, "empty special"},
		{300, TrainOptions{Special: []string{}, AddBOS: true}, "without special tokens"},
	} {
		_, err := Train(slices.Values(texts), c.vocab, c.opts)
		require.ErrorContains(t, err, c.want)
	}

	// Other pre-tokenizers.
	tok, err = Train(slices.Values(docs("x 2024 2024 2024")), 1000, TrainOptions{Pre: "smollm"})
	require.NoError(t, err)
	for _, m := range tok.Vocab().Merges {
		assert.NotRegexp(t, `[0-9].|.[0-9]`, strings.ReplaceAll(m, " ", ""), "digits stay single with smollm")
	}
	assert.Equal(t, "smollm", tok.Pre())
}

// TestTrainDeterministic trains three times on the same documents, once in
// the reverse order: the vocabularies are the same.
func TestTrainDeterministic(t *testing.T) {
	a, texts := trainSample(t, 1000, TrainOptions{})
	b, _ := trainSample(t, 1000, TrainOptions{})
	assert.Equal(t, a.Vocab(), b.Vocab())
	assert.Equal(t, 1000, a.VocabSize())
	rev := docs(texts...)
	slices.Reverse(rev)
	c, err := Train(slices.Values(rev), 1000, TrainOptions{})
	require.NoError(t, err)
	assert.Equal(t, a.Vocab(), c.Vocab())
}

// goSource returns up to limit bytes of Go source files from GOROOT.
func goSource(t testing.TB, limit int) [][]byte {
	t.Helper()
	root := filepath.Join(runtime.GOROOT(), "src")
	var out [][]byte
	total := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || total >= limit {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		out = append(out, b)
		total += len(b)
		return nil
	})
	if err != nil || total < limit/2 {
		t.Skipf("not enough Go source under %s (%d bytes)", root, total)
	}
	return out
}

// TestTrainSpeed trains a 2048-token vocabulary on about 4 MB of Go source
// and reports the speed.
func TestTrainSpeed(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	src := goSource(t, 4<<20)
	n := 0
	for _, b := range src {
		n += len(b)
	}
	start := time.Now()
	tok, err := Train(slices.Values(src), 2048, TrainOptions{})
	require.NoError(t, err)
	el := time.Since(start)
	require.Equal(t, 2048, tok.VocabSize())
	t.Logf("trained %d tokens on %.1f MB in %v: %.1f MB/s", tok.VocabSize(), float64(n)/1e6, el.Round(time.Millisecond), float64(n)/1e6/el.Seconds())

	start = time.Now()
	ids := 0
	for _, b := range src {
		ids += len(tok.Encode(string(b), EncodeOptions{}))
	}
	el = time.Since(start)
	t.Logf("encoded it into %d tokens (%.2f bytes/token) in %v: %.1f MB/s", ids, float64(n)/float64(ids), el.Round(time.Millisecond), float64(n)/1e6/el.Seconds())
}

func BenchmarkTrain2048(b *testing.B) {
	src := goSource(b, 4<<20)
	n := 0
	for _, s := range src {
		n += len(s)
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		if _, err := Train(slices.Values(src), 2048, TrainOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	src := goSource(b, 1<<20)
	tok, err := Train(slices.Values(src), 2048, TrainOptions{})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, s := range src {
		n += len(s)
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		for _, s := range src {
			tok.Encode(string(s), EncodeOptions{})
		}
	}
}
