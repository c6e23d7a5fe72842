// Package serve is toy's inference server: an OpenAI-compatible HTTP API (chat and text
// completions, streamed as server-sent events or not, models, health, Prometheus metrics) over
// one model, with continuous batching: every active request is a sequence of one
// decoding.BatchDecoder, all of them advanced by one graph per step, new requests' prompts joining
// between steps and finished or abandoned ones leaving.
//
// The server keeps no state between requests, so replicas behind any HTTP load balancer scale
// it out.
//
// Besides completions it answers embeddings (/v1/embeddings), tool calls, structured output
// (response_format), log-probabilities and n choices, and it decodes every slot speculatively
// with a draft model (Config.Draft) or a DFlash drafter (Config.DFlash). Its files: api.go
// (Handler and the endpoints), serve.go (New, the scheduler's loop, placement, Drain, Close),
// slot.go (a request's sequence and its sampling), speculate.go (the draft and verify steps)
// with drafter.go (the drafters), embed.go, tools.go, logprobs.go, request.go (a request's
// body), apierror.go, limits.go (bounds on prompts, bodies and clients), origin.go (allowed
// origins), page.go (the chat page), server.go (the Server's types), config.go, log.go and
// metrics.go.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/grammar"
	"github.com/toyml/toy/engines/sample"
)

// New starts a server's scheduler.
func New(cfg Config) (*Server, error) {
	if cfg.Model == nil || cfg.Decoder == nil || cfg.Tokenizer == nil {
		return nil, errors.New("serve: a model, a batched decoder and a tokenizer are needed")
	}
	if cfg.Queue == 0 {
		cfg.Queue = 64
	}
	if cfg.Queue < 0 {
		return nil, fmt.Errorf("serve: a queue of %d", cfg.Queue)
	}
	if err := cfg.Defaults.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	for i, k := range cfg.APIKeys {
		// A key is compared with what a request presents with its blanks around cut off: a
		// blank one, or one with blanks around it, would match no request.
		if k == "" || strings.TrimSpace(k) != k || strings.ContainsFunc(k, unicode.IsControl) {
			return nil, fmt.Errorf("serve: API key %d: an empty API key, one with blanks around it or one with a control character, which no request can present", i+1)
		}
	}
	var err error
	s := &Server{cfg: cfg, dec: cfg.Decoder, tok: cfg.Tokenizer, queue: make(chan *job, cfg.Queue),
		stopAll: make(chan struct{}), done: make(chan struct{}), created: time.Now().Unix(), work: make(chan func()),
		vocab: sync.OnceValue(func() *grammar.Vocab { return grammar.VocabOf(cfg.Tokenizer) })}
	s.metrics.init(cfg.Decoder.Slots())
	if s.drafter, err = newDrafter(cfg); err != nil {
		return nil, err
	}
	if s.drafter != nil {
		s.metrics.spec = newSpecMetrics(cfg.Decoder.Slots())
	}
	s.textBound, s.bodyBound = promptBounds(cfg.Tokenizer, cfg.Decoder.SlotContext())
	go s.loop()
	return s, nil
}

// submit queues a job, or refuses it at once.
func (s *Server) submit(j *job) error {
	if s.closing.Load() {
		return errClosing
	}
	j.enqueued = time.Now()
	select {
	case s.queue <- j:
		s.metrics.queued.Add(1)
		return nil
	default:
		return errQueueFull
	}
}

// Drain stops taking requests and waits until the queued and running ones finish, or ctx
// ends; then it cancels whatever is left (Close).
func (s *Server) Drain(ctx context.Context) {
	s.closing.Store(true)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for s.metrics.busy.Load() > 0 || s.metrics.queued.Load() > 0 {
		select {
		case <-ctx.Done():
			s.Close()
			return
		case <-t.C:
		}
	}
	s.Close()
}

// Close cancels every request (each ends with an error) and stops the scheduler.
func (s *Server) Close() {
	s.closing.Store(true)
	s.once.Do(func() { close(s.stopAll) })
	<-s.done
}

