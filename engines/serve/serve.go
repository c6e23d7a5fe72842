// Package serve is toy's inference server: an OpenAI-compatible HTTP API (chat and text
// completions, streamed as server-sent events or not, models, health, Prometheus metrics) over
// one model, with continuous batching: every active request is a sequence of one
// decoding.BatchDecoder, all of them advanced by one graph per step, new requests' prompts joining
// between steps and finished or abandoned ones leaving.
//
// The server keeps no state between requests, so replicas behind any HTTP load balancer scale
// it out.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/grammar"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/speculative"
	"github.com/toyml/toy/engines/tokenizer"
)

// Config is what a Server serves and how.
type Config struct {
	// Model, Decoder and Tokenizer run the requests; the Server owns none of them (the caller
	// closes them after Close).
	Model     *decoding.GGUFModel
	Decoder   *decoding.BatchDecoder
	Tokenizer *tokenizer.Tokenizer
	// ModelName is the model's id in /v1/models; a request naming another model is refused
	// (404) unless AnyModelName. An empty "model" field is accepted.
	ModelName string
	// AnyModelName serves a request naming another model ("gpt-4", a client's default) with
	// this one, as llama-server serves its one model. /v1/models lists ModelName alone either
	// way, /v1/models/{id} knows no other id, and replies name ModelName.
	AnyModelName bool
	// AddBOS starts every prompt with the tokenizer's BOS.
	AddBOS bool
	// Template is the chat template; nil: chat completions are refused (400).
	Template *sample.Template
	// Stops are stop strings every request has besides its own (the model's behaviour).
	Stops []string
	// Defaults are the sampling settings of fields a request leaves out (the kernel table's
	// default preset, as toy generate applies it).
	Defaults sample.Params
	// Queue is how many requests may wait for a slot (default 64), counting those being read
	// and tokenized beyond the free slots; one more is refused with 429 before its body is
	// read.
	Queue int
	// NoPromptCache makes every request compute its whole prompt. By default a request takes
	// the free slot whose last sequence shares the longest prefix with its prompt and reuses
	// the keys and values cached there for that prefix (a conversation's next turn), or copies
	// a longer prefix from another slot's sequence, running or finished (prompts with a
	// common system message), computing only the rest (place).
	NoPromptCache bool
	// APIKeys, when any, are the keys a request to /v1/ must present as "Authorization: Bearer
	// KEY" (what OpenAI's clients send of their api_key; the scheme in any case); others get
	// 401. /health, /metrics and the chat page need none (the page asks for a key when the
	// API refuses it). New refuses an empty key, and one with blanks around it or a control
	// character, which no request could present.
	APIKeys []string
	// Info is what /health reports about the model and the kernel gate.
	Info map[string]any
	// LogRequests writes a line to Log for each request to the API and the page when it ends:
	// method, path, status, time and the reply's tokens or the error. The path, and the error
	// when it quotes the request, are quoted when they hold anything but printable characters,
	// so that no request can end the line and forge another.
	LogRequests bool
	// Log receives one line per notable event (nil: none).
	Log io.Writer
	// Draft, when not nil, makes the slots decode speculatively (speculate.go): a decoder of a
	// smaller model of the same vocabulary, with the Decoder's slots and at least its slot
	// context, proposes up to DraftTokens tokens (0: speculative.DefaultDraftTokens) per step after a
	// slot's last token, which the slot's verification checks in the step's batch. A proposal the
	// draft gives a probability below DraftMinProbability (0: none) ends the drafting. The
	// Server does not own it.
	Draft               *decoding.BatchDecoder
	DraftTokens         int
	DraftMinProbability float64
	// DFlash, when not nil and Draft is, drafts instead: a DFlash drafter of the model, one
	// state per slot, reading the hidden states New makes the Decoder capture; a step proposes
	// up to DraftTokens (0: all its block's) tokens. The Server does not own it.
	DFlash *speculative.DFlash
}

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

// errQueueFull and errClosing refuse a request that cannot be queued.
var (
	errQueueFull = errors.New("serve: the queue is full")
	errClosing   = errors.New("serve: the server is shutting down")
)

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
