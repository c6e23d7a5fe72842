package infer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/toyml/toy/cuda"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/grammar"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
)

// genTiming is what toy generate reports on stderr when it ends, on lines of their own after a
// blank one (as llama.cpp's performance summary): how long loading took, the prompt's tokens
// and how fast they were computed, and the generated tokens and how fast they came after the
// first of each reply (the first one's time is the prompt's).
type genTiming struct {
	load time.Duration
	// promptTokens are the prompts' tokens (in a conversation, every turn's whole rendering);
	// reused of them were kept in the cache from the turn before, the rest took promptTime.
	promptTokens, reused int
	promptTime           time.Duration
	// generated tokens in replies; afterFirst of them came after each reply's first, in genTime.
	generated, replies, afterFirst int
	genTime                        time.Duration
}

// report writes the summary to w.
func (t *genTiming) report(w io.Writer) {
	fmt.Fprintf(w, "\ntoy generate: load %s\n", millis(t.load))
	computed := t.promptTokens - t.reused
	if t.reused > 0 {
		fmt.Fprintf(w, "toy generate: prompt %d tokens, %d of them reused from the cache; %d computed in %s%s\n",
			t.promptTokens, t.reused, computed, millis(t.promptTime), perSecond(computed, t.promptTime))
	} else {
		fmt.Fprintf(w, "toy generate: prompt %d tokens in %s%s\n", computed, millis(t.promptTime), perSecond(computed, t.promptTime))
	}
	in := ""
	if t.replies > 1 {
		in = fmt.Sprintf(" in %d replies", t.replies)
	}
	fmt.Fprintf(w, "toy generate: generated %d tokens%s", t.generated, in)
	if t.afterFirst > 0 {
		each := "the first"
		if t.replies > 1 {
			each = "each reply's first"
		}
		fmt.Fprintf(w, "; %d after %s in %s%s", t.afterFirst, each, millis(t.genTime), perSecond(t.afterFirst, t.genTime))
	}
	fmt.Fprintln(w)
}

// millis writes d in milliseconds.
func millis(d time.Duration) string { return fmt.Sprintf("%.0f ms", 1000*d.Seconds()) }

// perSecond is ": R tokens/s" for n tokens in d, or nothing when there is nothing to divide.
func perSecond(n int, d time.Duration) string {
	if n <= 0 || d <= 0 {
		return ""
	}
	return fmt.Sprintf(": %.1f tokens/s", float64(n)/d.Seconds())
}

// replyEnd is why a reply ended.
type replyEnd int

const (
	// endDone: the end of text, a stop string or the reply's -n tokens.
	endDone replyEnd = iota
	// endContextFull: the context is full and its policy does not shift it.
	endContextFull
	// endInterrupted: Ctrl-C during the reply.
	endInterrupted
	// endCut: the reply's -n tokens came before its constrained output was complete.
	endCut
)

// replyLoop samples replies from a decoder and writes their text as it comes: toy generate's
// loop, and each turn of its conversation.
type replyLoop struct {
	dec *decoding.Decoder
	tok *tokenizer.Tokenizer
	s   *sample.Sampler
	// onDevice, when not nil, samples on the device from the decoder's last logits instead of s.
	onDevice *cuda.TokenSampler
	// n is the most tokens a reply has; -1: until the end of text or of the context.
	n     int
	stops []string
	// interrupts stops the reply at the next token when a signal arrives (nil: never).
	interrupts <-chan os.Signal
	timing     *genTiming
	// matcher, when not nil, is the grammar s is constrained by (sample.Sampler.Constrain):
	// it takes each token, and the reply ends where the grammar allows nothing more.
	// constraint names its flag in errors.
	matcher    *grammar.Matcher
	constraint string
}

// reply samples after logits, the decoder's logits after history (the tokens in its context,
// the repetition penalties' window), and writes the reply to out, flushing each piece. It
// returns the text written (a stop string not included) and why it ended. The last token
// sampled is not decoded (nothing would read its logits), so the decoder then holds history
// and every reply token but the last.
func (l *replyLoop) reply(out *bufio.Writer, history []int32, logits []float32) (string, replyEnd, error) {
	stopper := sample.NewStopper(l.stops...)
	var text strings.Builder
	write := func(s string) {
		text.WriteString(s)
		out.WriteString(s)
		out.Flush()
	}
	var first time.Time // when the first token was out
	generated := 0
	finish := func(end replyEnd, err error) (string, replyEnd, error) {
		write(stopper.Flush())
		l.timing.replies++
		if generated > 1 {
			l.timing.afterFirst += generated - 1
			l.timing.genTime += time.Since(first)
		}
		return text.String(), end, err
	}
	for i := 0; l.n < 0 || i < l.n; i++ {
		select {
		case <-l.interrupts:
			return finish(endInterrupted, nil)
		default:
		}
		var next int32
		if l.onDevice != nil {
			var err error
			if next, err = l.onDevice.Sample(l.dec.LastLogits()); err != nil {
				return finish(endDone, err)
			}
		} else {
			next = l.s.Sample(logits, history)
		}
		if next < 0 {
			return finish(endDone, fmt.Errorf("%s: no token of the vocabulary continues the grammar after %d tokens", l.constraint, generated))
		}
		if next == l.tok.EOS() && l.tok.EOS() >= 0 {
			break
		}
		if l.matcher != nil {
			if err := l.matcher.Accept(next); err != nil {
				return finish(endDone, err)
			}
		}
		history = append(history, next)
		piece, err := l.tok.Piece(next, tokenizer.DecodeOptions{})
		if err != nil {
			return finish(endDone, err)
		}
		safe, stopped := stopper.Feed(piece)
		write(safe)
		l.timing.generated++
		if generated++; generated == 1 {
			first = time.Now()
		}
		if stopped || l.matcher != nil && l.matcher.Done() { // a stop string, or a grammar that allows nothing more
			break
		}
		if l.n >= 0 && i+1 == l.n {
			if l.matcher != nil && !l.matcher.Complete() {
				return finish(endCut, nil)
			}
			break // the last token is not decoded: nothing would read its logits
		}
		if logits, err = l.dec.Next(next); err != nil {
			if errors.Is(err, decoding.ErrContextFull) {
				// As llama.cpp: the context is full and the policy does not shift it, so the
				// reply stops; it is not a failure.
				return finish(endContextFull, nil)
			}
			return finish(endDone, err)
		}
	}
	return finish(endDone, nil)
}

// contextFullNote is what toy generate says on stderr when a reply stopped at the end of the
// context.
func contextFullNote(stderr io.Writer, dec *decoding.Decoder) {
	fmt.Fprintf(stderr, "toy generate: the context of %d tokens is full: stopped (-c sets a larger one, -ctx-full shift goes on)\n", dec.MaxContext())
}