// loop is the scheduler: it admits queued jobs into free slots, advances every active one by
// one decoder step, samples, and hands the text to the handlers.
func (s *Server) loop() {
	defer close(s.done)
	defer s.closeEmbedder()
	if s.drafter != nil {
		defer s.drafter.close()
	}
	slots := make([]*slot, s.dec.Slots())
	active := 0
	// The prompt cache: kept[i] are the tokens whose keys and values decoder slot i holds, at
	// positions 0 on, left by the last request it ran; freed[i] is when that request ended (a
	// count of finished requests), so that a new request with no prefix to reuse takes the
	// slot whose cache is oldest.
	kept := make([][]int32, len(slots))
	freed := make([]int64, len(slots))
	var finished int64
	finish := func(sl *slot, e event) {
		e.done = true
		e.promptTokens, e.cachedTokens, e.completionTokens = len(sl.j.ids), sl.cached, sl.generated
		sl.j.events <- e
		slots[sl.idx] = nil
		// The cells hold the tokens fed so far: the prompt and every generated token but the
		// last, which was sampled and never fed; after a speculative step, also the accepted
		// proposals after the token that ended the reply, which are dropped.
		n := min(s.dec.Pos(sl.idx), len(sl.history))
		if err := s.dec.Truncate(sl.idx, n); err != nil {
			panic(fmt.Sprintf("serve: %v", err)) // n ≤ the slot's positions
		}
		kept[sl.idx] = sl.history[:n]
		finished++
		freed[sl.idx] = finished
		active--
		s.metrics.busy.Add(-1)
	}
	admit := func(j *job) {
		s.metrics.queued.Add(-1)
		// The tokens each slot's cells hold: a running request's fed so far, a free slot's
		// left by its last request.
		cells, free := make([][]int32, len(slots)), make([]bool, len(slots))
		for i, sl := range slots {
			cells[i], free[i] = kept[i], sl == nil
			if sl != nil {
				cells[i] = sl.history[:s.dec.Pos(i)]
			}
		}
		p := place(j.ids, cells, free, freed, !s.cfg.NoPromptCache)
		if p.slot < 0 {
			panic("serve: no free slot")
		}
		reuse, copied := p.reuse, false
		if p.donor >= 0 {
			if err := s.dec.CopyPrefix(p.slot, p.donor, p.shared); err != nil {
				// What the slot's cells hold now is not known: compute the whole prompt.
				fmt.Fprintf(s.cfg.Log, "toy serve: copying %d cached positions from slot %d: %v\n", p.shared, p.donor, err)
				reuse = 0
			} else {
				reuse, copied = p.shared, true
				s.metrics.sharedTokens.Add(int64(reuse))
			}
		}
		if !copied {
			if err := s.dec.Truncate(p.slot, reuse); err != nil {
				panic(fmt.Sprintf("serve: %v", err)) // reuse ≤ len(kept[slot]) = the slot's positions
			}
		}
		sl := &slot{j: j, idx: p.slot, fed: reuse, cached: reuse, sampler: sample.NewSampler(j.params), stopper: sample.NewStopper(j.stops...),
			history: append(make([]int32, 0, len(j.ids)+j.maxTokens), j.ids...)}
		if j.grammar != nil {
			sl.matcher = j.grammar.NewMatcher(s.vocab())
			sl.sampler.Constrain(sl.matcher)
		} else if s.drafter != nil && !j.logprobs { // a drafted token's log-probabilities are not the draw's
			sl.spec = s.drafter.newSlot(sl.sampler)
		}
		if j.logprobs {
			sl.sampler.KeepLogprobs(j.topLogprobs)
		}
		slots[p.slot] = sl
		if s.drafter != nil {
			s.drafter.admitted(p.slot, reuse)
		}
		s.metrics.cachedTokens.Add(int64(reuse))
		active++
		s.metrics.busy.Add(1)
	}
	for {
		// Admit: block for work when idle.
		if active == 0 {
			select {
			case j := <-s.queue:
				admit(j)
			case f := <-s.work:
				f()
				continue
			case <-s.stopAll:
				s.cancelQueued()
				return
			}
		}
		for active < len(slots) {
			select {
			case j := <-s.queue:
				admit(j)
				continue
			default:
			}
			break
		}
		select {
		case <-s.stopAll:
			for _, sl := range slots {
				if sl != nil {
					finish(sl, event{err: errClosing})
				}
			}
			s.cancelQueued()
			return
		default:
		}
		select {
		case f := <-s.work: // between steps
			f()
		default:
		}
		// Leave: a request whose client went away frees its slot.
		for _, sl := range slots {
			if sl != nil && sl.j.ctx.Err() != nil {
				s.metrics.cancelled.Add(1)
				finish(sl, event{err: sl.j.ctx.Err()})
			}
		}
		if active == 0 {
			continue
		}
		// One step: every generating slot's last token, then prompt chunks in the room left.
		var in []decoding.BatchInput
		var who []*slot
		budget := s.dec.MaxBatch()
		s.draft(slots)
		for _, sl := range slots {
			if sl != nil && sl.fed == len(sl.j.ids) {
				toks := []int32{sl.last}
				if sl.spec != nil && sl.spec.drafted { // verify the proposals too
					toks = append(toks, sl.spec.drafts...)
				}
				in = append(in, decoding.BatchInput{Slot: sl.idx, Tokens: toks, Logits: len(toks)})
				who = append(who, sl)
				budget -= len(toks)
			}
		}
		for _, sl := range slots {
			if sl != nil && sl.fed < len(sl.j.ids) && budget > 0 {
				n := min(len(sl.j.ids)-sl.fed, budget)
				in = append(in, decoding.BatchInput{Slot: sl.idx, Tokens: sl.j.ids[sl.fed : sl.fed+n]})
				who = append(who, sl)
				budget -= n
			}
		}
		t0 := time.Now()
		rows, err := s.dec.Step(in)
		if err != nil {
			fmt.Fprintf(s.cfg.Log, "toy serve: step of %d sequences: %v\n", len(in), err)
			for _, sl := range who {
				finish(sl, event{err: err})
				kept[sl.idx] = nil // what the failed step left in the cells is not known
			}
			continue
		}
		if s.drafter != nil {
			s.drafter.stepped(in)
		}
		var gen []*slot // the slots whose logits give their next token
		var logits [][]float32
		var verified []*slot // the slots whose logits verify their proposals
		var verifiedRows [][][]float32
		off := 0 // the first row of input i (a verification has one per token)
		for i, sl := range who {
			r := rows[off : off+max(1, in[i].Logits)]
			off += len(r)
			if sl.spec != nil && sl.spec.drafted {
				verified, verifiedRows = append(verified, sl), append(verifiedRows, r)
				continue
			}
			if sl.fed < len(sl.j.ids) {
				sl.fed += len(in[i].Tokens)
				s.metrics.promptTokens.Add(int64(len(in[i].Tokens)))
				if sl.fed < len(sl.j.ids) {
					continue
				}
			}
			gen, logits = append(gen, sl), append(logits, r[0])
		}
		committed := len(gen)
		for i, tok := range sampleAll(gen, logits) {
			if e, done := s.next(gen[i], tok); done {
				finish(gen[i], e)
			}
		}
		for i, sl := range verified {
			e, done, n := s.verify(sl, verifiedRows[i])
			committed += n
			if done {
				finish(sl, e)
			}
		}
		s.metrics.step(committed, time.Since(t0))
	}
}

