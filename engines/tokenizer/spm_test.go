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

const llamaSPMVocab = "ggml-vocab-llama-spm.gguf"

func loadLlamaSPM(t *testing.T) *Tokenizer {
	t.Helper()
	if _, err := os.Stat(vocabDir); err != nil {
		t.Skipf("llama.cpp vocabulary test files not found at %s (they lie beside the checkout): %v", vocabDir, err)
	}
	return loadVocab(t, filepath.Join(vocabDir, llamaSPMVocab))
}

// TestLlamaSPMVocab encodes llama.cpp's test strings with its llama-model
// (SentencePiece) vocabulary and compares with the ids llama.cpp produced
// (test-tokenizer-0 encodes with add_special false, so no BOS), then decodes
// them back.
func TestLlamaSPMVocab(t *testing.T) {
	tok := loadLlamaSPM(t)
	require.Equal(t, ModelLlama, tok.Model())
	v := tok.Vocab()
	require.True(t, v.AddSpacePrefix, "add_space_prefix defaults to true")
	require.True(t, v.AddBOS)
	require.False(t, v.AddEOS)
	require.Equal(t, []int32{1, 2, 0, -1}, []int32{v.BOS, v.EOS, v.UNK, v.PAD})

	path := filepath.Join(vocabDir, llamaSPMVocab)
	inputs, want := readVocabCases(t, path)
	pass := 0
	for i, in := range inputs {
		got := tok.Encode(in, EncodeOptions{})
		dec, err := tok.Decode(got, DecodeOptions{})
		require.NoError(t, err)
		okEnc := slices.Equal(got, want[i])
		if !okEnc {
			t.Errorf("case %d %q:\n got  %v\n want %v", i, in, got, want[i])
		}
		if dec != in {
			t.Errorf("case %d %q: decodes to %q", i, in, dec)
		}
		if okEnc && dec == in {
			pass++
		}
		// With AddSpecial: BOS, then the same ids (ParseSpecial changes
		// nothing, the strings hold no special token).
		withBOS := tok.Encode(in, EncodeOptions{AddSpecial: true, ParseSpecial: true})
		require.Equal(t, append([]int32{1}, got...), withBOS, "case %d", i)
	}
	t.Logf("%s (%s): %d/%d cases pass", llamaSPMVocab, tok, pass, len(inputs))
	assert.Equal(t, len(inputs), pass)
}

