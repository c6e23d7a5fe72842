package serve

import (
	"strings"
	"unicode/utf8"

	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
)

// maxChoices bounds a request's n: each choice is a sequence of its own.
const maxChoices = 16

// minLogprob is the least log-probability a reply reports (JSON has no -Inf): OpenAI's floor.
const minLogprob = -9999.0

// logprobEvent is the event of the token whose bytes are piece, just drawn by sampler.
func (s *Server) logprobEvent(sampler *sample.Sampler, piece string) event {
	lp := &tokenLogprob{piece: piece}
	step, ok := sampler.LastLogprobs()
	if ok {
		lp.logprob = step.Logprob
		for _, t := range step.Top {
			p, err := s.tok.Piece(t.Token, tokenizer.DecodeOptions{})
			if err != nil {
				continue // a token of the vocabulary decodes; nothing to report otherwise
			}
			lp.top = append(lp.top, altLogprob{piece: p, logprob: t.Logprob})
		}
	}
	return event{logprob: lp}
}

// finiteLogprob is v, no less than minLogprob.
func finiteLogprob(v float64) float64 {
	if !(v >= minLogprob) {
		return minLogprob
	}
	return v
}

// bytesOf is piece's bytes as a JSON array of numbers (a []byte would be base64).
func bytesOf(piece string) []int {
	out := make([]int, len(piece))
	for i := range len(piece) {
		out[i] = int(piece[i])
	}
	return out
}

// chatLogprobs is a chat choice's "logprobs" of entries: {"content": [...]} in OpenAI's shape.
func chatLogprobs(entries []placedLogprob) map[string]any {
	content := make([]any, 0, len(entries))
	for _, e := range entries {
		top := make([]any, 0, len(e.top))
		for _, a := range e.top {
			top = append(top, map[string]any{"token": a.piece, "logprob": finiteLogprob(a.logprob), "bytes": bytesOf(a.piece)})
		}
		content = append(content, map[string]any{"token": e.piece, "logprob": finiteLogprob(e.logprob), "bytes": bytesOf(e.piece), "top_logprobs": top})
	}
	return map[string]any{"content": content}
}

// completionLogprobs is a text completion choice's "logprobs" of entries, in the legacy shape:
// tokens, token_logprobs, top_logprobs (an object of token → log-probability per token, where
// two alternatives with the same text keep the likelier) and text_offset (byte offsets into
// the choice's text).
func completionLogprobs(entries []placedLogprob) map[string]any {
	tokens, lps, tops, offsets := []string{}, []float64{}, []map[string]float64{}, []int{}
	for _, e := range entries {
		tokens = append(tokens, e.piece)
		lps = append(lps, finiteLogprob(e.logprob))
		top := map[string]float64{}
		for _, a := range e.top {
			if k := jsonText(a.piece); !hasKey(top, k) {
				top[k] = finiteLogprob(a.logprob)
			}
		}
		tops = append(tops, top)
		offsets = append(offsets, e.offset)
	}
	return map[string]any{"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}
}

// jsonText is s as a JSON string carries it: each byte of invalid UTF-8 a U+FFFD (as
// encoding/json writes it), so that alternatives that differ in such bytes alone are one key.
func jsonText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		b.WriteRune(r) // utf8.RuneError for an invalid byte
		s = s[n:]
	}
	return b.String()
}

func hasKey(m map[string]float64, k string) bool { _, ok := m[k]; return ok }

// placedLogprob is a tokenLogprob at its byte offset in the choice's text.
type placedLogprob struct {
	*tokenLogprob
	offset int
}

// choiceState is what a reply has of one choice so far: its text, and the log-probabilities
// of its tokens not yet sent (pending), each at the offset of its first byte.
type choiceState struct {
	text     []byte
	tokenEnd int // the bytes of the tokens reported so far (where the next one starts)
	pending  []placedLogprob
	done     bool
	final    event
}

// add takes one of the choice's events (not the final one).
func (c *choiceState) add(e event) {
	if e.logprob != nil {
		c.pending = append(c.pending, placedLogprob{tokenLogprob: e.logprob, offset: c.tokenEnd})
		c.tokenEnd += len(e.logprob.piece)
		return
	}
	c.text = append(c.text, e.text...)
}

// release takes the pending log-probabilities of the tokens whose text has begun in the text
// sent so far: a token cut off by a stop string (whose text never comes) is never released.
func (c *choiceState) release() []placedLogprob {
	n := 0
	for n < len(c.pending) {
		e := c.pending[n]
		if e.offset < len(c.text) || e.piece == "" && e.offset <= len(c.text) {
			n++
			continue
		}
		break
	}
	out := c.pending[:n:n]
	c.pending = c.pending[n:]
	return out
}

// finalOfAll is the first choice's final event with the completion tokens of every choice.
func finalOfAll(choices []*choiceState) event {
	e := choices[0].final
	for _, c := range choices[1:] {
		e.completionTokens += c.final.completionTokens
	}
	return e
}
