package serve

import (
	"errors"
	"runtime"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toyml/toy/engines/grammar"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
)

// slot is an active job in a decoder slot.
type slot struct {
	j         *job
	idx       int
	fed       int   // prompt tokens in the cache
	cached    int   // of them, those reused from the slot's last sequence
	last      int32 // the sampled token to feed next (when fed == len(ids))
	sampler   *sample.Sampler
	matcher   *grammar.Matcher // the job's grammar's, nil without one
	stopper   *sample.Stopper
	history   []int32
	generated int
	held      []byte // the bytes of an incomplete UTF-8 character
	first     bool   // the first token was sent

	// spec is speculative decoding's state, nil without a drafter or with a grammar.
	spec *specSlot
}

// sampleAll draws each slot's next token from its logits, the slots in parallel: sampling a
// large vocabulary costs up to a millisecond a token (top-p over a flat distribution), and the
// decoder's threads are idle meanwhile. The calling goroutine samples the first slot itself, so that a step of one
// sequence starts no goroutine, as toy generate samples between its steps: a new goroutine
// may have to wake a thread while ggml's worker still spins on the other core. When every
// slot is greedy (Sampler.Greedy: an argmax, about 16 µs for 49152 logits) it samples them
// all itself: the goroutines cost more than they save (an 8-slot step's sampling and
// hand-off took 0.48 ms in parallel, 0.19 ms so, with the faster argmax). So it does with one
// Go P (toy serve runs so), where goroutines would take turns anyway.
func sampleAll(slots []*slot, logits [][]float32) []int32 {
	toks := make([]int32, len(slots))
	greedy := true
	for _, sl := range slots {
		greedy = greedy && sl.sampler.Greedy()
	}
	if greedy || runtime.GOMAXPROCS(0) == 1 { // an argmax each, or one P: cheaper than waking goroutines
		for i, sl := range slots {
			toks[i] = sl.sampler.Sample(logits[i], sl.history)
		}
		return toks
	}
	var wg sync.WaitGroup
	for i, sl := range slots[min(1, len(slots)):] {
		wg.Go(func() { toks[i+1] = sl.sampler.Sample(logits[i+1], sl.history) })
	}
	if len(slots) > 0 {
		toks[0] = slots[0].sampler.Sample(logits[0], slots[0].history)
	}
	wg.Wait()
	return toks
}

// next takes tok as slot sl's next token and sends its text; done says the request ended
// (with the final event).
func (s *Server) next(sl *slot, tok int32) (event, bool) {
	if !sl.first {
		sl.first = true
		s.metrics.firstToken(time.Since(sl.j.enqueued))
	}
	if tok < 0 { // a grammar that no token of the vocabulary continues
		return event{err: errors.New("serve: no token of the vocabulary continues the reply's grammar (response_format or tools)")}, true
	}
	if eos := s.tok.EOS(); eos >= 0 && tok == eos {
		sl.send(sl.stopper.Flush(), true)
		return event{finish: "stop"}, true
	}
	if sl.matcher != nil {
		if err := sl.matcher.Accept(tok); err != nil {
			return event{err: err}, true
		}
	}
	sl.generated++
	s.metrics.genTokens.Add(1)
	sl.history = append(sl.history, tok)
	piece, err := s.tok.Piece(tok, tokenizer.DecodeOptions{})
	if err != nil {
		return event{err: err}, true
	}
	if sl.j.logprobs {
		sl.j.events <- s.logprobEvent(sl.sampler, piece)
	}
	text, stopped := sl.stopper.Feed(piece)
	if stopped {
		sl.send(text, true)
		return event{finish: "stop"}, true
	}
	if sl.matcher != nil && sl.matcher.Done() { // the grammar is complete and allows nothing more
		sl.send(text+sl.stopper.Flush(), true)
		return event{finish: "stop"}, true
	}
	full := s.dec.Pos(sl.idx)+1 > s.dec.SlotContext()
	if sl.generated >= sl.j.maxTokens || full {
		sl.send(text+sl.stopper.Flush(), true)
		return event{finish: "length"}, true
	}
	sl.send(text, false)
	sl.last = tok
	return event{}, false
}

// send hands text to the handler, holding back the bytes of a character not yet complete
// (byte-level tokens split characters) unless final.
func (sl *slot) send(text string, final bool) {
	b := append(sl.held, text...)
	cut := len(b)
	if !final {
		// Keep back an incomplete UTF-8 sequence at the end (at most 3 bytes).
		for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:]) {
					cut = i
				}
				break
			}
		}
	}
	out := string(b[:cut])
	sl.held = append([]byte(nil), b[cut:]...)
	if out != "" {
		sl.j.events <- event{text: out}
	}
}
