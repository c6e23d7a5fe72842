package tokenizer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMaxTokenBytes checks MaxTokenBytes' bound on random texts and on the texts that come
// closest to it (its longest token's text repeated, special tokens back to back), over byte-level
// and SentencePiece vocabularies (trained, synthetic, built by hand, and llama.cpp's when they
// are beside the checkout), with and without special tokens parsed: a text of n bytes never
// encodes to fewer than n / MaxTokenBytes tokens. A vocabulary that drops a byte says so.
func TestMaxTokenBytes(t *testing.T) {
	trained, _ := trainSample(t, 400, TrainOptions{})
	synthetic, err := Synthetic(1000)
	require.NoError(t, err)
	toks := map[string]*Tokenizer{"trained": trained, "synthetic": synthetic, "small": smallVocab(t),
		"small spm": smallSPM(t, true), "small spm, no space prefix": smallSPM(t, false)}
	if paths, _ := filepath.Glob(filepath.Join(vocabDir, "*.gguf")); len(paths) > 0 {
		for _, p := range paths {
			toks[filepath.Base(p)] = loadVocab(t, p)
		}
	} else if _, err := os.Stat(vocabDir); err != nil {
		t.Logf("llama.cpp's vocabularies are not at %s: the built ones only", vocabDir)
	}
	rng := rand.New(rand.NewPCG(41, 2))
	for name, tok := range toks {
		n, every := tok.MaxTokenBytes()
		require.True(t, every, name)
		require.Positive(t, n, name)
		v := tok.Vocab()
		longest, specials := "", ""
		for i, s := range v.Tokens {
			piece, _ := tok.Piece(int32(i), DecodeOptions{})
			if len(piece) > len(longest) {
				longest = piece
			}
			if tok.Model() == ModelLlama && v.Types[i] == TypeNormal && len(s) > len(longest) {
				longest = s // its "▁" written as such in the text
			}
			if v.Types[i] == TypeControl || v.Types[i] == TypeUserDefined {
				specials += s
			}
		}
		texts := []string{strings.Repeat(longest, 20), specials, strings.Repeat(specials, 3), strings.Repeat(" ", 300), strings.Repeat("\xff", 50)}
		for range 300 {
			switch rng.IntN(3) {
			case 0:
				texts = append(texts, randomText(rng, 1+rng.IntN(60)))
			case 1:
				texts = append(texts, spmRandomText(rng, 1+rng.IntN(60)))
			default:
				b := make([]byte, 1+rng.IntN(100))
				for i := range b {
					b[i] = byte(rng.IntN(256))
				}
				texts = append(texts, string(b))
			}
		}
		fewest := 1e9
		for _, text := range texts {
			if text == "" {
				continue
			}
			for _, opts := range []EncodeOptions{{}, {ParseSpecial: true}} {
				ids := tok.Encode(text, opts)
				require.GreaterOrEqual(t, len(ids)*n, len(text), "%s: %q (%v) encodes to %d tokens of at most %d bytes", name, text, opts, len(ids), n)
				fewest = min(fewest, float64(len(ids))*float64(n)/float64(len(text)))
			}
		}
		t.Logf("%s: at most %d bytes a token; the closest text had %.2f× the bound's tokens", name, n, fewest)
	}

	// A byte-level vocabulary without "z" and without UNK drops it.
	var tokens []string
	for b := 0; b < 256; b++ {
		if b != 'z' {
			tokens = append(tokens, MapBytes(string([]byte{byte(b)})))
		}
	}
	gappy, err := New(Vocab{Pre: "gpt-2", Tokens: tokens, BOS: -1, EOS: -1, UNK: -1, PAD: -1})
	require.NoError(t, err)
	_, every := gappy.MaxTokenBytes()
	assert.False(t, every)
	assert.Empty(t, gappy.Encode("zzzz", EncodeOptions{}), "the bound would not hold")
}
