package grammar

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/internal/gguffile"
)

// vocabDir is llama.cpp's vocabulary test folder, beside the checkout.
const vocabDir = "../../../shared/testdata/vocab"

// starcoderVocab is the Vocab of llama.cpp's starcoder vocabulary: 49152 tokens, SmolLM2's size
// and kind (byte-level BPE).
func starcoderVocab(tb testing.TB) (*tokenizer.Tokenizer, *Vocab) {
	return vocabFile(tb, "ggml-vocab-starcoder.gguf")
}

// vocabFile is the tokenizer of one of llama.cpp's test vocabularies and its Vocab.
func vocabFile(tb testing.TB, name string) (*tokenizer.Tokenizer, *Vocab) {
	tb.Helper()
	path := filepath.Join(vocabDir, name)
	if _, err := os.Stat(path); err != nil {
		tb.Skipf("llama.cpp's vocabulary test files not found at %s (they lie beside the checkout): %v", vocabDir, err)
	}
	f, err := gguffile.ReadFile(path)
	require.NoError(tb, err)
	tok, err := tokenizer.FromGGUF(f.Get)
	require.NoError(tb, err)
	return tok, VocabOf(tok)
}

// BenchmarkMask times one step's mask on a 49152-token vocabulary, in the states of a JSON
// object as a generation meets them: "walk" computes every mask (the trie walk, with the
// automaton's transitions already made), "cached" applies the mask kept for the state,
// "fresh" starts a new Matcher each time (transitions and masks made from nothing).
func BenchmarkMask(b *testing.B) {
	_, v := starcoderVocab(b)
	g := MustParse(JSONObject)
	text := []byte(`{"name": "Ada Lovelace", "born": 1815, "tags": ["math", "engine"], "ok": true}`)
	logits := make([]float32, v.Size())
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range logits {
		logits[i] = float32(rng.NormFloat64())
	}
	dropMasks := func(m *Matcher) {
		for _, s := range m.states {
			s.mask = nil
		}
		m.masks = 0
	}
	step := func(b *testing.B, m *Matcher, drop bool) {
		for i := 0; b.Loop(); i++ {
			j := i % len(text)
			if j == 0 {
				m.cur = m.start
			}
			if drop {
				dropMasks(m)
			}
			m.Mask(logits)
			require.NoError(b, m.AcceptBytes(text[j:j+1]))
		}
	}
	b.Run("walk", func(b *testing.B) { step(b, g.NewMatcher(v), true) })
	b.Run("cached", func(b *testing.B) { step(b, g.NewMatcher(v), false) })
	b.Run("fresh", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			m := g.NewMatcher(v)
			require.NoError(b, m.AcceptBytes(text[:i%len(text)]))
			m.Mask(logits)
		}
	})
}
