package sample

import "strings"

// Stopper finds stop strings in streamed text. Feed it the decoded pieces
// of a generation one at a time and print what it returns: text that can no
// longer be part of a stop string is released at once, a suffix that may
// still grow into one is held back, and a completed stop string ends the
// stream without being printed. Call Flush when generation ends for another
// reason to release the held-back text.
//
// Matching is on bytes, so stop strings should be valid UTF-8 and pieces
// should be fed as the decoder produces them.
type Stopper struct {
	stops   []string
	pending string
	matched string
	done    bool
}

// NewStopper returns a Stopper for the given stop strings; empty strings
// are ignored. With no stop strings every piece is passed through.
func NewStopper(stops ...string) *Stopper {
	s := &Stopper{}
	for _, st := range stops {
		if st != "" {
			s.stops = append(s.stops, st)
		}
	}
	return s
}

// Feed adds a piece of decoded text and returns the text that is safe to
// print now. stopped is true once a stop string has completed; the returned
// text then ends just before it, and later calls return "" and true.
func (s *Stopper) Feed(piece string) (out string, stopped bool) {
	if s.done {
		return "", true
	}
	s.pending += piece

	// The earliest stop string wins; at the same position, the first listed.
	at := -1
	for _, st := range s.stops {
		if i := strings.Index(s.pending, st); i >= 0 && (at < 0 || i < at) {
			at, s.matched = i, st
		}
	}
	if at >= 0 {
		out = s.pending[:at]
		s.pending = ""
		s.done = true
		return out, true
	}

	hold := s.heldFrom()
	out, s.pending = s.pending[:hold], s.pending[hold:]
	return out, false
}

// heldFrom returns where the longest suffix of the pending text that is a
// (proper) prefix of some stop string starts, or len(pending) if none is.
func (s *Stopper) heldFrom() int {
	// No suffix longer than the longest stop string minus one can qualify.
	longest := 0
	for _, st := range s.stops {
		longest = max(longest, len(st))
	}
	start := max(0, len(s.pending)-longest+1)
	for i := start; i < len(s.pending); i++ {
		suffix := s.pending[i:]
		for _, st := range s.stops {
			if len(suffix) < len(st) && strings.HasPrefix(st, suffix) {
				return i
			}
		}
	}
	return len(s.pending)
}

// Flush returns the held-back text and clears it: call it when generation
// ends without a stop string (end-of-generation token, length limit). It
// returns "" after a stop string completed.
func (s *Stopper) Flush() string {
	out := s.pending
	s.pending = ""
	return out
}

// Stopped reports whether a stop string has completed.
func (s *Stopper) Stopped() bool { return s.done }

// Matched returns the stop string that completed, or "" if none has.
func (s *Stopper) Matched() string { return s.matched }

// Pending returns the text currently held back.
func (s *Stopper) Pending() string { return s.pending }

// Reset clears the state so the Stopper can watch a new stream.
func (s *Stopper) Reset() {
	s.pending, s.matched, s.done = "", "", false
}
