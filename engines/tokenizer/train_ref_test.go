package tokenizer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// referenceTrain is byte-level BPE training as the textbook states it, with none of Train's
// bookkeeping: after every merge it counts every adjacent pair of every distinct chunk again
// (weighted by the chunk's count), merges the most frequent pair (ties to the pair whose bytes
// sort first; a pair whose mapped form is a special token's text is never merged) left to
// right, without overlaps, in every chunk, and stops at vocabSize tokens or when the best pair
// occurs fewer than MinFrequency times. Symbols are their bytes. It returns the tokens (mapped
// forms; specials as given) and the merges, to compare with Train's.
func referenceTrain(t *testing.T, texts [][]byte, vocabSize int, opts TrainOptions) (tokens, merges []string) {
	pre, err := lookupPre(cmpOr(opts.Pre, "gpt-2"))
	require.NoError(t, err)
	special := opts.Special
	if special == nil {
		special = []string{DefaultSpecial}
	}
	minFreq := int64(opts.MinFrequency)
	if minFreq <= 0 {
		minFreq = 2
	}
	tokens = slices.Clone(special)
	for b := 0; b < 256; b++ {
		tokens = append(tokens, MapBytes(string([]byte{byte(b)})))
	}
	counted, err := countChunks(context.Background(), slices.Values(texts), pre, special)
	require.NoError(t, err)
	type chunk struct {
		syms []string
		n    int64
	}
	chunks := make([]chunk, len(counted))
	for i, w := range counted {
		for _, b := range w.syms {
			chunks[i].syms = append(chunks[i].syms, string([]byte{byte(b)}))
		}
		chunks[i].n = w.n
	}
	type pair struct{ a, b string }
	banned := map[pair]bool{}
	known := map[string]bool{}
	for b := 0; b < 256; b++ {
		known[string([]byte{byte(b)})] = true
	}
	for len(tokens) < vocabSize {
		counts := map[pair]int64{}
		for _, c := range chunks {
			for i := 0; i+1 < len(c.syms); i++ {
				counts[pair{c.syms[i], c.syms[i+1]}] += c.n
			}
		}
		var best pair
		var bestN int64
		for p, n := range counts {
			if banned[p] || n < bestN {
				continue
			}
			if n > bestN || p.a < best.a || p.a == best.a && p.b < best.b {
				best, bestN = p, n
			}
		}
		if bestN == 0 || bestN < minFreq {
			break
		}
		joined := best.a + best.b
		if slices.Contains(special, MapBytes(joined)) {
			banned[best] = true
			continue
		}
		if !known[joined] {
			known[joined] = true
			tokens = append(tokens, MapBytes(joined))
		}
		merges = append(merges, MapBytes(best.a)+" "+MapBytes(best.b))
		for ci := range chunks {
			s := chunks[ci].syms
			out := s[:0]
			for i := 0; i < len(s); i++ {
				if i+1 < len(s) && s[i] == best.a && s[i+1] == best.b {
					out = append(out, joined)
					i++
				} else {
					out = append(out, s[i])
				}
			}
			chunks[ci].syms = out
		}
	}
	return tokens, merges
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// randomTexts makes texts from a seeded mix of what corpora hold: words of a small alphabet
// (so pairs repeat), runs of one character, white space of every kind, digits, punctuation,
// multi-byte and invalid UTF-8, and the special tokens.
func randomTexts(rng *rand.Rand, n int, special []string) [][]byte {
	words := []string{"the", "then", "there", "a", "an", "ab", "ba", "aab", "func", "return", "x", "y",
		"é", "été", "日本", "日本語", "🙂", "\xff\xfe", "it's", "we'll", "don't"}
	pieces := []func() string{
		func() string { return words[rng.IntN(len(words))] },
		func() string { return " " },
		func() string { return []string{"\n", "\t", "  ", "\r\n", "   \n"}[rng.IntN(5)] },
		func() string { return fmt.Sprint(rng.IntN(100000)) },
		func() string { return []string{".", ",", "(", ")", "{}", ":=", "!=", "...", "$", "+"}[rng.IntN(10)] },
		func() string { return strings.Repeat(string("ab. 1é"[rng.IntN(5)]), 1+rng.IntN(40)) },
		func() string {
			if len(special) == 0 {
				return "x"
			}
			return special[rng.IntN(len(special))]
		},
	}
	weights := []int{40, 25, 8, 6, 8, 4, 2}
	var texts [][]byte
	for range n {
		var b bytes.Buffer
		for range 20 + rng.IntN(200) {
			k := rng.IntN(93)
			for i, w := range weights {
				if k < w {
					b.WriteString(pieces[i]())
					break
				}
				k -= w
			}
		}
		texts = append(texts, b.Bytes())
	}
	return texts
}

// TestTrainMatchesReference trains on random texts with every pre-tokenizer family, special
// tokens (one whose text a merge would clash with), minimum frequencies and vocabulary sizes,
// and compares the vocabulary and the merges, in order, with referenceTrain's.
func TestTrainMatchesReference(t *testing.T) {
	pres := []string{"gpt-2", "llama3", "qwen2", "smollm", "default"}
	specials := [][]string{nil, {}, {"<s>", "</s>"}, {"Ġa", "<pad>"}, {"ĠĠ"}}
	for seed := range uint64(25) {
		rng := rand.New(rand.NewPCG(seed, 41))
		opts := TrainOptions{Pre: pres[seed%5], Special: specials[rng.IntN(len(specials))], MinFrequency: rng.IntN(4)}
		nSpecial := len(opts.Special)
		if opts.Special == nil {
			nSpecial = 1
		}
		vocab := nSpecial + 256 + 50 + rng.IntN(250)
		texts := randomTexts(rng, 3+rng.IntN(12), opts.Special)
		name := fmt.Sprintf("seed %d %s specials %q min %d vocab %d", seed, opts.Pre, opts.Special, opts.MinFrequency, vocab)
		tok, err := Train(slices.Values(texts), vocab, opts)
		require.NoError(t, err, name)
		wantTokens, wantMerges := referenceTrain(t, texts, vocab, opts)
		v := tok.Vocab()
		require.Equal(t, wantMerges, v.Merges, name)
		require.Equal(t, wantTokens, v.Tokens, name)
		assert.Greater(t, len(v.Merges), 20, "%s: the texts give merges to compare", name)
	}
}

// TestTrainRepeatedCharacter: a text that is one character repeated 800,000 times (one chunk
// of 800 KB, or a few) trains in about linear time — it took 117 s when each merged symbol was
// removed by moving the rest of the chunk — and gives the doubling merges the reference gives
// on a shorter run.
func TestTrainRepeatedCharacter(t *testing.T) {
	if testing.Short() {
		t.Skip("trains on 800 KB eight times")
	}
	for _, unit := range []string{"a", " ", "\n", "1", ".", "é", "\xff", "ab"} {
		text := bytes.Repeat([]byte(unit), 800_000/len(unit))
		start := time.Now()
		tok, err := Train(slices.Values([][]byte{text}), 2048, TrainOptions{})
		el := time.Since(start)
		require.NoError(t, err)
		t.Logf("800 KB of %q: %d tokens in %v", unit, tok.VocabSize(), el.Round(time.Millisecond))
		assert.Less(t, el, 10*time.Second, "%q: 800 KB of one character", unit)

		short := bytes.Repeat([]byte(unit), 5000/len(unit))
		tok, err = Train(slices.Values([][]byte{short}), 2048, TrainOptions{})
		require.NoError(t, err)
		_, wantMerges := referenceTrain(t, [][]byte{short}, 2048, TrainOptions{})
		assert.Equal(t, wantMerges, tok.Vocab().Merges, "%q", unit)
	}
}

// TestTrainCancelled: training stops when its context is done — before it starts, and in the
// middle of a long training — with an error that wraps the context's.
func TestTrainCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := TrainContext(ctx, slices.Values(docs("ab ab ab")), 300, TrainOptions{})
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "training interrupted")

	rng := rand.New(rand.NewPCG(1, 2))
	texts := randomTexts(rng, 4000, nil) // about 2 MB: seconds to count and merge
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = TrainContext(ctx, slices.Values(texts), 8000, TrainOptions{})
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Less(t, time.Since(start), 2*time.Second, "stopped soon after the deadline")
}
