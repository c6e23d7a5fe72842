package tokenizer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/internal/gguffile"
)

func TestByteMapping(t *testing.T) {
	seen := map[rune]bool{}
	identity := 0
	for b := 0; b < 256; b++ {
		m := MapBytes(string([]byte{byte(b)}))
		r, size := utf8.DecodeRuneInString(m)
		require.Equal(t, len(m), size, "byte %d maps to one rune", b)
		require.False(t, seen[r], "byte %d: rune %U used twice", b, r)
		seen[r] = true
		if r == rune(b) {
			identity++
		} else {
			require.GreaterOrEqual(t, r, rune(256))
		}
		back, ok := UnmapBytes(m)
		require.True(t, ok)
		require.Equal(t, string([]byte{byte(b)}), back)
	}
	assert.Equal(t, 188, identity)
	// GPT-2's well-known ones.
	assert.Equal(t, "Ġ", MapBytes(" "))
	assert.Equal(t, "Ċ", MapBytes("\n"))
	assert.Equal(t, "ĉ", MapBytes("\t"))
	assert.Equal(t, "Ā", MapBytes("\x00"))
	assert.Equal(t, "ġ", MapBytes("\x7f"))
	assert.Equal(t, "Ń", MapBytes("\xad"))
	assert.Equal(t, "ĠHelloĊ", MapBytes(" Hello\n"))
	_, ok := UnmapBytes("a b") // a space is no byte's rune
	assert.False(t, ok)
	_, ok = UnmapBytes("\xff")
	assert.False(t, ok)
}

// smallVocab builds a vocabulary by hand: bytes, a few merges, a control
// and a user-defined token.
func smallVocab(t *testing.T) *Tokenizer {
	t.Helper()
	var tokens []string
	for b := 0; b < 256; b++ {
		tokens = append(tokens, MapBytes(string([]byte{byte(b)})))
	}
	types := make([]TokenType, 256)
	for i := range types {
		types[i] = TypeNormal
	}
	add := func(s string, ty TokenType) {
		tokens = append(tokens, s)
		types = append(types, ty)
	}
	add("he", TypeNormal)             // 256
	add("ll", TypeNormal)             // 257
	add("hell", TypeNormal)           // 258
	add("hello", TypeNormal)          // 259
	add("Ġhello", TypeNormal)         // 260
	add("<|endoftext|>", TypeControl) // 261
	add("<tool>", TypeUserDefined)    // 262
	add("xyz", TypeNormal)            // 263: no merge builds it
	tok, err := New(Vocab{
		Pre:    "gpt-2",
		Tokens: tokens, Types: types,
		Merges: []string{"h e", "l l", "he ll", "hell o", "Ġ hello"},
		BOS:    261, EOS: 261, UNK: -1, PAD: -1,
		AddBOS: true, AddEOS: true,
	})
	require.NoError(t, err)
	return tok
}

func TestEncodeDecodeSmall(t *testing.T) {
	tok := smallVocab(t)
	enc := func(s string, o EncodeOptions) []int32 { return tok.Encode(s, o) }
	assert.Equal(t, []int32{259, 260}, enc("hello hello", EncodeOptions{}))
	assert.Equal(t, []int32{258, 'p'}, enc("hellp", EncodeOptions{}))
	// "xyz" is a token, but no merge builds it: bytes.
	assert.Equal(t, []int32{'x', 'y', 'z'}, enc("xyz", EncodeOptions{}))
	// Control tokens only with ParseSpecial; user-defined ones always.
	assert.Equal(t, []int32{259, 261, 259}, enc("hello<|endoftext|>hello", EncodeOptions{ParseSpecial: true}))
	plain := enc("hello<|endoftext|>hello", EncodeOptions{})
	assert.NotContains(t, plain, int32(261))
	assert.Equal(t, []int32{259, 262, 260}, enc("hello<tool> hello", EncodeOptions{}))
	// AddSpecial adds BOS and EOS.
	assert.Equal(t, []int32{261, 259, 261}, enc("hello", EncodeOptions{AddSpecial: true}))
	assert.Equal(t, []int32{261, 261}, enc("", EncodeOptions{AddSpecial: true}))
	assert.Empty(t, enc("", EncodeOptions{}))

	dec := func(ids []int32, o DecodeOptions) string {
		s, err := tok.Decode(ids, o)
		require.NoError(t, err)
		return s
	}
	assert.Equal(t, "hello hello", dec([]int32{259, 260}, DecodeOptions{}))
	assert.Equal(t, "hellohello", dec([]int32{259, 261, 259}, DecodeOptions{}))
	assert.Equal(t, "hello<|endoftext|>hello", dec([]int32{259, 261, 259}, DecodeOptions{Special: true}))
	assert.Equal(t, "<tool>", dec([]int32{262}, DecodeOptions{}))
	assert.Equal(t, "\xff", dec([]int32{0xff}, DecodeOptions{}))
	_, err := tok.Decode([]int32{9999}, DecodeOptions{})
	require.ErrorContains(t, err, "out of range")
	_, err = tok.Decode([]int32{-1}, DecodeOptions{})
	require.Error(t, err)

	assert.Equal(t, int32(261), tok.BOS())
	assert.Equal(t, int32(261), tok.EOS())
	id, ok := tok.ID("Ġhello")
	assert.True(t, ok)
	assert.Equal(t, int32(260), id)
	assert.Equal(t, "Ġhello", tok.Token(260))
	assert.Equal(t, TypeControl, tok.TokenType(261))
	assert.Equal(t, 264, tok.VocabSize())
	assert.Equal(t, "gpt-2", tok.Pre())
}