func TestLlamaSPMSpecial(t *testing.T) {
	tok := loadLlamaSPM(t)
	enc := func(s string, o EncodeOptions) []int32 { return tok.Encode(s, o) }
	dec := func(ids []int32, o DecodeOptions) string {
		s, err := tok.Decode(ids, o)
		require.NoError(t, err)
		return s
	}
	assert.Equal(t, []int32{15043}, enc("Hello", EncodeOptions{}))
	assert.Equal(t, []int32{1, 15043}, enc("Hello", EncodeOptions{AddSpecial: true}))
	// OG SentencePiece: "" with add_special is [BOS], without it [].
	assert.Equal(t, []int32{1}, enc("", EncodeOptions{AddSpecial: true}))
	assert.Empty(t, enc("", EncodeOptions{}))

	// A special token is followed by a space prefix, as in llama.cpp.
	assert.Equal(t, []int32{15043, 2, 15043}, enc("Hello</s>Hello", EncodeOptions{ParseSpecial: true}))
	assert.Equal(t, []int32{1, 15043, 2, 15043}, enc("<s>Hello</s>Hello", EncodeOptions{ParseSpecial: true}))
	plain := enc("Hello</s>Hello", EncodeOptions{})
	assert.NotContains(t, plain, int32(2))
	assert.Equal(t, "Hello</s>Hello", dec(plain, DecodeOptions{}))
	// <unk> is matched only with ParseSpecial, like control tokens.
	assert.Equal(t, []int32{0}, enc("<unk>", EncodeOptions{ParseSpecial: true}))
	assert.NotContains(t, enc("<unk>", EncodeOptions{}), int32(0))

	// Decoding: the first token loses its leading space; a leading BOS
	// (kept, or dropped by RemoveSpecial) is the first token instead, so
	// the space stays, as in llama.cpp's detokenize.
	assert.Equal(t, "Hello", dec([]int32{15043}, DecodeOptions{}))
	assert.Equal(t, " Hello", dec([]int32{1, 15043}, DecodeOptions{}))
	assert.Equal(t, "<s> Hello", dec([]int32{1, 15043}, DecodeOptions{Special: true}))
	assert.Equal(t, " Hello", dec([]int32{1, 15043}, DecodeOptions{RemoveSpecial: true, Special: true}))
	assert.Equal(t, "Hello Hello", dec([]int32{15043, 15043}, DecodeOptions{}))
	// EOS is not added, so RemoveSpecial keeps it.
	assert.Equal(t, "Hello</s>", dec([]int32{15043, 2}, DecodeOptions{RemoveSpecial: true, Special: true}))
	assert.Equal(t, "Hello<unk>", dec([]int32{15043, 0}, DecodeOptions{Special: true}))
	assert.Equal(t, "Hello", dec([]int32{15043, 0}, DecodeOptions{}))
	// Byte tokens.
	assert.Equal(t, "\n", dec([]int32{13}, DecodeOptions{}))
	assert.Equal(t, "\xff", dec([]int32{258}, DecodeOptions{}))
	p, err := tok.Piece(15043, DecodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, " Hello", p)
	_, err = tok.Decode([]int32{32000}, DecodeOptions{})
	require.ErrorContains(t, err, "out of range")

	// Without add_space_prefix nothing is put before the text, and decoding
	// keeps the leading space.
	m := map[string]any{}
	for _, kv := range tok.GGUF() {
		m[kv.Key] = kv.Value
	}
	m[KeyAddSpacePrefix] = false
	np, err := FromGGUF(func(k string) (any, bool) { v, ok := m[k]; return v, ok })
	require.NoError(t, err)
	assert.Equal(t, []int32{15043}, np.Encode(" Hello", EncodeOptions{}))
	assert.NotEqual(t, []int32{15043}, np.Encode("Hello", EncodeOptions{}))
	assert.Equal(t, []int32{1, 15043, 2, 15043}, np.Encode(" Hello</s> Hello", EncodeOptions{AddSpecial: true, ParseSpecial: true}))
	assert.Equal(t, " Hello", dec2(t, np, []int32{15043}))
	assert.Equal(t, "Hello", dec2(t, np, np.Encode("Hello", EncodeOptions{})))

	// Write it out with GGUF and read it back: same vocabulary.
	kvs := tok.GGUF()
	m = map[string]any{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	assert.Equal(t, "llama", m[KeyModel])
	assert.Equal(t, "default", m[KeyPre])
	assert.Equal(t, true, m[KeyAddSpacePrefix])
	assert.NotContains(t, m, KeyMerges)
	assert.Len(t, m[KeyScores], 32000)
	back, err := FromKVs(kvs)
	require.NoError(t, err)
	assert.Equal(t, tok.Vocab(), back.Vocab())
}

func dec2(t *testing.T, tok *Tokenizer, ids []int32) string {
	t.Helper()
	s, err := tok.Decode(ids, DecodeOptions{})
	require.NoError(t, err)
	return s
}

// referenceSPM tokenizes escaped text the simple way: repeatedly merge the
// leftmost adjacent pair whose concatenation is the token of highest score.
func referenceSPM(tok *Tokenizer, text string) []int32 {
	var syms []string
	for i := 0; i < len(text); {
		n := min(int(utf8SeqLen(text[i])), len(text)-i)
		syms = append(syms, text[i:i+n])
		i += n
	}
	scores := tok.Vocab().Scores
	for {
		best := -1
		var bestScore float32
		for i := 0; i+1 < len(syms); i++ {
			id, ok := tok.ID(syms[i] + syms[i+1])
			if !ok {
				continue
			}
			var sc float32
			if scores != nil {
				sc = scores[id]
			}
			if best < 0 || sc > bestScore {
				best, bestScore = i, sc
			}
		}
		if best < 0 {
			break
		}
		syms = slices.Replace(syms, best, best+2, syms[best]+syms[best+1])
	}
	var ids []int32
	for _, s := range syms {
		if id, ok := tok.ID(s); ok {
			ids = append(ids, id)
			continue
		}
		for _, c := range []byte(s) {
			if id := tok.byteTok[c]; id >= 0 {
				ids = append(ids, id)
			} else if tok.Vocab().UNK >= 0 {
				ids = append(ids, tok.Vocab().UNK)
			}
		}
	}
	return ids
}

// spmRandomText mixes words, spaces, unicode and random bytes (no "▁",
// which decodes to a space).
func spmRandomText(rng *rand.Rand, n int) string {
	parts := []string{"the", " the", "Hello", " world", "func", "(", ")", " {", "\n", "\t", "  ", " ", "'s",
		"123", "4", ".", ",", "é", "Привет", "世界", "🦙", "\u0303", "<s", ">", "\xff", "\xe4\xb8", "==", "ẞ", "ǅ"}
	var sb strings.Builder
	for range n {
		if rng.IntN(8) == 0 {
			sb.WriteByte(byte(rng.IntN(256)))
		} else {
			sb.WriteString(parts[rng.IntN(len(parts))])
		}
	}
	return strings.ReplaceAll(sb.String(), spaceEscape, "")
}

// TestLlamaSPMReference compares the queue-based merging with the simple
// algorithm on random text, and checks that decoding undoes encoding.
func TestLlamaSPMReference(t *testing.T) {
	tok := loadLlamaSPM(t)
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range 400 {
		var in string
		if i%3 == 0 {
			b := make([]byte, rng.IntN(48))
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			in = strings.ReplaceAll(string(b), spaceEscape, "")
		} else {
			in = spmRandomText(rng, 1+rng.IntN(30))
		}
		got := tok.Encode(in, EncodeOptions{})
		if in != "" {
			want := referenceSPM(tok, strings.ReplaceAll(" "+in, " ", spaceEscape))
			require.Equal(t, want, got, "encoding of %q", in)
		}
		dec, err := tok.Decode(got, DecodeOptions{})
		require.NoError(t, err)
		if utf8.ValidString(in) {
			require.Equal(t, in, dec, "round trip of %q", in)
		} else {
			// As in llama.cpp, a byte that begins a multi-byte sequence
			// takes the next bytes with it, even a space's "▁", which then
			// decodes from byte tokens as "▁", not as a space.
			require.Equal(t, in, strings.ReplaceAll(dec, spaceEscape, " "), "round trip of %q", in)
		}
	}
}

// smallSPM builds a SentencePiece vocabulary by hand. Byte tokens exist for
// a few bytes only; "x" has no byte token but is a token itself.
func smallSPM(t *testing.T, addSpacePrefix bool) *Tokenizer {
	t.Helper()
	var tokens []string
	var types []TokenType
	var scores []float32
	add := func(s string, ty TokenType, score float32) int32 {
		tokens = append(tokens, s)
		types = append(types, ty)
		scores = append(scores, score)
		return int32(len(tokens) - 1)
	}
	add("<unk>", TypeUnknown, 0) // 0
	add("<s>", TypeControl, 0)   // 1
	add("</s>", TypeControl, 0)  // 2
	add("<0x0A>", TypeByte, 0)   // 3
	add("<0xC3>", TypeByte, 0)   // 4
	add("<0xA9>", TypeByte, 0)   // 5
	add("<0x20>", TypeByte, 0)   // 6
	for i, s := range []string{"▁", "h", "e", "l", "o", "a", "b", "c", "x", "w", "r", "d"} {
		add(s, TypeNormal, float32(-100-i)) // 7..18
	}
	add("he", TypeNormal, -5)         // 19
	add("ll", TypeNormal, -6)         // 20
	add("hell", TypeNormal, -7)       // 21
	add("hello", TypeNormal, -8)      // 22
	add("▁hello", TypeNormal, -9)     // 23
	add("ab", TypeNormal, -3)         // 24
	add("bc", TypeNormal, -2)         // 25: beats "ab"
	add("▁▁", TypeNormal, -50)        // 26
	add("<tool>", TypeUserDefined, 0) // 27
	add("cc", TypeNormal, -4)         // 28: "ccc" ties, leftmost wins
	add("unused", TypeUnused, 0)      // 29
	tok, err := New(Vocab{
		Model: ModelLlama, Pre: "default",
		Tokens: tokens, Types: types, Scores: scores,
		BOS: 1, EOS: 2, UNK: 0, PAD: -1,
		AddBOS: true, AddEOS: true, AddSpacePrefix: addSpacePrefix,
	})
	require.NoError(t, err)
	return tok
}

func TestSmallSPM(t *testing.T) {
	tok := smallSPM(t, true)
	assert.Equal(t, ModelLlama, tok.Model())
	assert.Equal(t, "default", tok.Pre())
	enc := func(s string, o EncodeOptions) []int32 { return tok.Encode(s, o) }
	dec := func(ids []int32, o DecodeOptions) string {
		s, err := tok.Decode(ids, o)
		require.NoError(t, err)
		return s
	}
	assert.Equal(t, []int32{23}, enc("hello", EncodeOptions{}))
	assert.Equal(t, []int32{23, 23}, enc("hello hello", EncodeOptions{}))
	assert.Equal(t, []int32{7, 16, 22}, enc("whello", EncodeOptions{}))
	// Highest score first: "bc" (-2) before "ab" (-3).
	assert.Equal(t, []int32{7, 12, 25}, enc("abc", EncodeOptions{}))
	// Equal scores: leftmost first.
	assert.Equal(t, []int32{7, 28, 14}, enc("ccc", EncodeOptions{}))
	// Byte fallback: "é" is no token, its bytes are; "€" has no byte
	// tokens: UNK for each byte; "ÿ" (C3 BF) has one of two.
	assert.Equal(t, []int32{7, 4, 5}, enc("é", EncodeOptions{}))
	assert.Equal(t, []int32{7, 0, 0, 0}, enc("€", EncodeOptions{}))
	assert.Equal(t, []int32{7, 4, 0}, enc("ÿ", EncodeOptions{}))
	assert.Equal(t, []int32{7, 3}, enc("\n", EncodeOptions{}))
	// "▁" + "x": "x" is a token.
	assert.Equal(t, []int32{7, 15}, enc("x", EncodeOptions{}))
	// Spaces: "▁hello" (-9) wins over "▁▁" (-50).
	assert.Equal(t, []int32{7, 23}, enc(" hello", EncodeOptions{}))
	assert.Equal(t, []int32{26}, enc(" ", EncodeOptions{}))
	// Special tokens: BOS and EOS with AddSpecial; control ones only with
	// ParseSpecial; user-defined always; a space prefix after each.
	assert.Equal(t, []int32{1, 23, 2}, enc("hello", EncodeOptions{AddSpecial: true}))
	assert.Equal(t, []int32{1, 2}, enc("", EncodeOptions{AddSpecial: true}))
	assert.Empty(t, enc("", EncodeOptions{}))
	assert.Equal(t, []int32{23, 2, 23}, enc("hello</s>hello", EncodeOptions{ParseSpecial: true}))
	assert.Equal(t, []int32{23, 27, 23}, enc("hello<tool>hello", EncodeOptions{}))
	assert.Equal(t, []int32{27}, enc("<tool>", EncodeOptions{}))
	assert.NotContains(t, enc("hello</s>", EncodeOptions{}), int32(2))

	assert.Equal(t, "hello", dec([]int32{23}, DecodeOptions{}))
	assert.Equal(t, "hello hello", dec([]int32{23, 23}, DecodeOptions{}))
	assert.Equal(t, " hello", dec([]int32{7, 23}, DecodeOptions{}))
	assert.Equal(t, "  hello", dec([]int32{26, 23}, DecodeOptions{}), "only one space is removed")
	assert.Equal(t, "é", dec([]int32{7, 4, 5}, DecodeOptions{}))
	assert.Equal(t, "é", dec([]int32{4, 5}, DecodeOptions{}))
	assert.Equal(t, " ", dec([]int32{6, 6}, DecodeOptions{}), "a byte token's space is removed too")
	assert.Equal(t, "hello<tool> hello", dec([]int32{23, 27, 23}, DecodeOptions{}))
	assert.Equal(t, "hello hello", dec([]int32{23, 2, 23}, DecodeOptions{}))
	assert.Equal(t, "hello</s> hello", dec([]int32{23, 2, 23}, DecodeOptions{Special: true}))
	assert.Equal(t, "<s> hello</s>", dec([]int32{1, 23, 2}, DecodeOptions{Special: true}))
	// RemoveSpecial drops the added BOS and EOS; the space stays.
	assert.Equal(t, " hello", dec([]int32{1, 23, 2}, DecodeOptions{Special: true, RemoveSpecial: true}))
	assert.Equal(t, "hello", dec([]int32{23, 2}, DecodeOptions{Special: true, RemoveSpecial: true}))
	assert.Equal(t, "", dec([]int32{29}, DecodeOptions{Special: true}), "unused tokens decode to nothing")
	assert.Equal(t, "", dec(nil, DecodeOptions{}))
	for _, s := range []string{"hello", " hello  hello ", "abc\nccc", "é ÿx", "", " ", "\xff\xe4\xb8"} {
		ids := tok.Encode(s, EncodeOptions{})
		if strings.Contains(s, "ÿ") || strings.Contains(s, "\xff") || strings.Contains(s, "\xe4") {
			assert.Contains(t, ids, int32(0), "%q: UNK for bytes without tokens", s)
			continue
		}
		assert.Equal(t, s, dec(ids, DecodeOptions{}), "round trip of %q", s)
	}

	// Without the space prefix.
	np := smallSPM(t, false)
	assert.Equal(t, []int32{22}, np.Encode("hello", EncodeOptions{}))
	assert.Equal(t, []int32{23}, np.Encode(" hello", EncodeOptions{}))
	assert.Equal(t, []int32{22, 2, 22}, np.Encode("hello</s>hello", EncodeOptions{ParseSpecial: true}))
	assert.Equal(t, []int32{1, 22, 2}, np.Encode("hello", EncodeOptions{AddSpecial: true}))
	assert.Equal(t, []int32{12, 25}, np.Encode("abc", EncodeOptions{}))
	for _, c := range []struct {
		ids  []int32
		want string
	}{{[]int32{22}, "hello"}, {[]int32{23}, " hello"}, {[]int32{23, 23}, " hello hello"}, {[]int32{6, 22}, " hello"}} {
		got, err := np.Decode(c.ids, DecodeOptions{})
		require.NoError(t, err)
		assert.Equal(t, c.want, got)
	}
	for _, s := range []string{"hello", " hello", "  hello ", "abc\n"} {
		got, err := np.Decode(np.Encode(s, EncodeOptions{}), DecodeOptions{})
		require.NoError(t, err)
		assert.Equal(t, s, got)
	}
}

func TestSPMByteFallbackToRawByte(t *testing.T) {
	// No "<0xNN>" tokens and no UNK: a byte falls back to the token that is
	// the byte itself, or is dropped.
	tok, err := New(Vocab{
		Model: ModelLlama, Tokens: []string{"▁", "a", "\xc3", "<s>"},
		Types: []TokenType{TypeNormal, TypeNormal, TypeNormal, TypeControl},
		BOS:   3, EOS: -1, UNK: -1, PAD: -1, AddSpacePrefix: true,
	})
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1, 2}, tok.Encode("aé", EncodeOptions{}))
	assert.Nil(t, tok.Vocab().Scores)
	assert.Equal(t, "llama SentencePiece tokenizer, 4 tokens", tok.String())
}

