package serve

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/grammar"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
)

// Server serves one model. Its Handler is safe for concurrent use; one goroutine (started by
// New, stopped by Close) runs the decoder.
type Server struct {
	cfg     Config
	dec     *decoding.BatchDecoder
	tok     *tokenizer.Tokenizer
	queue   chan *job
	closing atomic.Bool
	stopAll chan struct{} // closed by Close: cancel every request
	done    chan struct{} // closed when the loop returns
	once    sync.Once
	metrics metrics
	created int64
	// textBound is the most bytes of prompt text that may fit a slot's context (0: no bound),
	// bodyBound the largest body a completion may send (promptBounds; 0: maxBody).
	textBound, bodyBound int
	// preparing counts the completions being read, decoded and tokenized, each holding a place
	// as a queued one does (reserve).
	preparing atomic.Int64
	// vocab is the tokenizer's vocabulary as grammars match it, made on first use.
	vocab func() *grammar.Vocab
	// work is what the scheduler runs between its steps besides them (onLoop): embeddings.
	work chan func()
	// embedder computes embeddings (embed.go), made on the scheduler's goroutine on first use.
	embedder *decoding.Decoder
	// drafter proposes the slots' speculative tokens (nil: none; Config.Draft, Config.DFlash).
	drafter drafter
}

// job is one request in the scheduler.
type job struct {
	ctx       context.Context
	ids       []int32
	params    sample.Params
	maxTokens int
	stops     []string
	// grammar, when not nil, constrains the reply (response_format): every token is one it
	// allows, and the reply ends where it is complete.
	grammar  *grammar.Grammar
	events   chan event
	enqueued time.Time
	// logprobs asks for an event with each token's log-probability and those of its topLogprobs
	// most likely alternatives (logprobEvent), before the token's text.
	logprobs    bool
	topLogprobs int
}

// event is what the scheduler tells a request's handler: a piece of text, or the end.
type event struct {
	text             string
	done             bool
	finish           string // "stop" or "length" when done
	err              error
	promptTokens     int
	cachedTokens     int // of promptTokens, those whose keys and values were reused
	completionTokens int
	logprob          *tokenLogprob // a token's log-probabilities (job.logprobs), with no text
}

// tokenLogprob is a generated token's log-probability and those of the most likely tokens of
// the distribution it was drawn from (sample.Sampler.KeepLogprobs), each with its bytes.
type tokenLogprob struct {
	piece   string
	logprob float64
	top     []altLogprob
}

// altLogprob is one of the most likely tokens at a step.
type altLogprob struct {
	piece   string
	logprob float64
}

// errQueueFull and errClosing refuse a request that cannot be queued.
var (
	errQueueFull = errors.New("serve: the queue is full")
	errClosing   = errors.New("serve: the server is shutting down")
)