func TestNewErrors(t *testing.T) {
	bytesOnly := func() []string {
		var tokens []string
		for b := 0; b < 256; b++ {
			tokens = append(tokens, MapBytes(string([]byte{byte(b)})))
		}
		return tokens
	}
	base := func() Vocab { return Vocab{Pre: "gpt-2", Tokens: bytesOnly(), BOS: -1, EOS: -1, UNK: -1, PAD: -1} }
	for _, c := range []struct {
		name string
		edit func(v *Vocab)
		want string
	}{
		{"empty", func(v *Vocab) { v.Tokens = nil }, "empty vocabulary"},
		{"pre", func(v *Vocab) { v.Pre = "nope" }, "unknown pre-tokenizer"},
		{"types", func(v *Vocab) { v.Types = []TokenType{TypeNormal} }, "1 token types for 256 tokens"},
		{"dup", func(v *Vocab) { v.Tokens = append(v.Tokens, "a") }, `token "a" appears twice`},
		{"empty token", func(v *Vocab) { v.Tokens[3] = "" }, "token 3 is empty"},
		{"merge no space", func(v *Vocab) { v.Merges = []string{"ab"} }, "not two tokens"},
		{"merge one part", func(v *Vocab) { v.Merges = []string{"a "} }, `"" is not a token`},
		{"merge unknown", func(v *Vocab) { v.Merges = []string{"a bc"} }, `"bc" is not a token`},
		{"bos", func(v *Vocab) { v.BOS = 256 }, "BOS id 256 is not a token"},
		{"addbos", func(v *Vocab) { v.AddBOS = true }, "AddBOS without a BOS"},
	} {
		v := base()
		c.edit(&v)
		_, err := New(v)
		require.ErrorContains(t, err, c.want, c.name)
	}
}

// referenceBPE encodes one chunk the way GPT-2's reference code does:
// repeatedly merge every occurrence of the lowest-ranked pair.
func referenceBPE(tok *Tokenizer, ranks map[[2]string]int, chunk string) []int32 {
	var word []string
	for i := 0; i < len(chunk); i++ {
		word = append(word, MapBytes(chunk[i:i+1]))
	}
	for len(word) > 1 {
		best, bestRank := -1, 1<<30
		for i := 0; i+1 < len(word); i++ {
			if r, ok := ranks[[2]string{word[i], word[i+1]}]; ok && r < bestRank {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		a, b := word[best], word[best+1]
		var next []string
		for i := 0; i < len(word); i++ {
			if i+1 < len(word) && word[i] == a && word[i+1] == b {
				next = append(next, a+b)
				i++
			} else {
				next = append(next, word[i])
			}
		}
		word = next
	}
	var ids []int32
	for _, w := range word {
		if id, ok := tok.ID(w); ok {
			ids = append(ids, id)
			continue
		}
		raw, _ := UnmapBytes(w)
		for i := 0; i < len(raw); i++ {
			id, _ := tok.ID(MapBytes(raw[i : i+1]))
			ids = append(ids, id)
		}
	}
	return ids
}

// randomText mixes words, code, unicode and random bytes.
func randomText(rng *rand.Rand, n int) string {
	parts := []string{"the", " the", "hello", " world", "func", "(", ")", " {", "\n", "\t", "  ", " ", "'s", "'ll",
		"123", "4", ".", ",", "é", "Привет", "世界", "🦙", "\u0303", "<|endoftext|>", "<|end", "\xff", "\xe4\xb8", "==", "!="}
	var sb strings.Builder
	for range n {
		if rng.IntN(8) == 0 {
			sb.WriteByte(byte(rng.IntN(256)))
		} else {
			sb.WriteString(parts[rng.IntN(len(parts))])
		}
	}
	return sb.String()
}

// trainSample trains a small vocabulary on Go source text of this package.
func trainSample(t testing.TB, vocab int, opts TrainOptions) (*Tokenizer, []string) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	slices.Sort(files)
	var docs [][]byte
	var texts []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		docs = append(docs, b)
		texts = append(texts, string(b))
	}
	tok, err := Train(slices.Values(docs), vocab, opts)
	require.NoError(t, err)
	return tok, texts
}