func TestSPMNewErrors(t *testing.T) {
	base := func() Vocab {
		return Vocab{
			Model: ModelLlama, Tokens: []string{"<unk>", "<s>", "</s>", "<0x41>", "▁a"},
			Types: []TokenType{TypeUnknown, TypeControl, TypeControl, TypeByte, TypeNormal},
			BOS:   1, EOS: 2, UNK: 0, PAD: -1,
		}
	}
	_, err := New(base())
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		edit func(v *Vocab)
		want string
	}{
		{"model", func(v *Vocab) { v.Model = "t5" }, `unknown model "t5"`},
		{"scores", func(v *Vocab) { v.Scores = []float32{1} }, "1 token scores for 5 tokens"},
		{"byte token", func(v *Vocab) { v.Tokens[3] = "<0xZZ>" }, `byte token 3 "<0xZZ>" is not <0xNN>`},
		{"byte token length", func(v *Vocab) { v.Tokens[3] = "A" }, `byte token 3 "A"`},
		{"dup", func(v *Vocab) { v.Tokens[4] = "<s>" }, `token "<s>" appears twice`},
		{"eos", func(v *Vocab) { v.EOS = 5 }, "EOS id 5 is not a token"},
	} {
		v := base()
		c.edit(&v)
		_, err := New(v)
		require.ErrorContains(t, err, c.want, c.name)
	}
	// Any pre is accepted (llama.cpp ignores it for this model).
	v := base()
	v.Pre = "klingon"
	_, err = New(v)
	require.NoError(t, err)
	b, ok := parseByteToken("<0xa9>")
	assert.True(t, ok)
	assert.Equal(t, byte(0xa9), b)
}

