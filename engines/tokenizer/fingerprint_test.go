package tokenizer

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFingerprint: a tokenizer's fingerprint survives its GGUF round trip (a checkpoint's
// tokenizer is the one it was trained as), and differs for tokenizers trained on other texts,
// of another size, or with another special token, even at the same vocabulary size.
func TestFingerprint(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 5))
	// text is 200 lines of random words over the letters: enough pairs to fill 300 tokens.
	text := func(letters string) [][]byte {
		var out [][]byte
		for range 200 {
			s := ""
			for range 30 {
				for range 2 + rng.IntN(6) {
					s += string(letters[rng.IntN(len(letters))])
				}
				s += " "
			}
			out = append(out, []byte(s))
		}
		return out
	}
	train := func(texts [][]byte, size int, special ...string) *Tokenizer {
		tok, err := Train(slices.Values(texts), size, TrainOptions{Special: special, EOS: special[0]})
		require.NoError(t, err)
		return tok
	}
	a, b := text("abcdefghijkl"), text("mnopqrstuvwx")
	toks := map[string]*Tokenizer{
		"a 300":         train(a, 300, "<|endoftext|>"),
		"b 300":         train(b, 300, "<|endoftext|>"),
		"a 290":         train(a, 290, "<|endoftext|>"),
		"a 300 special": train(a, 300, "<|endoftext|>", "<|im_end|>"),
	}
	require.Equal(t, toks["a 300"].VocabSize(), toks["b 300"].VocabSize(), "the same vocabulary size")
	seen := map[[32]byte]string{}
	for name, tok := range toks {
		fp := tok.Fingerprint()
		if other, ok := seen[fp]; ok {
			t.Errorf("%s and %s share a fingerprint", name, other)
		}
		seen[fp] = name
		kvs := map[string]any{}
		for _, kv := range tok.GGUF() {
			kvs[kv.Key] = kv.Value
		}
		back, err := FromGGUF(func(k string) (any, bool) { v, ok := kvs[k]; return v, ok })
		require.NoError(t, err)
		assert.Equal(t, fp, back.Fingerprint(), "%s: through GGUF", name)
		assert.Equal(t, name == "a 300", train(a, 300, "<|endoftext|>").Fingerprint() == fp, "%s: the same training gives the same fingerprint", name)
	}
}
