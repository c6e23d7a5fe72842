package grammar

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// A Matcher follows one text through a grammar, a byte or a token at a time, as a pushdown
// automaton: its state is the set of stacks the text so far can have left (llama.cpp's grammar
// stacks), each stack a position in an alternative over the positions to return to. The sets
// are numbered as they are met and their transitions on each byte kept, so that the matcher
// builds, lazily, the deterministic automaton of the text it sees: after a few tokens most steps
// are table look-ups. The tokens a state allows are found by walking the vocabulary's trie of
// token bytes with it (Vocab) and kept per state: inside a JSON string, say, every step is the
// same state, and its mask is computed once.
//
// A Matcher is not safe for concurrent use; one Grammar serves any number of Matchers.
type Matcher struct {
	g *Grammar
	v *Vocab

	// Stacks are interned: nodes[id] is a frame, the position of an element and the stack
	// below it (0: none). Stack 0 is the empty stack: the text may end there.
	nodes   []frame
	nodeIDs map[frame]int32

	// States are interned sets of stacks, sorted; state 0 is the dead one (no stack: nothing
	// can follow).
	states   []*state
	stateIDs map[string]int32
	cur      int32
	start    int32 // the state at the beginning of the text

	masks   int // states with a cached mask
	scratch []int32
	seen    map[frame]bool
	key     []byte
	depth   []int32 // the trie walk's state per depth
}

// frame is one stack frame: the position of an element in the byte program, and the stack to
// continue with when its alternative ends (0: the empty stack).
type frame struct{ pos, below int32 }

// state is a set of stacks (their ids, sorted; 0 among them means the text may end here), with
// its transitions on each byte (-1: not computed yet) and the tokens it allows (nil: not
// computed yet).
type state struct {
	stacks []int32
	next   [256]int32
	mask   []uint64
}

// maxMasks bounds the masks a Matcher keeps (each a bit per token: 6 KiB for 49152 tokens);
// past it they are all dropped and computed again as needed.
const maxMasks = 512

// NewMatcher starts a Matcher at the beginning of the text. v is the vocabulary whose tokens it
// masks and accepts (Mask, Allows, Accept); it may be nil for a Matcher fed bytes only
// (AcceptBytes).
func (g *Grammar) NewMatcher(v *Vocab) *Matcher {
	m := &Matcher{g: g, v: v, nodeIDs: map[frame]int32{}, stateIDs: map[string]int32{}, seen: map[frame]bool{}}
	m.nodes = append(m.nodes, frame{pos: -1}) // stack 0: the empty stack
	m.intern(nil)                             // state 0: dead
	var start []int32
	for _, p := range g.alts[g.progRoot] {
		start = m.expand(p, 0, start)
	}
	m.start = m.intern(start)
	m.cur = m.start
	return m
}

// push interns the frame (pos, below). A frame at the end of an alternative is below itself:
// returning to it would only return further (llama.cpp drops such frames too), which keeps
// right recursion, a repetition, from growing the stack.
func (m *Matcher) push(pos, below int32) int32 {
	if m.g.elems[pos].kind == elemEnd {
		return below
	}
	f := frame{pos, below}
	if id, ok := m.nodeIDs[f]; ok {
		return id
	}
	id := int32(len(m.nodes))
	m.nodes = append(m.nodes, f)
	m.nodeIDs[f] = id
	return id
}

// expand adds to out the stacks that reading from position pos over stack below can be in
// before its next byte: references entered, ended alternatives returned from.
func (m *Matcher) expand(pos, below int32, out []int32) []int32 {
	clear(m.seen)
	return m.expandFrom(pos, below, out)
}

func (m *Matcher) expandFrom(pos, below int32, out []int32) []int32 {
	f := frame{pos, below}
	if m.seen[f] {
		return out
	}
	m.seen[f] = true
	switch e := &m.g.elems[pos]; e.kind {
	case elemEnd:
		if below == 0 {
			return append(out, 0) // the text may end here
		}
		up := m.nodes[below]
		return m.expandFrom(up.pos, up.below, out)
	case elemRef:
		cont := m.push(pos+1, below)
		for _, p := range m.g.alts[e.ref] {
			out = m.expandFrom(p, cont, out)
		}
		return out
	default:
		return append(out, m.push(pos, below))
	}
}

// intern numbers a set of stacks (sorted and deduplicated here).
func (m *Matcher) intern(stacks []int32) int32 {
	slices.Sort(stacks)
	stacks = slices.Compact(stacks)
	m.key = m.key[:0]
	for _, s := range stacks {
		m.key = binary.LittleEndian.AppendUint32(m.key, uint32(s))
	}
	if id, ok := m.stateIDs[string(m.key)]; ok {
		return id
	}
	st := &state{stacks: slices.Clone(stacks)}
	for i := range st.next {
		st.next[i] = -1
	}
	id := int32(len(m.states))
	m.states = append(m.states, st)
	m.stateIDs[string(m.key)] = id
	return id
}

