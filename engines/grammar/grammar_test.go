package grammar

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reference decides membership the slow, plain way: over the rules as parsed (code points,
// not bytes), by the set of positions where each rule can end when it starts at a position.
type reference struct {
	rules []*rule
	in    []rune
	memo  map[[2]int][]int
}

func refAccepts(g *Grammar, s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	r := &reference{rules: g.rules, in: []rune(s), memo: map[[2]int][]int{}}
	return slices.Contains(r.ends(g.root, 0), len(r.in))
}

func (r *reference) ends(ri, i int) []int {
	key := [2]int{ri, i}
	if e, ok := r.memo[key]; ok {
		return e
	}
	r.memo[key] = nil // a cycle through a nullable prefix adds nothing new
	var out []int
	for _, alt := range r.rules[ri].alts {
		at := []int{i}
		for _, it := range alt {
			var next []int
			for _, p := range at {
				if it.class == nil {
					next = append(next, r.ends(it.ref, p)...)
				} else if p < len(r.in) && inClass(it.class, r.in[p]) {
					next = append(next, p+1)
				}
			}
			slices.Sort(next)
			at = slices.Compact(next)
		}
		out = append(out, at...)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	r.memo[key] = out
	return out
}

func inClass(c []span, x rune) bool {
	for _, s := range c {
		if x >= s.lo && x <= s.hi {
			return true
		}
	}
	return false
}

// accepts runs the matcher over s: whether it is a complete sentence.
func accepts(g *Grammar, s string) bool {
	m := g.NewMatcher(nil)
	return m.AcceptBytes([]byte(s)) == nil && m.Complete()
}

// testGrammars are grammars with repetitions, classes (negated, multi-byte), groups and
// recursion.
var testGrammars = map[string]string{
	"arith": `
root   ::= expr
expr   ::= term (("+" | "-") term)*   # sums
term   ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")" | "-" factor
`,
	"unicode": `root ::= ( [α-ω] | [^a-z\x00-\x1f!] | "é" | [\u4e00-\u4e0f] )+ "!"`,
	"counts":  `root ::= "a"{2,4} ("b" | "c"){0,3} "d"{3} x{1,} x ::= "xy" | "z"`,
	"json":    JSONObject,
	"lists": `root ::= "[" ( item ( "," item )* )? "]"
item ::= [a-c]? "." | root`,
	"dot": `root ::= "<" .{0,3} ">"`,
}

// randomWalk draws a sentence of g byte by byte from the bytes the matcher allows, ending with
// probability 1/4 where it may; nil if it gets stuck after limit bytes.
func randomWalk(g *Grammar, rng *rand.Rand, limit int) []byte {
	m := g.NewMatcher(nil)
	var out []byte
	for len(out) < limit {
		if m.Complete() && (m.Done() || rng.IntN(4) == 0) {
			return out
		}
		var next []byte
		for b := range 256 {
			if m.step(m.cur, byte(b)) != 0 {
				next = append(next, byte(b))
			}
		}
		if len(next) == 0 {
			return nil
		}
		b := next[rng.IntN(len(next))]
		out = append(out, b)
		if m.AcceptBytes([]byte{b}) != nil {
			return nil
		}
	}
	return nil
}

// TestMatcherAgainstReference compares the byte-level matcher with the code-point reference on
// sentences drawn from each grammar, their mutations and random strings over their alphabet:
// both must agree on every one, and every prefix of a sentence must leave the matcher alive.
func TestMatcherAgainstReference(t *testing.T) {
	for name, text := range testGrammars {
		t.Run(name, func(t *testing.T) {
			g, err := Parse(text)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(1, uint64(len(name))))
			alphabet := []rune("0123456789+-*/()[],.abcdxyzé!α语\"{}:\\ tn")
			agree, in := 0, 0
			check := func(s string) {
				want := refAccepts(g, s)
				require.Equal(t, want, accepts(g, s), "%q", s)
				agree++
				if want {
					in++
				}
			}
			for range 300 {
				s := randomWalk(g, rng, 300)
				if s == nil {
					continue
				}
				require.True(t, refAccepts(g, string(s)), "the matcher's walk %q is not a sentence", s)
				m := g.NewMatcher(nil)
				for i := range s {
					require.NoError(t, m.AcceptBytes(s[i:i+1]), "prefix %q", s[:i+1])
				}
				check(string(s))
				// Mutations: a character deleted, replaced or inserted.
				r := []rune(string(s))
				if len(r) > 0 {
					i := rng.IntN(len(r))
					check(string(slices.Delete(slices.Clone(r), i, i+1)))
					c := slices.Clone(r)
					c[i] = alphabet[rng.IntN(len(alphabet))]
					check(string(c))
					check(string(slices.Insert(slices.Clone(r), i, alphabet[rng.IntN(len(alphabet))])))
				}
			}
			for range 300 {
				n := rng.IntN(8)
				var sb strings.Builder
				for range n {
					sb.WriteRune(alphabet[rng.IntN(len(alphabet))])
				}
				check(sb.String())
			}
			assert.Greater(t, in, 100, "sentences among the strings checked")
			t.Logf("%s: %d strings, %d sentences, matcher and reference agree on all", name, agree, in)
		})
	}
}

// TestMaskAgainstTokenWalks checks Mask, the trie walk with cached masks, against walking each
// token's bytes alone (Allows), at the states random sentences pass through, on a vocabulary of
// random byte strings that split characters.
func TestMaskAgainstTokenWalks(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	alphabet := []byte("0123456789+-*/()[],.abcdxyz!\"{}:\\ \ntnrue" + "é语α")
	pieces := [][]byte{nil, []byte("<ctl>")} // token 0 has no bytes; 1 is the end token
	for range 3000 {
		n := 1 + rng.IntN(5)
		p := make([]byte, n)
		for i := range p {
			p[i] = alphabet[rng.IntN(len(alphabet))]
		}
		pieces = append(pieces, p)
	}
	pieces = append(pieces, []byte("{"), []byte("}"), []byte("true"), []byte("a"), []byte("1")) // duplicates too
	v := NewVocab(pieces, 1)
	for name, text := range testGrammars {
		g := MustParse(text)
		m := g.NewMatcher(v)
		checked := 0
		for range 12 {
			s := randomWalk(g, rng, 200)
			m = g.NewMatcher(v)
			for i := 0; i <= len(s); i++ {
				logits := make([]float32, len(pieces)+3) // past the vocabulary: masked
				n := m.Mask(logits)
				allowed := 0
				for id := range logits {
					want := id < len(pieces) && m.Allows(int32(id))
					require.Equal(t, want, !math.IsInf(float64(logits[id]), -1), "%s after %q: token %d %q", name, s[:i], id, pieces[min(id, len(pieces)-1)])
					if want {
						allowed++
					}
				}
				require.Equal(t, allowed, n)
				assert.Equal(t, m.Complete(), m.Allows(1), "the end token where the text is complete")
				checked++
				if i < len(s) {
					require.NoError(t, m.AcceptBytes(s[i:i+1]))
				}
			}
		}
		t.Logf("%s: masks at %d states agree with per-token walks", name, checked)
	}
}

func TestAcceptTokens(t *testing.T) {
	pieces := [][]byte{[]byte("{"), []byte("}"), []byte(`"a"`), []byte(":"), []byte("1"), nil, []byte("x")}
	v := NewVocab(pieces, 5)
	m := MustParse(JSONObject).NewMatcher(v)
	assert.False(t, m.Allows(5), "no end before the object is complete")
	assert.Error(t, m.Accept(5))
	assert.Error(t, m.Accept(6), "x starts no object")
	for _, id := range []int32{0, 2, 3, 4} {
		require.NoError(t, m.Accept(id))
	}
	assert.False(t, m.Complete())
	require.NoError(t, m.Accept(1))
	assert.True(t, m.Done(), "nothing follows the object")
	assert.True(t, m.Allows(5))
	require.NoError(t, m.Accept(5))
	assert.Error(t, m.Accept(-1))
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`root ::= x`, `rule "x" is used but not defined`},
		{`x ::= "a"`, `no rule named root`},
		{`root ::= root "a" | "b"`, `left-recursive`},
		{`root ::= x "a"  x ::= "b"? root`, `left-recursive`},
		{`root ::= "a`, `not closed`},
		{`root ::= [a-`, `not closed`},
		{`root ::= ("a"`, `not closed`},
		{`root ::= "a" )`, `closes no group`},
		{`root ::= "\q"`, `unknown escape`},
		{`root ::= [z-a]`, `backwards`},
		{`root ::= "a"{3,1}`, `below the least`},
		{`root ::= "a"{99999}`, `want counts`},
		{`root ::= "a" root ::= "b"`, `defined twice`},
		{`root = "a"`, `want ::=`},
		{`root ::= @`, `unexpected`},
		{"root ::= \"\xff\"", `UTF-8`},
	} {
		_, err := Parse(c.text)
		if assert.Error(t, err, c.text) {
			assert.Contains(t, err.Error(), c.want, c.text)
		}
	}
}

func TestUTF8Sequences(t *testing.T) {
	// Every code point of random spans is matched by exactly one sequence, and nothing else of
	// a sample of encodings.
	rng := rand.New(rand.NewPCG(4, 5))
	for range 50 {
		lo := rune(rng.IntN(0x11000))
		hi := min(lo+rune(rng.IntN(0x3000)), maxCodePoint)
		seqs := utf8Sequences([]span{{lo, hi}})
		for range 2000 {
			r := rune(rng.IntN(maxCodePoint + 1))
			if rng.IntN(2) == 0 {
				r = lo + rune(rng.IntN(int(hi-lo+1)))
			}
			if !utf8.ValidRune(r) {
				continue
			}
			enc := utf8.AppendRune(nil, r)
			matches := 0
			for _, s := range seqs {
				if len(s) == len(enc) && func() bool {
					for i, br := range s {
						if enc[i] < br.lo || enc[i] > br.hi {
							return false
						}
					}
					return true
				}() {
					matches++
				}
			}
			want := 0
			if r >= lo && r <= hi {
				want = 1
			}
			require.Equal(t, want, matches, "U+%04X in [U+%04X, U+%04X]", r, lo, hi)
		}
	}
}
