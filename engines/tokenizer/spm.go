package tokenizer

// encodeSPM is Encode for the llama model, as llama.cpp's
// llama_vocab::impl::tokenize does for LLAMA_VOCAB_TYPE_SPM: the text is
// split at special tokens; each piece of ordinary text, with a space before
// it if AddSpacePrefix is set and it comes first or after a special token,
// has its spaces replaced by "▁" and is tokenized on its own.
func (t *Tokenizer) encodeSPM(text string, opts EncodeOptions) []int32 {
	out := make([]int32, 0, len(text)/3+2)
	if opts.AddSpecial && t.v.AddBOS {
		out = append(out, t.v.BOS)
	}
	if text != "" { // llama.cpp makes no fragment of an empty text
		var s spmSession
		prevSpecial := true
		t.partition(text, opts.ParseSpecial, func(frag string, special int32) {
			if special >= 0 {
				out = append(out, special)
				prevSpecial = true
				return
			}
			buf := s.buf[:0]
			if t.v.AddSpacePrefix && prevSpecial {
				buf = append(buf, spaceEscape...)
			}
			for i := 0; i < len(frag); i++ {
				if frag[i] == ' ' {
					buf = append(buf, spaceEscape...)
				} else {
					buf = append(buf, frag[i])
				}
			}
			s.buf = buf
			out = s.tokenize(t, out, buf)
			prevSpecial = false
		})
	}
	if opts.AddSpecial && t.v.AddEOS {
		out = append(out, t.v.EOS)
	}
	return out
}

// spmSession holds the buffers of SentencePiece tokenization, as llama.cpp's
// llm_tokenizer_spm_session.
type spmSession struct {
	buf  []byte
	syms []spmSymbol
	q    minHeap[spmBigram]
}

// spmSymbol is a run of text[start:start+n]; n is 0 once merged into the
// symbol on its left.
type spmSymbol struct {
	start, n   int32
	prev, next int32
}

// utf8SeqLen is llama.cpp's unicode_len_utf8: the length of the UTF-8
// sequence that byte b begins, by its top four bits (1 for continuation
// bytes).
func utf8SeqLen(b byte) int32 {
	return [16]int32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}[b>>4]
}

// tokenize appends the tokens of text (spaces already escaped) to out: it
// starts from one symbol per UTF-8 character and repeatedly merges the
// adjacent pair whose concatenation is the token of highest score (leftmost
// on ties); a final symbol that is not a token is emitted as byte tokens.
func (s *spmSession) tokenize(t *Tokenizer, out []int32, text []byte) []int32 {
	if len(text) == 0 {
		return out
	}
	syms := s.syms[:0]
	for off := int32(0); off < int32(len(text)); {
		n := min(utf8SeqLen(text[off]), int32(len(text))-off)
		i := int32(len(syms))
		syms = append(syms, spmSymbol{start: off, n: n, prev: i - 1, next: i + 1})
		off += n
	}
	syms[len(syms)-1].next = -1
	q := s.q[:0]
	tryAdd := func(left, right int32) {
		if left < 0 || right < 0 {
			return
		}
		l, r := syms[left], syms[right]
		id, ok := t.ids[string(text[l.start:l.start+l.n+r.n])]
		if !ok {
			return
		}
		q.push(spmBigram{score: t.scores[id], left: left, right: right, size: l.n + r.n})
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		tryAdd(i-1, i)
	}
	for len(q) > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		// Outdated: one side has been merged since.
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		tryAdd(l.prev, b.left)
		tryAdd(b.left, l.next)
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		sym := syms[i]
		piece := text[sym.start : sym.start+sym.n]
		if id, ok := t.ids[string(piece)]; ok {
			out = append(out, id)
			continue
		}
		// Byte fallback. (llama.cpp would throw for a byte without a
		// token; here it is UNK, or dropped.)
		out = t.appendBytes(out, string(piece))
	}
	s.syms, s.q = syms, q
	return out
}

// spmBigram is a candidate merge of symbols left and right, whose text is
// size bytes long when queued.
type spmBigram struct {
	score       float32
	left, right int32
	size        int32
}

// before orders bigrams as llama.cpp's queue does: highest score first, then
// leftmost.
func (b spmBigram) before(c spmBigram) bool {
	if b.score != c.score {
		return b.score > c.score
	}
	return b.left < c.left
}
