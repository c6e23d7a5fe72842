package grammar

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxRepeat bounds the counts of a {m,n} repetition: each repetition is a rule of its own.
const maxRepeat = 10000

// maxItems bounds the items of a grammar once its repetitions are spelled out, so that nested
// counts ({1000}{1000}) cannot take the memory.
const maxItems = 1 << 20

// maxCodePoint is the largest Unicode code point.
const maxCodePoint = 0x10FFFF

// span is an inclusive range of code points.
type span struct{ lo, hi rune }

// item is one element of an alternative as GBNF writes it: a character class (one code point
// of spans) or a reference to a rule.
type item struct {
	class []span // sorted, disjoint, merged; nil for a reference
	ref   int    // the rule referred to, when class is nil
}

// rule is a named rule: its alternatives, each a sequence of items (empty: ε).
type rule struct {
	name    string
	alts    [][]item
	defined bool
	line    int // where it was first used or defined, for errors
}

// parser reads GBNF text into rules.
type parser struct {
	src   string
	pos   int
	items int // items made by repetitions so far
	rules []*rule
	names map[string]int
}

// parseError is a syntax error at a line and column of the GBNF text.
func (p *parser) errorf(format string, args ...any) error {
	line := 1 + strings.Count(p.src[:p.pos], "\n")
	col := p.pos - strings.LastIndex(p.src[:p.pos], "\n")
	return fmt.Errorf("grammar: line %d column %d: %s", line, col, fmt.Sprintf(format, args...))
}

func (p *parser) line() int { return 1 + strings.Count(p.src[:p.pos], "\n") }

// parseGBNF reads GBNF text (llama.cpp's grammar format) into rules with every group and
// repetition turned into a rule of its own.
func parseGBNF(src string) ([]*rule, map[string]int, error) {
	if !utf8.ValidString(src) {
		return nil, nil, fmt.Errorf("grammar: the text is not valid UTF-8")
	}
	p := &parser{src: src, names: map[string]int{}}
	p.space()
	for p.pos < len(p.src) {
		name := p.name()
		if name == "" {
			return nil, nil, p.errorf("want a rule name, found %q", p.peekText())
		}
		r := p.ruleNamed(name)
		if r.defined {
			return nil, nil, p.errorf("rule %q is defined twice", name)
		}
		r.defined, r.line = true, p.line()
		p.space()
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return nil, nil, p.errorf("want ::= after the rule name %q", name)
		}
		p.pos += 3
		alts, err := p.alternates(false)
		if err != nil {
			return nil, nil, err
		}
		r.alts = alts
	}
	for _, r := range p.rules {
		if !r.defined {
			return nil, nil, fmt.Errorf("grammar: line %d: rule %q is used but not defined", r.line, r.name)
		}
	}
	if _, ok := p.names["root"]; !ok {
		return nil, nil, fmt.Errorf("grammar: no rule named root (where the text starts)")
	}
	return p.rules, p.names, nil
}

func (p *parser) peekText() string {
	s := p.src[p.pos:]
	if len(s) > 12 {
		s = s[:12] + "…"
	}
	return s
}

// ruleNamed returns the rule called name, made (not yet defined) on its first mention.
func (p *parser) ruleNamed(name string) *rule {
	if i, ok := p.names[name]; ok {
		return p.rules[i]
	}
	p.names[name] = len(p.rules)
	r := &rule{name: name, line: p.line()}
	p.rules = append(p.rules, r)
	return r
}

// newRule makes an anonymous rule for a group or repetition, named after its parent.
func (p *parser) newRule(alts [][]item) int {
	name := fmt.Sprintf("_%d", len(p.rules))
	i := len(p.rules)
	p.names[name] = i
	p.rules = append(p.rules, &rule{name: name, alts: alts, defined: true, line: p.line()})
	return i
}

