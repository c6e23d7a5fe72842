package serve

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listen serves h through NewHTTPServer's timeouts on loopback.
func listen(t *testing.T, h http.Handler, timeout, idle time.Duration) *httptest.Server {
	ts := httptest.NewUnstartedServer(h)
	ts.Config = NewHTTPServer(h, timeout, idle)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// dial opens a raw connection to ts, with a deadline far beyond the timeouts under test.
func dial(t *testing.T, ts *httptest.Server) net.Conn {
	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// closedAfter reads c until the server closes it, and returns how long that took.
func closedAfter(t *testing.T, r io.Reader) time.Duration {
	start := time.Now()
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server did not close the connection: %v", err)
	return time.Since(start)
}

// TestSlowClients: a body sent too slowly gets 408 at the timeout, headers sent too slowly
// and an idle kept-alive connection are closed at theirs, an unauthenticated slow body is cut
// off there too, and the place the slow body held is given back.
func TestSlowClients(t *testing.T) {
	const timeout, idle = 300 * time.Millisecond, 500 * time.Millisecond
	s, _ := newServer(t, 1, 2, 64, func(c *Config) { c.APIKeys = []string{"k"} })
	ts := listen(t, s.Handler(), timeout, idle)
	trickle := func(c net.Conn, stop chan struct{}) {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}

	// A slow-loris body, a byte every 50 ms: 408 at the timeout, whatever the pace.
	c := dial(t, ts)
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\nContent-Length: 1000\r\n\r\n{\"prompt\":")
	stop := make(chan struct{})
	go trickle(c, stop)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	took := time.Since(start)
	body, _ := io.ReadAll(resp.Body)
	close(stop)
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), "did not arrive in time")
	assert.GreaterOrEqual(t, took, timeout-50*time.Millisecond)
	assert.Less(t, took, 5*timeout)
	assert.Eventually(t, func() bool { return s.preparing.Load() == 0 }, 5*time.Second, 5*time.Millisecond, "the slow body's place is given back")
	t.Logf("slow body: 408 after %v", took.Round(time.Millisecond))

	// Without a key the body is never read, but net/http drains it before the next request:
	// that too stops at the timeout.
	c = dial(t, ts)
	start = time.Now()
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n{\"prompt\":")
	stop = make(chan struct{})
	go trickle(c, stop)
	br = bufio.NewReader(c)
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	io.Copy(io.Discard, resp.Body)
	closedAfter(t, br)
	close(stop)
	took = time.Since(start)
	assert.Less(t, took, 5*timeout, "an unauthenticated slow body was held")
	t.Logf("unauthenticated slow body: 401, then closed after %v", took.Round(time.Millisecond))

	// Headers that never end.
	c = dial(t, ts)
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	took = closedAfter(t, c)
	assert.GreaterOrEqual(t, took, timeout-50*time.Millisecond)
	assert.Less(t, took, 5*timeout)
	t.Logf("unfinished headers: closed after %v", took.Round(time.Millisecond))

	// An idle kept-alive connection, after a request it was answered.
	c = dial(t, ts)
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	br = bufio.NewReader(c)
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	assert.Equal(t, 200, resp.StatusCode)
	assert.False(t, resp.Close, "kept alive")
	took = closedAfter(t, br)
	assert.GreaterOrEqual(t, took, idle-100*time.Millisecond)
	assert.Less(t, took, 5*idle)
	t.Logf("idle connection: closed after %v", took.Round(time.Millisecond))
}

// slowStream waits before each flush of a reply, so that a short reply streams for longer than
// the timeout.
type slowStream struct {
	http.ResponseWriter
	wait time.Duration
}

func (w slowStream) Flush() {
	time.Sleep(w.wait)
	w.ResponseWriter.(http.Flusher).Flush()
}

// stalled is a server over s's model whose scheduler does not run: what it queues stays
// there, for the test to take.
func stalled(s *Server, queue int) *Server {
	q := &Server{cfg: s.cfg, dec: s.dec, tok: s.tok, queue: make(chan *job, queue), textBound: s.textBound, bodyBound: s.bodyBound}
	q.metrics.init(s.dec.Slots())
	return q
}

