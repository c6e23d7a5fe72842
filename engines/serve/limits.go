package serve

import (
	"fmt"
	"net/http"
	"time"

	"github.com/toyml/toy/engines/tokenizer"
)

// bodySlack is the room a body's bound leaves for the fields besides its prompt (the sampling
// settings, stop strings, a logit_bias map).
const bodySlack = 1 << 20

// promptBounds are the most bytes of prompt text that may fit a slot of n positions (0: no
// bound), and the largest body a completion may send. No token stands for more than maxTok bytes
// of text (Tokenizer.MaxTokenBytes), so a text of more than maxTok × (n−1) bytes encodes to n
// tokens or more, which newJob would refuse: such a text is refused before it is encoded
// (fits). A body may write each byte of its prompt as a six-byte escape ("\u0001") and holds
// other fields besides: it may take 6 × the text bound + bodySlack bytes, and never more than
// maxBody. A tokenizer that drops bytes it has no token for gives no bound: maxBody alone
// holds then.
func promptBounds(tok *tokenizer.Tokenizer, n int) (text, body int) {
	maxTok, everyByte := tok.MaxTokenBytes()
	if !everyByte {
		return 0, maxBody
	}
	text = maxTok * (n - 1)
	return text, min(maxBody, 6*text+bodySlack)
}

// fits refuses a prompt text (of the field param) that cannot fit a slot's context whatever
// it encodes to (promptBounds), with newJob's error, before it is encoded: a 7 MB prompt
// encoded to 3.7 million tokens before newJob counted them.
func (s *Server) fits(text, param string) *apiError {
	if s.textBound == 0 || len(text) <= s.textBound {
		return nil
	}
	maxTok, _ := s.tok.MaxTokenBytes()
	n := s.dec.SlotContext()
	return &apiError{status: http.StatusBadRequest, Type: "invalid_request_error", Code: "context_length_exceeded", Param: strPtr(param),
		Message: fmt.Sprintf("the prompt is %d bytes, so at least %d tokens (no token of this model stands for more than %d bytes); the context of each sequence holds %d, so at most %d fit with room for a reply",
			len(text), (len(text)+maxTok-1)/maxTok, maxTok, n, n-1)}
}

// reserve takes a place for a completion about to be read, decoded and tokenized, or reports
// that the server is full: the completions being prepared, queued and running are at most the
// slots and the queue together, so that a burst beyond them is refused (429) before any of its
// bodies is read or encoded. The place is given back (preparing.Add(-1)) once the request is
// queued (where it is counted until a slot takes it) or refused.
func (s *Server) reserve() bool {
	limit := int64(s.dec.Slots() + cap(s.queue))
	for {
		p := s.preparing.Load()
		if p+s.metrics.queued.Load()+s.metrics.busy.Load() >= limit {
			return false
		}
		if s.preparing.CompareAndSwap(p, p+1) {
			return true
		}
	}
}

// errBusy is the 429 of a server whose slots and queue are full.
var errBusy = &apiError{status: http.StatusTooManyRequests, Type: "rate_limit_exceeded", Message: "the server is busy: every slot is taken and the queue is full; retry later"}

// refuseBusy answers errBusy, with Retry-After.
func refuseBusy(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeError(w, errBusy)
}

// maxHeaderTimeout bounds how long a client may take to send a request's headers, whatever
// NewHTTPServer's timeout: one packet's worth, which no client needs seconds for.
const maxHeaderTimeout = 10 * time.Second

// NewHTTPServer is the http.Server of h with its clients' time bounded by timeout: to send a
// request's headers (maxHeaderTimeout at most) and body (the server's ReadTimeout, which
// net/http lifts once the body is read: a reply may take as long as it needs), and to take each
// write of a reply (deadlineWriter: a reply streams for as long as it needs, but a client that
// stops reading is dropped; the server's WriteTimeout, which would cut every reply at a fixed
// age, is left unset). idle is how long a kept-alive connection may wait for its next request.
// Zero bounds nothing (but the headers).
func NewHTTPServer(h http.Handler, timeout, idle time.Duration) *http.Server {
	header := maxHeaderTimeout
	if timeout > 0 {
		header = min(header, timeout)
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}
			dw.renew()
			inner.ServeHTTP(dw, r)
			// Once h returns, net/http may read what is left of a body h did not read (until
			// the read deadline, a timeout from the request's start) before it writes the
			// reply's last bytes: they get a timeout from then.
			end := time.Now()
			if read := start.Add(timeout); read.After(end) {
				end = read
			}
			dw.rc.SetWriteDeadline(end.Add(timeout))
		})
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: header, ReadTimeout: timeout, IdleTimeout: idle}
}

// deadlineWriter gives each write of a reply, and each flush, timeout to finish from its start.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *deadlineWriter) renew() { w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) }

func (w *deadlineWriter) WriteHeader(code int) {
	w.renew()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.renew()
	return w.ResponseWriter.Write(b)
}

func (w *deadlineWriter) Flush() {
	w.renew()
	w.rc.Flush()
}

// Unwrap is the writer under w (http.ResponseController's way to the connection).
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