// step is the state after byte b from state s (0: dead).
func (m *Matcher) step(s int32, b byte) int32 {
	st := m.states[s]
	if n := st.next[b]; n >= 0 {
		return n
	}
	out := m.scratch[:0]
	clear(m.seen) // one expansion gives the same stacks whichever stack reaches it
	for _, id := range st.stacks {
		if id == 0 {
			continue
		}
		f := m.nodes[id]
		if e := &m.g.elems[f.pos]; e.set.has(b) {
			out = m.expandFrom(f.pos+1, f.below, out)
		}
	}
	m.scratch = out
	n := m.intern(out)
	st.next[b] = n
	return n
}

// AcceptBytes advances over text; it reports an error, and does not move, when the grammar
// does not allow text here.
func (m *Matcher) AcceptBytes(text []byte) error {
	s := m.cur
	for i, b := range text {
		if s = m.step(s, b); s == 0 {
			return fmt.Errorf("grammar: byte %d of %q (%q) does not continue the grammar", i, text, b)
		}
	}
	m.cur = s
	return nil
}

// Complete reports whether the text so far is a whole sentence of the grammar: it may end here.
func (m *Matcher) Complete() bool {
	st := m.states[m.cur].stacks
	return len(st) > 0 && st[0] == 0
}

// Done reports whether the text is complete and nothing may follow it.
func (m *Matcher) Done() bool {
	st := m.states[m.cur].stacks
	return len(st) == 1 && st[0] == 0
}

// Allows reports whether token id may come next: its bytes continue the grammar, or it is an
// end token and the text is complete.
func (m *Matcher) Allows(id int32) bool {
	if m.v.isEnd(id) {
		return m.Complete()
	}
	p := m.v.piece(id)
	if p == nil {
		return false
	}
	s := m.cur
	for _, b := range p {
		if s = m.step(s, b); s == 0 {
			return false
		}
	}
	return true
}

// Accept advances with token id: its bytes, or the end when it is an end token (allowed only
// where the text is complete). It reports an error, and does not move, when the grammar does not
// allow the token.
func (m *Matcher) Accept(id int32) error {
	if m.v.isEnd(id) {
		if !m.Complete() {
			return fmt.Errorf("grammar: the end of text (token %d) before the grammar is complete", id)
		}
		return nil
	}
	p := m.v.piece(id)
	if p == nil {
		return fmt.Errorf("grammar: token %d has no text of its own to match", id)
	}
	if err := m.AcceptBytes(p); err != nil {
		return fmt.Errorf("grammar: token %d (%q) does not continue the grammar", id, p)
	}
	return nil
}

// Mask sets to -Inf the logits of the tokens that may not come next (Allows), and returns how
// many may. logits holds one value per token of the vocabulary (entries past it are masked).
func (m *Matcher) Mask(logits []float32) int {
	mask := m.allowed()
	negInf := float32(math.Inf(-1))
	n := 0
	for w, bits := range mask {
		base := w * 64
		if base >= len(logits) {
			break
		}
		row := logits[base:min(base+64, len(logits))]
		if bits == math.MaxUint64 && len(row) == 64 {
			n += 64
			continue
		}
		if bits == 0 {
			for i := range row {
				row[i] = negInf
			}
			continue
		}
		for i := range row {
			if bits&(1<<i) == 0 {
				row[i] = negInf
			} else {
				n++
			}
		}
	}
	for i := len(mask) * 64; i < len(logits); i++ {
		logits[i] = negInf
	}
	return n
}

// allowed is the current state's mask: a bit per token that may come next.
func (m *Matcher) allowed() []uint64 {
	st := m.states[m.cur]
	if st.mask != nil {
		return st.mask
	}
	if m.masks >= maxMasks {
		for _, s := range m.states {
			s.mask = nil
		}
		m.masks = 0
	}
	v := m.v
	mask := make([]uint64, (len(v.pieces)+63)/64)
	if cap(m.depth) < v.maxDepth+1 {
		m.depth = make([]int32, v.maxDepth+1)
	}
	depth := m.depth[:v.maxDepth+1]
	depth[0] = m.cur
	for i := 0; i < len(v.trie); {
		n := &v.trie[i]
		up := depth[n.depth-1]
		s := m.states[up].next[n.b] // step's look-up, inline
		if s < 0 {
			s = m.step(up, n.b)
		}
		if s == 0 {
			i = int(n.skip) // no token below this prefix is allowed
			continue
		}
		depth[n.depth] = s
		for _, id := range v.order[n.first : n.first+int32(n.count)] {
			mask[id>>6] |= 1 << (id & 63)
		}
		i++
	}
	if m.Complete() {
		for _, id := range v.ends {
			mask[id>>6] |= 1 << (id & 63)
		}
	}
	st.mask = mask
	m.masks++
	return mask
}
