package tokenizer

import "slices"

// MaxTokenBytes is the most bytes of a text that one token of Encode's output stands for, and
// whether Encode gives a token for every byte of any text. A byte-level token stands for the
// bytes of its piece (what it decodes to); a SentencePiece token for at most the longer of its
// piece and its string (a "▁" in the text itself is three bytes, where the space it decodes to is
// one); a byte token ("<0xAB>", or UNK for a byte without one) for one byte; a special token for
// its text. A vocabulary that lacks a token for some byte and has no UNK drops that byte
// (everyByte false). When everyByte, a text of m bytes encodes to at least m / n tokens whatever
// it holds, so that a server can refuse a text too long for its context without encoding it.
func (t *Tokenizer) MaxTokenBytes() (n int, everyByte bool) {
	n = 1
	for i, s := range t.v.Tokens {
		c := len(t.pieces[i])
		if t.spm {
			c = max(c, len(s))
		}
		n = max(n, c)
	}
	return n, t.v.UNK >= 0 || !slices.Contains(t.byteTok[:], -1)
}