// placement is where a request's prompt starts (place): in free slot slot, reusing the first
// reuse positions of the slot's own cells; and, when donor is not -1, with the first shared
// positions copied from slot donor's cells instead (shared > reuse).
type placement struct {
	slot, reuse, donor, shared int
}

// place chooses the slot of a prompt ids, given the tokens each slot's cells hold (cells), which
// slots are free and when each was freed (a count of finished requests). The free slot whose
// cells share the longest prefix with the prompt is taken, among equals the one freed longest
// ago, so that a prompt with nothing to reuse leaves the newer caches alone. Another slot,
// running or free, may hold a longer prefix (a system message other requests share, a document
// asked about again): then its cells are copied, when that saves at least minSharedPrefix
// positions. At least the prompt's last token is always computed: its logits give the first
// reply token. Without cache nothing is reused.
func place(ids []int32, cells [][]int32, free []bool, freed []int64, cache bool) placement {
	p := placement{slot: -1, donor: -1}
	prefix := func(i int) int {
		if !cache {
			return 0
		}
		return min(decoding.CommonPrefix(cells[i], ids), len(ids)-1)
	}
	for i := range cells {
		if !free[i] {
			continue
		}
		if n := prefix(i); p.slot < 0 || n > p.reuse || n == p.reuse && freed[i] < freed[p.slot] {
			p.slot, p.reuse = i, n
		}
	}
	if p.slot < 0 {
		return p
	}
	p.shared = p.reuse
	for i := range cells {
		if n := prefix(i); i != p.slot && n > p.shared {
			p.donor, p.shared = i, n
		}
	}
	if p.shared-p.reuse < minSharedPrefix {
		p.donor, p.shared = -1, p.reuse
	}
	return p
}

// minSharedPrefix is the fewest positions worth copying from another slot (BatchDecoder.CopyPrefix,
// a graph of its own) rather than computing them with the rest of the prompt.
const minSharedPrefix = 4

// cancelQueued ends every queued job with errClosing.
func (s *Server) cancelQueued() {
	for {
		select {
		case j := <-s.queue:
			s.metrics.queued.Add(-1)
			j.events <- event{done: true, err: errClosing}
		default:
			return
		}
	}
}

// newJob checks a prompt against the context and makes its job.
func (s *Server) newJob(ctx context.Context, ids []int32, p sample.Params, seedGiven bool, maxTokens int, stops []string) (*job, *apiError) {
	if len(ids) == 0 {
		return nil, badRequest("prompt", "the prompt encodes to no tokens")
	}
	n := s.dec.SlotContext()
	if len(ids) >= n {
		return nil, &apiError{status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Param: strPtr("messages"),
			Message: fmt.Sprintf("the prompt is %d tokens; the context of each sequence holds %d, so at most %d fit with room for a reply", len(ids), n, n-1)}
	}
	room := n - len(ids)
	if maxTokens <= 0 || maxTokens > room {
		maxTokens = room
	}
	if !seedGiven && p.Temperature > 0 {
		p.Seed = rand.Uint64()
	}
	return &job{ctx: ctx, ids: ids, params: p, maxTokens: maxTokens, stops: append(stops, s.cfg.Stops...),
		events: make(chan event, maxTokens+2)}, nil
}

// Front is the HTTP surface from the moment the server listens: until Ready hands it a
// server's handler (after the model loaded and the kernel gate passed), /health answers 503
// {"status":"loading"} and every other path 503 in OpenAI's error shape, so that an
// orchestrator sends no traffic to a replica that cannot serve it.
type Front struct{ h atomic.Pointer[http.Handler] }

// Ready makes h serve every request from now on.
func (f *Front) Ready(h http.Handler) { f.h.Store(&h) }

func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := f.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	if r.URL.Path == "/health" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "loading"})
		return
	}
	writeError(w, &apiError{status: http.StatusServiceUnavailable, Type: "server_error", Message: "the model is loading"})
}
