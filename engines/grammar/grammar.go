package grammar

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Grammar is a compiled grammar: the rules as GBNF wrote them (over code points) and the same
// rules over bytes, each character class spelled out as the UTF-8 sequences of its code points.
// It is immutable and safe for concurrent use; a Matcher follows one text through it.
type Grammar struct {
	rules []*rule // as parsed; rules[root] is "root"
	root  int

	// The byte program: elems holds every alternative of every rule, one after another, each
	// ended by an elemEnd; alts[r] are the positions where rule r's alternatives start.
	elems []elem
	alts  [][]int32
	// progRoot is the root rule's index in alts.
	progRoot int32
}

// elemKind tells what an elem is.
type elemKind uint8

const (
	elemEnd   elemKind = iota // the end of an alternative
	elemBytes                 // one byte of set
	elemRef                   // rule ref
)

// elem is one step of an alternative over bytes.
type elem struct {
	kind elemKind
	ref  int32
	set  byteSet
}

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) add(lo, hi byte) {
	for b := int(lo); b <= int(hi); b++ {
		s[b>>6] |= 1 << (b & 63)
	}
}

func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }

// Parse compiles GBNF text, llama.cpp's grammar format: rules "name ::= alternatives", with
// string literals, character classes ([a-z], [^"\\]), ".", groups, "|", and the repetitions
// "*", "+", "?" and "{m}", "{m,}", "{m,n}"; # starts a comment. The text starts at the rule
// named root. A left-recursive rule (one that can reach itself before reading a character) is
// refused, as llama.cpp refuses it.
func Parse(text string) (*Grammar, error) {
	rules, names, err := parseGBNF(text)
	if err != nil {
		return nil, err
	}
	g := &Grammar{rules: rules, root: names["root"]}
	if err := g.compile(); err != nil {
		return nil, err
	}
	return g, nil
}

// MustParse is Parse for grammars written in the program; it panics on an error.
func MustParse(text string) *Grammar {
	g, err := Parse(text)
	if err != nil {
		panic(err)
	}
	return g
}

// compile lays the rules out over bytes and checks them for left recursion.
func (g *Grammar) compile() error {
	g.alts = make([][]int32, len(g.rules))
	classRules := map[string]int32{}
	var pending [][][]byteRange // the alternatives of the class rules, made as they are met
	classRule := func(c []span) int32 {
		key := fmt.Sprint(c)
		if r, ok := classRules[key]; ok {
			return r
		}
		r := int32(len(g.rules) + len(pending))
		classRules[key] = r
		pending = append(pending, utf8Sequences(c))
		return r
	}
	for ri, r := range g.rules {
		for _, alt := range r.alts {
			g.alts[ri] = append(g.alts[ri], int32(len(g.elems)))
			for _, it := range alt {
				switch {
				case it.class == nil:
					g.elems = append(g.elems, elem{kind: elemRef, ref: int32(it.ref)})
				case len(it.class) == 0: // matches nothing: an empty set
					g.elems = append(g.elems, elem{kind: elemBytes})
				case it.class[len(it.class)-1].hi < utf8.RuneSelf: // one byte
					var e elem
					e.kind = elemBytes
					for _, s := range it.class {
						e.set.add(byte(s.lo), byte(s.hi))
					}
					g.elems = append(g.elems, e)
				default:
					g.elems = append(g.elems, elem{kind: elemRef, ref: classRule(it.class)})
				}
			}
			g.elems = append(g.elems, elem{kind: elemEnd})
		}
	}
	for _, seqs := range pending {
		var starts []int32
		for _, seq := range seqs {
			starts = append(starts, int32(len(g.elems)))
			for _, br := range seq {
				var e elem
				e.kind = elemBytes
				e.set.add(br.lo, br.hi)
				g.elems = append(g.elems, e)
			}
			g.elems = append(g.elems, elem{kind: elemEnd})
		}
		if len(seqs) == 0 { // no code point at all: an alternative that matches nothing
			starts = append(starts, int32(len(g.elems)))
			g.elems = append(g.elems, elem{kind: elemBytes}, elem{kind: elemEnd})
		}
		g.alts = append(g.alts, starts)
	}
	g.progRoot = int32(g.root)
	return g.checkLeftRecursion()
}

