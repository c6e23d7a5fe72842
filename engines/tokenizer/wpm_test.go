package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWPMWords checks BERT's basic tokenization on cases worked out by hand from llama.cpp's
// WordPiece preprocess (TestSyntheticOracle compares it with llama.cpp itself).
func TestWPMWords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello, World!", []string{"hello", ",", "world", "!"}},
		// Precomposed accents are dropped, combining ones kept; Hangul keeps its first jamo.
		{"Café NAÏVE e\u0301", []string{"cafe", "naive", "e\u0301"}},
		{"한", []string{"\u1112"}},
		// CJK ideographs are words of their own, kana are not.
		{"日本語のテキスト", []string{"日", "本", "語", "のテキスト"}},
		// ASCII symbols split, others do not; controls, NUL and U+FFFD vanish.
		{"a+b€c\x00d\x01e\ufffdf\u00adg", []string{"a", "+", "b€cdefg"}},
		// All white space separates; invalid UTF-8 is dropped.
		{"x\u3000y\u00a0z\t\n w\xffv", []string{"x", "y", "z", "wv"}},
	} {
		assert.Equal(t, c.want, wpmWords(c.in, nil), "words of %q", c.in)
	}
}

// wpmTestVocab is a small WordPiece vocabulary in llama.cpp's GGUF form.
func wpmTestVocab() Vocab {
	toks := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "▁un", "▁unaffable", "aff", "able", "▁the", ",", "▁,", "▁a", "a", "b"}
	types := make([]TokenType, len(toks))
	for i := range types {
		types[i] = TypeNormal
	}
	types[0], types[1], types[2], types[3], types[4] = TypeControl, TypeUnknown, TypeControl, TypeControl, TypeControl
	return Vocab{Model: ModelBERT, Tokens: toks, Types: types, BOS: 2, EOS: -1, UNK: 1, PAD: 0, SEP: 3, AddBOS: true}
}

func TestWPMEncode(t *testing.T) {
	tok, err := New(wpmTestVocab())
	require.NoError(t, err)
	// Greedy longest match from the word start, continuations bare; a word that cannot be cut
	// whole is one [UNK]; AddSpecial adds [CLS] and [SEP].
	assert.Equal(t, []int32{2, 6, 6, 8, 5, 7, 13, 14, 11, 9, 1, 12, 13, 14, 3},
		tok.Encode("UNAFFABLE unaffableable unaffab, the xyz aab", EncodeOptions{AddSpecial: true}))
	assert.Equal(t, []int32{2, 3}, tok.Encode("", EncodeOptions{AddSpecial: true}))
	// Special-token text is only a token with ParseSpecial.
	assert.Equal(t, []int32{2, 9}, tok.Encode("[CLS]the", EncodeOptions{ParseSpecial: true}))
	assert.Equal(t, []int32{1, 1, 1, 9}, tok.Encode("[CLS]the", EncodeOptions{}))
	// Word starts decode with a space, which the first word keeps (add_space_prefix is off,
	// as llama.cpp has it); RemoveSpecial drops [CLS] (add_bos), not [SEP].
	ids := tok.Encode("unaffab the", EncodeOptions{AddSpecial: true})
	text, err := tok.Decode(ids, DecodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, " unaffab the", text)
	text, err = tok.Decode(ids, DecodeOptions{Special: true, RemoveSpecial: true})
	require.NoError(t, err)
	assert.Equal(t, " unaffab the[SEP]", text)
	assert.Equal(t, "bert WordPiece tokenizer, 15 tokens", tok.String())
	assert.Equal(t, int32(3), tok.SEP())
}

func TestWPMGGUF(t *testing.T) {
	tok, err := New(wpmTestVocab())
	require.NoError(t, err)
	m := map[string]any{}
	for _, kv := range tok.GGUF() {
		m[kv.Key] = kv.Value
	}
	assert.Equal(t, "bert", m[KeyModel])
	assert.Equal(t, uint32(3), m[KeySEP])
	assert.NotContains(t, m, KeyMerges)
	assert.NotContains(t, m, KeyPre)
	back, err := FromKVs(tok.GGUF())
	require.NoError(t, err)
	assert.Equal(t, tok.Vocab(), back.Vocab())

	// llama.cpp's defaults: [UNK] 100, [CLS] 101, [SEP] 102, [PAD] 0.
	toks := make([]string, 110)
	for i := range toks {
		toks[i] = string(rune('a' + i))
	}
	def, err := FromKVs([]KV{{KeyModel, "bert"}, {KeyTokens, toks}})
	require.NoError(t, err)
	v := def.Vocab()
	assert.Equal(t, []int32{100, 101, 102, 0, -1}, []int32{v.UNK, v.BOS, v.SEP, v.PAD, v.EOS})
	assert.Equal(t, []bool{true, false, false}, []bool{v.AddBOS, v.AddEOS, v.AddSpacePrefix})
	assert.Equal(t, []int32{101, 100, 102}, def.Encode("b", EncodeOptions{AddSpecial: true}))

	// A vocabulary too small for the defaults lacks [CLS], which encoding adds.
	_, err = FromKVs([]KV{{KeyModel, "bert"}, {KeyTokens, toks[:50]}})
	require.ErrorContains(t, err, "BOS is to be added but tokenizer.ggml.bos_token_id is missing")
	bad := wpmTestVocab()
	bad.SEP = -1
	_, err = New(bad)
	require.ErrorContains(t, err, "needs a SEP ([SEP]) token")
	bad.SEP = 99
	_, err = New(bad)
	require.ErrorContains(t, err, "SEP id 99 is not a token")
}
