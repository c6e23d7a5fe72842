package tokenizer

// encoder holds the buffers of the gpt2 model's (byte-level BPE) encoding.
type encoder struct {
	t    *Tokenizer
	sp   splitter
	syms []symbol
	q    minHeap[bigram]
}

type symbol struct {
	sym        int32
	prev, next int32
}

// encodeText appends the tokens of ordinary text to out.
func (e *encoder) encodeText(out []int32, text string) []int32 {
	ends := e.sp.split(e.t.pre.stages, text)
	prev := 0
	for _, end := range ends {
		out = e.encodeChunk(out, text[prev:end])
		prev = end
	}
	return out
}

// encodeChunk appends the tokens of one pre-tokenized chunk to out.
func (e *encoder) encodeChunk(out []int32, chunk string) []int32 {
	t := e.t
	if len(chunk) == 1 || t.pre.ignoreMerges {
		if id, ok := t.bpeTok[chunk]; ok {
			return append(out, id)
		}
	}
	syms := e.syms[:0]
	for i := 0; i < len(chunk); i++ {
		syms = append(syms, symbol{sym: int32(chunk[i]), prev: int32(i - 1), next: int32(i + 1)})
	}
	syms[len(syms)-1].next = -1
	q := e.q[:0]
	for i := 0; i+1 < len(syms); i++ {
		if m, ok := t.merges[pairKey(syms[i].sym, syms[i+1].sym)]; ok {
			q.push(bigram{rank: m.rank, left: int32(i), right: int32(i + 1), ls: syms[i].sym, rs: syms[i+1].sym, into: m.sym})
		}
	}
	for len(q) > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		// Outdated: one side has been merged since.
		if l.sym != b.ls || r.sym != b.rs || l.next != b.right {
			continue
		}
		l.sym = b.into
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		r.sym = -1
		if l.prev >= 0 {
			p := &syms[l.prev]
			if m, ok := t.merges[pairKey(p.sym, l.sym)]; ok {
				q.push(bigram{rank: m.rank, left: l.prev, right: b.left, ls: p.sym, rs: l.sym, into: m.sym})
			}
		}
		if l.next >= 0 {
			nx := &syms[l.next]
			if m, ok := t.merges[pairKey(l.sym, nx.sym)]; ok {
				q.push(bigram{rank: m.rank, left: b.left, right: l.next, ls: l.sym, rs: nx.sym, into: m.sym})
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		s := syms[i].sym
		if tok := t.symTok[s]; tok >= 0 {
			out = append(out, tok)
			continue
		}
		// Not a token: emit its bytes.
		out = t.appendBytes(out, t.symRaw[s])
	}
	e.syms, e.q = syms, q
	return out
}

// bigram is a candidate merge of symbols left and right.
type bigram struct {
	rank        int32
	left, right int32
	ls, rs      int32 // the symbols when queued
	into        int32
}

// before orders bigrams by rank, then position.
func (b bigram) before(c bigram) bool {
	if b.rank != c.rank {
		return b.rank < c.rank
	}
	return b.left < c.left
}