// name is rule r's name, for errors.
func (g *Grammar) name(r int32) string {
	if int(r) < len(g.rules) {
		return g.rules[r].name
	}
	return "a character class"
}

// nullable reports, per rule of the program, whether it can match the empty text.
func (g *Grammar) nullable() []bool {
	null := make([]bool, len(g.alts))
	for changed := true; changed; {
		changed = false
		for r, starts := range g.alts {
			if null[r] {
				continue
			}
			for _, p := range starts {
				if g.seqNullable(p, null) {
					null[r], changed = true, true
					break
				}
			}
		}
	}
	return null
}

func (g *Grammar) seqNullable(p int32, null []bool) bool {
	for ; g.elems[p].kind != elemEnd; p++ {
		if e := g.elems[p]; e.kind == elemBytes || !null[e.ref] {
			return false
		}
	}
	return true
}

// checkLeftRecursion refuses a rule that can reach itself through references that read
// nothing before them: expanding it would never end.
func (g *Grammar) checkLeftRecursion() error {
	null := g.nullable()
	// first[r]: the rules r refers to before reading a byte.
	first := make([][]int32, len(g.alts))
	for r, starts := range g.alts {
		for _, p := range starts {
			for ; g.elems[p].kind == elemRef; p++ {
				first[r] = append(first[r], g.elems[p].ref)
				if !null[g.elems[p].ref] {
					break
				}
			}
		}
	}
	const (
		unseen = iota
		open
		closed
	)
	mark := make([]uint8, len(g.alts))
	var path []int32
	var visit func(r int32) error
	visit = func(r int32) error {
		mark[r] = open
		path = append(path, r)
		for _, s := range first[r] {
			switch mark[s] {
			case open:
				var names []string
				for i := len(path) - 1; i >= 0; i-- {
					names = append(names, g.name(path[i]))
					if path[i] == s {
						break
					}
				}
				slices.Reverse(names)
				return fmt.Errorf("grammar: rule %q is left-recursive (it reaches itself before reading a character: %s)",
					g.name(s), strings.Join(names, " → ")+" → "+g.name(s))
			case unseen:
				if err := visit(s); err != nil {
					return err
				}
			}
		}
		path = path[:len(path)-1]
		mark[r] = closed
		return nil
	}
	for r := range g.alts {
		if mark[r] == unseen {
			if err := visit(int32(r)); err != nil {
				return err
			}
		}
	}
	return nil
}

// byteRange is an inclusive range of bytes.
type byteRange struct{ lo, hi byte }

// utf8Sequences spells the code points of spans as UTF-8: sequences of byte ranges whose
// products are exactly the encodings of those code points (surrogates, which UTF-8 cannot
// encode, left out).
func utf8Sequences(spans []span) [][]byteRange {
	var out [][]byteRange
	var split func(lo, hi rune)
	split = func(lo, hi rune) {
		if lo > hi {
			return
		}
		if lo <= 0xDFFF && hi >= 0xD800 { // the surrogates
			split(lo, min(hi, 0xD7FF))
			split(max(lo, 0xE000), hi)
			return
		}
		for _, edge := range []rune{0x7F, 0x7FF, 0xFFFF} { // where the encoded length changes
			if lo <= edge && hi > edge {
				split(lo, edge)
				split(edge+1, hi)
				return
			}
		}
		n := utf8.RuneLen(lo)
		for i := 1; i < n; i++ { // make every continuation byte's range full or single
			m := rune(1)<<(6*i) - 1
			if lo&^m != hi&^m {
				if lo&m != 0 {
					split(lo, lo|m)
					split((lo|m)+1, hi)
					return
				}
				if hi&m != m {
					split(lo, (hi&^m)-1)
					split(hi&^m, hi)
					return
				}
			}
		}
		a, b := utf8.AppendRune(nil, lo), utf8.AppendRune(nil, hi)
		seq := make([]byteRange, n)
		for i := range seq {
			seq[i] = byteRange{a[i], b[i]}
		}
		out = append(out, seq)
	}
	for _, s := range spans {
		split(s.lo, s.hi)
	}
	return out
}
