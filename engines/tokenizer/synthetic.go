package tokenizer

import "fmt"

// syntheticAlphabet is what Synthetic's merged tokens are spelled with.
const syntheticAlphabet = "abcdefghijklmnopqrstuvwxyz "

// Synthetic is a byte-level BPE vocabulary of exactly vocabSize tokens (at least 256) for a
// model with random weights, which needs a tokenizer of its vocabulary's size but no
// particular one (benchmarks of a preset's shape): the 256 byte tokens, then every string of
// two characters of lower-case letters and space, then of three, and so on until the
// vocabulary is full, each the merge of its first characters' token and its last character.
// It has no special tokens, so no end of text.
func Synthetic(vocabSize int) (*Tokenizer, error) {
	if vocabSize < 256 || vocabSize > 1<<24 {
		return nil, fmt.Errorf("tokenizer: a synthetic vocabulary of %d tokens: want 256 to %d", vocabSize, 1<<24)
	}
	tokens := make([]string, 0, vocabSize)
	for b := 0; b < 256; b++ {
		tokens = append(tokens, MapBytes(string([]byte{byte(b)})))
	}
	var merges []string
	prev := make([]string, len(syntheticAlphabet)) // the strings one character shorter
	for i := range syntheticAlphabet {
		prev[i] = syntheticAlphabet[i : i+1]
	}
	for len(tokens) < vocabSize {
		var next []string
		for _, p := range prev {
			for i := range syntheticAlphabet {
				if len(tokens) == vocabSize {
					break
				}
				c := syntheticAlphabet[i : i+1]
				tokens = append(tokens, MapBytes(p+c))
				merges = append(merges, MapBytes(p)+" "+MapBytes(c))
				next = append(next, p+c)
			}
		}
		prev = next
	}
	return New(Vocab{Pre: "gpt-2", Tokens: tokens, Merges: merges, BOS: -1, EOS: -1, UNK: -1, PAD: -1})
}