func TestSPMGGUFRoundTrip(t *testing.T) {
	for _, prefix := range []bool{true, false} {
		tok := smallSPM(t, prefix)
		kvs := tok.GGUF()
		m := map[string]any{}
		for _, kv := range kvs {
			_, ok := gguffile.KV{Key: kv.Key, Value: kv.Value}.Type()
			require.True(t, ok, "%s: %T is no GGUF type", kv.Key, kv.Value)
			m[kv.Key] = kv.Value
		}
		assert.Equal(t, "llama", m[KeyModel])
		assert.Equal(t, prefix, m[KeyAddSpacePrefix])
		assert.IsType(t, []float32{}, m[KeyScores])
		assert.Equal(t, float32(-2), m[KeyScores].([]float32)[25])
		assert.Equal(t, int32(TypeByte), m[KeyTokenType].([]int32)[3])
		assert.Equal(t, uint32(0), m[KeyUNK])
		assert.Equal(t, true, m[KeyAddEOS])
		assert.NotContains(t, m, KeyMerges)

		back, err := FromKVs(kvs)
		require.NoError(t, err)
		assert.Equal(t, tok.Vocab(), back.Vocab())
		for _, in := range []string{"hello hello", "abc é", "hello</s><tool>ccc", ""} {
			for _, o := range []EncodeOptions{{}, {ParseSpecial: true, AddSpecial: true}} {
				require.Equal(t, tok.Encode(in, o), back.Encode(in, o))
			}
		}

		// Through a real GGUF file.
		path := filepath.Join(t.TempDir(), "spm.gguf")
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
}

func TestSPMFromGGUF(t *testing.T) {
	good := func() map[string]any {
		return map[string]any{
			KeyModel:     "llama",
			KeyTokens:    []string{"<unk>", "<s>", "</s>", "<0x41>", "▁a"},
			KeyTokenType: []int32{2, 3, 3, 6, 1},
			KeyScores:    []float32{0, 0, 0, 0, -1},
		}
	}
	get := func(m map[string]any) func(string) (any, bool) {
		return func(k string) (any, bool) { v, ok := m[k]; return v, ok }
	}
	// llama.cpp's defaults: BOS 1, EOS 2, UNK 0, add_bos, add_space_prefix;
	// no merges needed.
	tok, err := FromGGUF(get(good()))
	require.NoError(t, err)
	v := tok.Vocab()
	assert.Equal(t, []int32{1, 2, 0, -1}, []int32{v.BOS, v.EOS, v.UNK, v.PAD})
	assert.True(t, v.AddBOS)
	assert.False(t, v.AddEOS)
	assert.True(t, v.AddSpacePrefix)
	assert.Equal(t, "", tok.Pre())
	assert.Equal(t, []int32{1, 4}, tok.Encode("a", EncodeOptions{AddSpecial: true}))
	// "▁" is no token and has no byte tokens: UNK for its three bytes.
	assert.Equal(t, []int32{0, 0, 0, 3}, tok.Encode("A", EncodeOptions{}))
	// No pre is written back when there was none.
	for _, kv := range tok.GGUF() {
		assert.NotEqual(t, KeyPre, kv.Key)
	}

	m := good()
	m[KeyAddSpacePrefix] = false
	m[KeyAddBOS] = false
	m[KeyBOS] = uint32(2)
	delete(m, KeyScores)
	delete(m, KeyTokenType)
	tok, err = FromGGUF(get(m))
	require.NoError(t, err)
	v = tok.Vocab()
	assert.False(t, v.AddSpacePrefix)
	assert.False(t, v.AddBOS)
	assert.Equal(t, int32(2), v.BOS)
	assert.Nil(t, v.Scores)
	assert.Equal(t, TypeNormal, tok.TokenType(0))
	assert.Equal(t, []int32{4}, tok.Encode(" a", EncodeOptions{AddSpecial: true}))

	for _, c := range []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"scores type", func(m map[string]any) { m[KeyScores] = []float64{1} }, "tokenizer.ggml.scores is []float64, want []float32"},
		{"scores length", func(m map[string]any) { m[KeyScores] = []float32{1} }, "tokenizer.ggml.scores has 1 entries for 5 tokens"},
		{"add_space_prefix type", func(m map[string]any) { m[KeyAddSpacePrefix] = "yes" }, "add_space_prefix is string, want bool"},
		{"byte token", func(m map[string]any) { m[KeyTokens].([]string)[3] = "<0x4>" }, "is not <0xNN>"},
		{"tokens", func(m map[string]any) { delete(m, KeyTokens) }, "tokenizer.ggml.tokens is missing"},
		{"one token", func(m map[string]any) { m[KeyTokens] = []string{"a"}; delete(m, KeyTokenType); delete(m, KeyScores) }, "BOS is to be added"},
	} {
		m := good()
		c.edit(m)
		_, err := FromGGUF(get(m))
		require.ErrorContains(t, err, c.want, c.name)
	}
}