// TestWaitOutlivesTimeout: a request whose reply is long in coming (queued behind others, or a
// long generation) is not cancelled when the timeout for reading it has passed, and its reply,
// whole or streamed, is written then; the place it held is given back once it is queued.
func TestWaitOutlivesTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	s, _ := newServer(t, 1, 2, 64)
	q := stalled(s, 2)
	ts := listen(t, q.Handler(), timeout, timeout)
	for _, streamed := range []bool{false, true} {
		type result struct {
			code int
			body string
		}
		done := make(chan result, 1)
		go func() {
			resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(fmt.Sprintf(`{"prompt":"hi","stream":%v}`, streamed)))
			if !assert.NoError(t, err) {
				done <- result{}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			done <- result{resp.StatusCode, string(b)}
		}()
		var j *job
		select {
		case j = <-q.queue:
		case <-time.After(10 * time.Second):
			t.Fatal("nothing queued")
		}
		assert.Zero(t, q.preparing.Load(), "the place is the queue's now")
		time.Sleep(4 * timeout)
		require.NoError(t, j.ctx.Err(), "the request was cancelled after the timeout, waiting for its reply")
		j.events <- event{text: "late"}
		j.events <- event{done: true, finish: "stop", promptTokens: 1, completionTokens: 1}
		r := <-done
		assert.Equal(t, 200, r.code, r.body)
		assert.Contains(t, r.body, "late")
		if streamed {
			assert.True(t, strings.HasSuffix(r.body, "data: [DONE]\n\n"), r.body)
		}
	}
}

// TestLongStreamOutlivesTimeout: a streamed reply that lasts many times the timeout is not
// cut: each write has its own time.
func TestLongStreamOutlivesTimeout(t *testing.T) {
	const timeout = 150 * time.Millisecond
	s, _ := newServer(t, 1, 2, 128)
	ts := listen(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Handler().ServeHTTP(slowStream{w, 25 * time.Millisecond}, r)
	}), timeout, timeout)
	start := time.Now()
	r, err := stream(t, ts, "/v1/completions", `{"prompt":"func main","max_tokens":40,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`)
	took := time.Since(start)
	require.NoError(t, err)
	assert.True(t, r.done)
	assert.Equal(t, "length", r.finish)
	assert.Equal(t, 40.0, r.usage["completion_tokens"])
	assert.Greater(t, took, 4*timeout)
	t.Logf("a reply of 40 tokens streamed over %v with a timeout of %v", took.Round(time.Millisecond), timeout)
	idle(t, s)
}

// smallSendBuffers gives each connection it accepts a small send buffer, so that a reply soon
// fills it when the client does not read (loopback's would otherwise take megabytes).
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		err = c.(*net.TCPConn).SetWriteBuffer(4096)
	}
	return c, err
}

// TestStalledReader: a client that stops reading a streamed reply is dropped once a write has
// waited the timeout, rather than holding its connection and handler forever.
func TestStalledReader(t *testing.T) {
	const timeout = 200 * time.Millisecond
	var log logBuffer
	// A long model name makes every event long (it is in each chunk): 500 events of 2 KB.
	s, _ := newServer(t, 1, 2, 512, func(c *Config) { c.LogRequests, c.Log, c.ModelName = true, &log, strings.Repeat("m", 2000) })
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Config = NewHTTPServer(s.Handler(), timeout, timeout)
	ts.Listener = smallSendBuffers{ts.Listener}
	ts.Start()
	defer ts.Close()
	// The client's receive buffer is small from the start too.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	body := `{"prompt":"hi","max_tokens":500,"stream":true}`
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// Never read: the server's writes block once the buffers are full.
	require.Eventually(t, func() bool { return log.String() != "" }, 20*time.Second, 10*time.Millisecond, "the handler still writes to a client that does not read")
	assert.Contains(t, log.String(), "the client went away")
	t.Logf("dropped after %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(log.String()))
	idle(t, s)
}