// space skips blanks, newlines and # comments.
func (p *parser) space() {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// name reads a rule name, or returns "" without moving.
func (p *parser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// atRuleStart reports whether the text at the position starts the next rule: a name and ::=.
func (p *parser) atRuleStart() bool {
	save := p.pos
	defer func() { p.pos = save }()
	if p.name() == "" {
		return false
	}
	p.space()
	return strings.HasPrefix(p.src[p.pos:], "::=")
}

// alternates reads sequences separated by |, up to the end of the rule (nested: up to ")").
func (p *parser) alternates(nested bool) ([][]item, error) {
	var alts [][]item
	for {
		seq, err := p.sequence(nested)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		p.space()
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			continue
		}
		return alts, nil
	}
}

// sequence reads items with their repetitions up to |, ) or the next rule.
func (p *parser) sequence(nested bool) ([]item, error) {
	var seq []item
	for {
		p.space()
		if p.pos >= len(p.src) {
			if nested {
				return nil, p.errorf("a group is not closed: want )")
			}
			return seq, nil
		}
		c := p.src[p.pos]
		if c == '|' || c == ')' {
			if c == ')' && !nested {
				return nil, p.errorf("a ) closes no group")
			}
			return seq, nil
		}
		if isNameByte(c) && p.atRuleStart() {
			if nested {
				return nil, p.errorf("a group is not closed before the next rule: want )")
			}
			return seq, nil
		}
		start := len(seq)
		var err error
		if seq, err = p.primary(seq); err != nil {
			return nil, err
		}
		if seq, err = p.repetition(seq, start); err != nil {
			return nil, err
		}
	}
}

// primary reads one name, literal, class, . or group and appends its items to seq.
func (p *parser) primary(seq []item) ([]item, error) {
	switch c := p.src[p.pos]; {
	case c == '"':
		p.pos++
		for {
			if p.pos >= len(p.src) {
				return nil, p.errorf("a string literal is not closed: want \"")
			}
			if p.src[p.pos] == '"' {
				p.pos++
				return seq, nil
			}
			r, err := p.char()
			if err != nil {
				return nil, err
			}
			seq = append(seq, item{class: []span{{r, r}}})
		}
	case c == '[':
		class, err := p.class()
		if err != nil {
			return nil, err
		}
		return append(seq, item{class: class}), nil
	case c == '.':
		p.pos++
		return append(seq, item{class: anyChar()}), nil
	case c == '(':
		p.pos++
		alts, err := p.alternates(true)
		if err != nil {
			return nil, err
		}
		p.pos++ // ")"
		if len(alts) == 1 {
			return append(seq, alts[0]...), nil
		}
		return append(seq, item{ref: p.newRule(alts)}), nil
	case isNameByte(c):
		name := p.name()
		return append(seq, item{ref: p.names[p.ruleNamed(name).name]}), nil
	default:
		return nil, p.errorf("unexpected %q", p.peekText())
	}
}

// repetition reads a *, +, ? or {m,n} after the items seq[start:] and applies it.
func (p *parser) repetition(seq []item, start int) ([]item, error) {
	if p.pos >= len(p.src) {
		return seq, nil
	}
	var lo, hi int // hi -1: unbounded
	switch p.src[p.pos] {
	case '*':
		lo, hi = 0, -1
		p.pos++
	case '+':
		lo, hi = 1, -1
		p.pos++
	case '?':
		lo, hi = 0, 1
		p.pos++
	case '{':
		var err error
		if lo, hi, err = p.counts(); err != nil {
			return nil, err
		}
	default:
		return seq, nil
	}
	if start == len(seq) {
		return seq, nil // "" repeated is still ""
	}
	body := slices.Clone(seq[start:])
	if p.items += len(body) * max(lo, 1, hi); p.items > maxItems {
		return nil, p.errorf("the repetitions spell out more than %d items", maxItems)
	}
	seq = seq[:start]
	for range lo {
		seq = append(seq, body...)
	}
	switch {
	case hi < 0: // R ::= body R | ε
		r := p.newRule(nil)
		p.rules[r].alts = [][]item{append(slices.Clone(body), item{ref: r}), nil}
		seq = append(seq, item{ref: r})
	case hi > lo: // O1 ::= body | ε; Ok ::= body Ok-1 | ε
		opt := p.newRule([][]item{slices.Clone(body), nil})
		for range hi - lo - 1 {
			opt = p.newRule([][]item{append(slices.Clone(body), item{ref: opt}), nil})
		}
		seq = append(seq, item{ref: opt})
	}
	return seq, nil
}

// counts reads {m}, {m,} or {m,n}.
func (p *parser) counts() (lo, hi int, err error) {
	end := strings.IndexByte(p.src[p.pos:], '}')
	if end < 0 {
		return 0, 0, p.errorf("a repetition {m,n} is not closed: want }")
	}
	body := strings.ReplaceAll(p.src[p.pos+1:p.pos+end], " ", "")
	num := func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > maxRepeat {
			return 0, p.errorf("repetition {%s}: want counts from 0 to %d", body, maxRepeat)
		}
		return n, nil
	}
	a, b, comma := strings.Cut(body, ",")
	if lo, err = num(a); err != nil {
		return 0, 0, err
	}
	switch {
	case !comma:
		hi = lo
	case b == "":
		hi = -1
	default:
		if hi, err = num(b); err != nil {
			return 0, 0, err
		}
		if hi < lo {
			return 0, 0, p.errorf("repetition {%s}: the most is below the least", body)
		}
	}
	p.pos += end + 1
	return lo, hi, nil
}

