package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// nfdBase returns the first code point of r's canonical decomposition: "é" becomes "e", a
// Hangul syllable its leading consonant, as llama.cpp's unicode_cpts_normalize_nfd does (it
// keeps only that code point, so accents are dropped).
func nfdBase(r rune) rune {
	k := sort.Search(len(nfdFirst), func(k int) bool { return nfdFirst[k].hi >= r })
	if k < len(nfdFirst) && nfdFirst[k].lo <= r {
		return nfdFirst[k].first
	}
	return r
}

// isChineseChar reports whether r is in the CJK blocks that BERT splits into single
// characters (llama.cpp's list, including its 0x2B920 start where the block is 0x2B820).
func isChineseChar(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) ||
		(r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) ||
		(r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) ||
		(r >= 0x2F800 && r <= 0x2FA1F)
}

// isControlFormat reports whether r is a control, format, private-use or surrogate code point
// (category C less the unassigned code points, which llama.cpp keeps).
func isControlFormat(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

// wpmWords is BERT's basic tokenization of text, as llama.cpp's WordPiece preprocess: each
// code point is replaced by the first of its canonical decomposition; white space separates
// words; NUL, U+FFFD (and so each byte of invalid UTF-8) and control and format characters
// (category C) are dropped; punctuation, ASCII symbols and CJK ideographs are words of their
// own; everything is lower-cased.
func wpmWords(text string, words []string) []string {
	var word strings.Builder
	flush := func() {
		if word.Len() > 0 {
			words = append(words, word.String())
			word.Reset()
		}
	}
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		i += n
		r = nfdBase(r)
		switch {
		case unicode.IsSpace(r):
			flush()
		case r == 0 || r == utf8.RuneError || isControlFormat(r):
		case unicode.IsPunct(r) || (r < 0x7F && unicode.IsSymbol(r)) || isChineseChar(r):
			flush()
			words = append(words, string(unicode.ToLower(r)))
		default:
			word.WriteRune(unicode.ToLower(r))
		}
	}
	flush()
	return words
}

// encodeWPM is Encode for the bert model, as llama.cpp's tokenize does for
// LLAMA_VOCAB_TYPE_WPM: AddSpecial puts BOS ([CLS]) before and SEP ([SEP]) after, whatever
// AddBOS and AddEOS say; the text is split at special tokens; each word of ordinary text,
// with "▁" before it, is cut greedily into the longest tokens from its start, and a word that
// cannot be cut so is one UNK.
func (t *Tokenizer) encodeWPM(text string, opts EncodeOptions) []int32 {
	out := make([]int32, 0, len(text)/3+2)
	if opts.AddSpecial {
		out = append(out, t.v.BOS)
	}
	var words []string
	var buf []byte
	t.partition(text, opts.ParseSpecial, func(frag string, special int32) {
		if special >= 0 {
			out = append(out, special)
			return
		}
		words = wpmWords(frag, words[:0])
		for _, w := range words {
			buf = append(append(buf[:0], spaceEscape...), w...)
			out = t.wpmWord(out, buf)
		}
	})
	if opts.AddSpecial {
		out = append(out, t.v.SEP)
	}
	return out
}

// wpmWord appends the tokens of one word (with its word-start mark) to out: from each
// position the longest token that starts there (any token, by its text), or, if some position
// has none, UNK alone for the whole word.
func (t *Tokenizer) wpmWord(out []int32, word []byte) []int32 {
	start := len(out)
	for i := 0; i < len(word); {
		matched := false
		for j := min(len(word), i+t.maxTokenLen); j > i; j-- {
			if id, ok := t.ids[string(word[i:j])]; ok {
				out = append(out, id)
				i = j
				matched = true
				break
			}
		}
		if !matched {
			return append(out[:start], t.v.UNK)
		}
	}
	return out
}