// TestEncodeMatchesReference compares the queue-based merging with the
// reference algorithm, chunk by chunk.
func TestEncodeMatchesReference(t *testing.T) {
	tok, texts := trainSample(t, 600, TrainOptions{})
	rng := rand.New(rand.NewPCG(3, 4))
	inputs := append([]string{}, texts...)
	for range 200 {
		inputs = append(inputs, randomText(rng, 40))
	}
	ranks := map[[2]string]int{}
	for i, m := range tok.Vocab().Merges {
		a, b, _ := strings.Cut(m, " ")
		if _, ok := ranks[[2]string{a, b}]; !ok {
			ranks[[2]string{a, b}] = i
		}
	}
	for _, in := range inputs {
		var want []int32
		for _, c := range SplitGPT2(in) {
			want = append(want, referenceBPE(tok, ranks, c)...)
		}
		require.Equal(t, want, tok.Encode(in, EncodeOptions{}), "encoding of %q", in)
	}
}

// TestRoundTripBytes checks that decoding undoes encoding for any bytes.
func TestRoundTripBytes(t *testing.T) {
	tok, _ := trainSample(t, 500, TrainOptions{})
	toks := []*Tokenizer{tok, smallVocab(t)}
	if _, err := os.Stat(vocabDir); err == nil {
		toks = append(toks, loadVocab(t, filepath.Join(vocabDir, "ggml-vocab-gpt-2.gguf")))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tk := range toks {
		for i := range 300 {
			var s string
			if i%2 == 0 {
				b := make([]byte, rng.IntN(64))
				for j := range b {
					b[j] = byte(rng.IntN(256))
				}
				s = string(b)
			} else {
				s = randomText(rng, 30)
			}
			ids := tk.Encode(s, EncodeOptions{})
			got, err := tk.Decode(ids, DecodeOptions{})
			require.NoError(t, err)
			require.Equal(t, s, got, "%s: round trip of %q", tk, s)

			ids = tk.Encode(s, EncodeOptions{ParseSpecial: true})
			got, err = tk.Decode(ids, DecodeOptions{Special: true})
			require.NoError(t, err)
			require.Equal(t, s, got, "%s: round trip with specials of %q", tk, s)
		}
	}
}

func TestGPT2VocabSpecial(t *testing.T) {
	if _, err := os.Stat(vocabDir); err != nil {
		t.Skipf("llama.cpp vocabulary test files not found at %s: %v", vocabDir, err)
	}
	tok := loadVocab(t, filepath.Join(vocabDir, "ggml-vocab-gpt-2.gguf"))
	hello := tok.Encode("Hello", EncodeOptions{})
	require.Equal(t, []int32{15496}, hello)
	ids := tok.Encode("Hello<|endoftext|>Hello", EncodeOptions{ParseSpecial: true})
	assert.Equal(t, []int32{15496, 50256, 15496}, ids)
	ids = tok.Encode("Hello<|endoftext|>Hello", EncodeOptions{})
	assert.NotContains(t, ids, int32(50256))
	// The file sets no add_bos_token; gpt-2's default is not to add it.
	assert.Equal(t, []int32{15496}, tok.Encode("Hello", EncodeOptions{AddSpecial: true}))

	// Write it out with GGUF and read it back: same vocabulary.
	back, err := FromKVs(tok.GGUF())
	require.NoError(t, err)
	assert.Equal(t, tok.Vocab(), back.Vocab())
}

func TestGGUFRoundTrip(t *testing.T) {
	tok, texts := trainSample(t, 700, TrainOptions{Special: []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, AddBOS: true})
	kvs := tok.GGUF()
	m := map[string]any{}
	for _, kv := range kvs {
		// Every value is a GGUF value.
		_, ok := gguffile.KV{Key: kv.Key, Value: kv.Value}.Type()
		require.True(t, ok, "%s: %T is no GGUF type", kv.Key, kv.Value)
		m[kv.Key] = kv.Value
	}
	assert.Equal(t, "gpt2", m[KeyModel])
	assert.Equal(t, "gpt-2", m[KeyPre])
	assert.IsType(t, []string{}, m[KeyTokens])
	assert.IsType(t, []int32{}, m[KeyTokenType])
	assert.IsType(t, []string{}, m[KeyMerges])
	assert.Equal(t, uint32(0), m[KeyBOS])
	assert.Equal(t, uint32(0), m[KeyEOS])
	assert.Equal(t, true, m[KeyAddBOS])
	assert.Equal(t, false, m[KeyAddEOS])
	assert.Len(t, m[KeyTokens], 700)
	assert.Equal(t, int32(TypeControl), m[KeyTokenType].([]int32)[2])
	assert.Equal(t, int32(TypeNormal), m[KeyTokenType].([]int32)[3])

	back, err := FromGGUF(func(k string) (any, bool) { v, ok := m[k]; return v, ok })
	require.NoError(t, err)
	assert.Equal(t, tok.Vocab(), back.Vocab())
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 100 {
		in := randomText(rng, 50) + "<|im_start|>user"
		if i < len(texts) {
			in = texts[i]
		}
		for _, o := range []EncodeOptions{{}, {ParseSpecial: true, AddSpecial: true}} {
			require.Equal(t, tok.Encode(in, o), back.Encode(in, o))
		}
	}
	ids := back.Encode("<|im_start|>hi<|im_end|>", EncodeOptions{ParseSpecial: true, AddSpecial: true})
	assert.Equal(t, int32(0), ids[0])
	assert.Equal(t, int32(1), ids[1])
	assert.Equal(t, int32(2), ids[len(ids)-1])

	// Through a real GGUF file.
	path := filepath.Join(t.TempDir(), "tok.gguf")
	var w gguffile.Writer
	for _, kv := range kvs {
		require.NoError(t, w.AddKV(kv.Key, kv.Value))
	}
	require.NoError(t, w.WriteFile(path))
	f, err := gguffile.ReadFile(path)
	require.NoError(t, err)
	fromFile, err := FromGGUF(f.Get)
	require.NoError(t, err)
	assert.Equal(t, tok.Vocab(), fromFile.Vocab())
}

func TestFromGGUFErrors(t *testing.T) {
	tok := smallVocab(t)
	good := func() map[string]any {
		m := map[string]any{}
		for _, kv := range tok.GGUF() {
			m[kv.Key] = kv.Value
		}
		return m
	}
	for _, c := range []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"no model", func(m map[string]any) { delete(m, KeyModel) }, "tokenizer.ggml.model is missing"},
		{"t5 model", func(m map[string]any) { m[KeyModel] = "t5" }, `is "t5", only "gpt2"`},
		{"model type", func(m map[string]any) { m[KeyModel] = uint32(1) }, "tokenizer.ggml.model is uint32, want string"},
		{"no tokens", func(m map[string]any) { delete(m, KeyTokens) }, "tokenizer.ggml.tokens is missing"},
		{"tokens type", func(m map[string]any) { m[KeyTokens] = []int32{1} }, "tokenizer.ggml.tokens is []int32, want []string"},
		{"no merges", func(m map[string]any) { delete(m, KeyMerges) }, "tokenizer.ggml.merges is missing"},
		{"bad merge", func(m map[string]any) { m[KeyMerges] = []string{"h e", "hello"} }, `merge 1 "hello" is not two tokens`},
		{"merge of non-tokens", func(m map[string]any) { m[KeyMerges] = []string{"q rs"} }, `"rs" is not a token`},
		{"types length", func(m map[string]any) { m[KeyTokenType] = []int32{1, 1} }, "2 entries for 264 tokens"},
		{"types type", func(m map[string]any) { m[KeyTokenType] = []string{"x"} }, "want []int32"},
		{"bos range", func(m map[string]any) { m[KeyBOS] = uint32(264) }, "bos_token_id is 264, not a token id"},
		{"bos type", func(m map[string]any) { m[KeyBOS] = "x" }, "bos_token_id is string, want an integer"},
		{"add_bos type", func(m map[string]any) { m[KeyAddBOS] = uint8(1) }, "add_bos_token is uint8, want bool"},
		{"add_bos no bos", func(m map[string]any) { delete(m, KeyBOS) }, "bos_token_id is missing"},
		{"pre", func(m map[string]any) { m[KeyPre] = "klingon" }, `unknown pre-tokenizer "klingon"`},
	} {
		m := good()
		c.edit(m)
		_, err := FromGGUF(func(k string) (any, bool) { v, ok := m[k]; return v, ok })
		require.ErrorContains(t, err, c.want, c.name)
	}
	// Defaults: no pre is "default", no types are normal; llama3 adds BOS.
	m := good()
	delete(m, KeyPre)
	delete(m, KeyTokenType)
	delete(m, KeyAddBOS)
	got, err := FromGGUF(func(k string) (any, bool) { v, ok := m[k]; return v, ok })
	require.NoError(t, err)
	assert.Equal(t, "default", got.Pre())
	assert.Equal(t, TypeNormal, got.TokenType(260))
	// ... except the texts llama.cpp makes control tokens (retypeByText).
	assert.Equal(t, TypeControl, got.TokenType(261))
	assert.False(t, got.Vocab().AddBOS)
	m[KeyPre] = "llama-bpe"
	got, err = FromGGUF(func(k string) (any, bool) { v, ok := m[k]; return v, ok })
	require.NoError(t, err)
	assert.True(t, got.Vocab().AddBOS)
}