// char reads one character of a literal or class, with its escape.
func (p *parser) char() (rune, error) {
	if p.src[p.pos] != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		p.pos += n
		return r, nil
	}
	p.pos++
	if p.pos >= len(p.src) {
		return 0, p.errorf("an escape at the end of the text")
	}
	c := p.src[p.pos]
	p.pos++
	switch c {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '\'', '[', ']', '-', '^', '/', '.', '(', ')', '|', '*', '+', '?', '{', '}':
		return rune(c), nil
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
		if p.pos+n > len(p.src) {
			return 0, p.errorf("\\%c wants %d hex digits", c, n)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil || v > maxCodePoint {
			return 0, p.errorf("\\%c%s is not a code point", c, p.src[p.pos:p.pos+n])
		}
		p.pos += n
		return rune(v), nil
	}
	return 0, p.errorf("unknown escape \\%c", c)
}

// class reads [...] or [^...] into sorted, merged spans.
func (p *parser) class() ([]span, error) {
	p.pos++ // "["
	negate := p.pos < len(p.src) && p.src[p.pos] == '^'
	if negate {
		p.pos++
	}
	var spans []span
	for {
		if p.pos >= len(p.src) {
			return nil, p.errorf("a character class is not closed: want ]")
		}
		if p.src[p.pos] == ']' {
			p.pos++
			break
		}
		lo, err := p.char()
		if err != nil {
			return nil, err
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			if hi, err = p.char(); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, p.errorf("the range %q-%q is backwards", lo, hi)
			}
		}
		spans = append(spans, span{lo, hi})
	}
	spans = normalize(spans)
	if negate {
		spans = complement(spans)
	}
	if spans == nil {
		spans = []span{} // a class of nothing, not a reference
	}
	return spans, nil
}

// anyChar is the class of every code point (GBNF's .).
func anyChar() []span { return []span{{0, maxCodePoint}} }

// normalize sorts spans and merges those that overlap or touch.
func normalize(spans []span) []span {
	slices.SortFunc(spans, func(a, b span) int { return int(a.lo - b.lo) })
	var out []span
	for _, s := range spans {
		if n := len(out); n > 0 && s.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, s.hi)
			continue
		}
		out = append(out, s)
	}
	return out
}

// complement is every code point that normalized spans do not hold.
func complement(spans []span) []span {
	var out []span
	next := rune(0)
	for _, s := range spans {
		if s.lo > next {
			out = append(out, span{next, s.lo - 1})
		}
		next = s.hi + 1
	}
	if next <= maxCodePoint {
		out = append(out, span{next, maxCodePoint})
	}
	return out
}
