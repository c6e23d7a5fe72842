package sample

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// feed runs pieces through a Stopper and returns what each call released.
func feed(s *Stopper, pieces ...string) (outs []string, stopped bool) {
	for _, p := range pieces {
		out, st := s.Feed(p)
		outs = append(outs, out)
		stopped = st
	}
	return outs, stopped
}

func TestStopperSplitAcrossPieces(t *testing.T) {
	s := NewStopper("<|im_end|>")
	outs, stopped := feed(s, "Hello", " world<|im", "_e", "nd|>ignored")
	assert.Equal(t, []string{"Hello", " world", "", ""}, outs)
	assert.True(t, stopped)
	assert.True(t, s.Stopped())
	assert.Equal(t, "<|im_end|>", s.Matched())
	out, st := s.Feed("more")
	assert.Equal(t, "", out)
	assert.True(t, st)
	assert.Equal(t, "", s.Flush())
}

func TestStopperWholeStopInOnePiece(t *testing.T) {
	s := NewStopper("STOP")
	outs, stopped := feed(s, "abc", "deSTOPfgh")
	assert.Equal(t, []string{"abc", "de"}, outs)
	assert.True(t, stopped)
}

func TestStopperFailedPartialMatch(t *testing.T) {
	s := NewStopper("</s>")
	outs, stopped := feed(s, "a <", "/", "x> b")
	assert.Equal(t, []string{"a ", "", "</x> b"}, outs)
	assert.False(t, stopped)
	assert.Equal(t, "", s.Flush())

	// A held prefix that fails may still hide a later match.
	s = NewStopper("abc")
	outs, stopped = feed(s, "xab", "ab", "c!")
	assert.Equal(t, []string{"x", "ab", ""}, outs)
	assert.True(t, stopped)

	// Overlapping prefix: "aab" holds back "a" then "ab".
	s = NewStopper("aab")
	outs, stopped = feed(s, "a", "a", "a", "c")
	assert.Equal(t, []string{"", "", "a", "aac"}, outs)
	assert.False(t, stopped)
}

func TestStopperFlushReleasesHeldText(t *testing.T) {
	s := NewStopper("\nUser:")
	outs, stopped := feed(s, "answer", "\nUs")
	assert.Equal(t, []string{"answer", ""}, outs)
	assert.False(t, stopped)
	assert.Equal(t, "\nUs", s.Pending())
	assert.Equal(t, "\nUs", s.Flush())
	assert.Equal(t, "", s.Flush())
}

func TestStopperSeveralStops(t *testing.T) {
	s := NewStopper("<end_of_turn>", "", "<eos>")
	outs, stopped := feed(s, "ok<e", "os>")
	assert.Equal(t, []string{"ok", ""}, outs)
	assert.True(t, stopped)
	assert.Equal(t, "<eos>", s.Matched())

	// The earliest completed stop wins.
	s = NewStopper("world", "lo w")
	out, stopped := s.Feed("hello world")
	assert.Equal(t, "hel", out)
	assert.True(t, stopped)
	assert.Equal(t, "lo w", s.Matched())

	s.Reset()
	assert.False(t, s.Stopped())
	out, stopped = s.Feed("abc")
	assert.Equal(t, "abc", out)
	assert.False(t, stopped)
}

func TestStopperNoStops(t *testing.T) {
	s := NewStopper()
	outs, stopped := feed(s, "a", "<|im_end|>", "b")
	assert.Equal(t, []string{"a", "<|im_end|>", "b"}, outs)
	assert.False(t, stopped)
}

// Property: for every way of splitting a text into pieces, the released
// text equals the text up to the first stop string.
func TestStopperAllSplits(t *testing.T) {
	text := "I say <end_of<end_of_turn>after"
	want := "I say <end_of"
	for cut1 := 0; cut1 <= len(text); cut1++ {
		for cut2 := cut1; cut2 <= len(text); cut2++ {
			s := NewStopper("<end_of_turn>")
			outs, stopped := feed(s, text[:cut1], text[cut1:cut2], text[cut2:])
			assert.True(t, stopped)
			assert.Equal(t, want, strings.Join(outs, ""), "cuts %d %d", cut1, cut2)
		}
	}
}
