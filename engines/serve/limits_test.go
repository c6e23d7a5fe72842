package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/tokenizer"
)

// TestPromptBounds: a prompt text the server refuses before encoding it (fits) never encodes to
// fewer tokens than a slot's context holds, and one it lets through may: random texts around
// the bound, and the text that comes closest to it (the longest token's piece repeated).
func TestPromptBounds(t *testing.T) {
	s, _ := newServer(t, 1, 2, 64)
	n := s.dec.SlotContext()
	maxTok, every := s.tok.MaxTokenBytes()
	require.True(t, every)
	require.Equal(t, maxTok*(n-1), s.textBound)
	require.Equal(t, 6*s.textBound+bodySlack, s.bodyBound)
	longest := ""
	for id := range s.tok.VocabSize() {
		if p, _ := s.tok.Piece(int32(id), tokenizer.DecodeOptions{}); len(p) > len(longest) {
			longest = p
		}
	}
	rng := rand.New(rand.NewPCG(7, 1))
	words := []string{"func", " main", "()", " {", " return", " nil", " }", "\n", "Hello", ", world!", "é", "\x00", "<|im_start|>", "  "}
	refused := 0
	for i := range 400 {
		var text string
		if i%4 == 0 {
			text = strings.Repeat(longest, s.textBound/len(longest)+rng.IntN(3)-1)
		} else {
			var b strings.Builder
			for b.Len() < s.textBound-40+rng.IntN(80) {
				b.WriteString(words[rng.IntN(len(words))])
			}
			text = b.String()
		}
		ids := s.tok.Encode(text, tokenizer.EncodeOptions{ParseSpecial: true})
		if e := s.fits(text, "messages"); e != nil {
			refused++
			assert.GreaterOrEqual(t, len(ids), n, "refused a text of %d bytes that encodes to %d tokens", len(text), len(ids))
			assert.Equal(t, "context_length_exceeded", e.Code)
		}
	}
	t.Logf("%d of 400 texts around the bound of %d bytes (%d a token × %d positions) refused unencoded", refused, s.textBound, maxTok, n-1)
	assert.Positive(t, refused)
}

// TestBigBodies sends bodies far beyond the context: each is refused at once (413 when the
// body is beyond the body's bound, read or not; 400 context_length_exceeded when its prompt is
// beyond the text's), six 7 MB bodies at once allocate a few MB in all where each was read,
// decoded and tokenized whole, and a prompt within the bound, however escaped, is not refused
// for its size.
func TestBigBodies(t *testing.T) {
	s, ts := newServer(t, 1, 8, 64)
	huge := []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("func main() { return nil } ", 7<<20/27) + `"}]}`)
	do := func(body io.Reader, chunked bool) (int, string, time.Duration) {
		if chunked {
			body = io.MultiReader(body) // no length: sent chunked, read until the bound
		}
		start := time.Now()
		resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", body)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b), time.Since(start)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			code, body, took := do(bytes.NewReader(huge), i%2 == 1)
			assert.Equal(t, http.StatusRequestEntityTooLarge, code, body)
			assert.Contains(t, body, fmt.Sprintf("larger than %d bytes", s.bodyBound))
			assert.Less(t, took, 5*time.Second)
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("six %.1f MB bodies refused; %.1f MB allocated in all (body bound %d bytes)", float64(len(huge))/1e6, float64(allocated)/1e6, s.bodyBound)
	assert.Less(t, allocated, uint64(48<<20), "the bodies were not read whole")

	// Within the body's bound, beyond the text's: 400 before encoding.
	long, err := json.Marshal(map[string]any{"prompt": strings.Repeat("x", s.textBound+1)})
	require.NoError(t, err)
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", bytes.NewReader(long))
	require.NoError(t, err)
	var e struct{ Error apiError }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	resp.Body.Close()
	assert.Equal(t, 400, resp.StatusCode)
	assert.Equal(t, "context_length_exceeded", e.Error.Code)
	assert.Equal(t, "prompt", *e.Error.Param)
	assert.Contains(t, e.Error.Message, "so at least")

	// A prompt of the text's bound, every byte of it escaped (\u0001, six bytes), with stop
	// strings and a logit_bias besides, is within the body's bound: refused for its tokens,
	// not its size.
	escaped := `{"prompt":"` + strings.Repeat(`\u0001`, s.textBound) + `","stop":["a","b"],"logit_bias":{"1":-1},"max_tokens":1}`
	require.LessOrEqual(t, len(escaped), s.bodyBound)
	for _, chunked := range []bool{false, true} {
		code, body, _ := do(strings.NewReader(escaped), chunked)
		assert.NotEqual(t, http.StatusRequestEntityTooLarge, code, body)
	}
	code, out := post(t, ts, "/v1/completions", `{"prompt":"hi","max_tokens":2}`)
	assert.Equal(t, 200, code, out)
	idle(t, s)
	assert.Zero(t, s.preparing.Load())
}

// TestBurstBeyondQueue: requests whose bodies are still arriving hold places as queued ones
// do, so that with the slots and the queue taken by them a burst is refused (429) before any
// of its bodies is read; once the bodies arrive, the requests are answered and the places
// given back.
func TestBurstBeyondQueue(t *testing.T) {
	s, ts := newServer(t, 1, 2, 64) // 3 places: 1 slot, 2 queued
	type result struct {
		code int
		body string
	}
	var writers []*io.PipeWriter
	results := make(chan result, 3)
	for range 3 {
		pr, pw := io.Pipe()
		writers = append(writers, pw)
		go func() {
			resp, err := http.Post(ts.URL+"/v1/completions", "application/json", pr)
			if !assert.NoError(t, err) {
				results <- result{}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- result{resp.StatusCode, string(b)}
		}()
		_, err := io.WriteString(pw, `{"prompt":"func main`)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return s.preparing.Load() == 3 }, 10*time.Second, 5*time.Millisecond)

	burst := []byte(`{"prompt":"` + strings.Repeat("Hello, world! ", 40000) + `"}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			resp, err := http.Post(ts.URL+"/v1/completions", "application/json", bytes.NewReader(burst))
			if !assert.NoError(t, err) {
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s", b)
			assert.Equal(t, "1", resp.Header.Get("Retry-After"))
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	t.Logf("16 bodies of %d KB refused with 429: %.1f MB allocated in all", len(burst)>>10, float64(after.TotalAlloc-before.TotalAlloc)/1e6)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "the burst's bodies were not read")
	assert.Equal(t, int64(3), s.preparing.Load())

	for _, pw := range writers {
		_, err := io.WriteString(pw, `","max_tokens":3,"temperature":0}`)
		require.NoError(t, err)
		require.NoError(t, pw.Close())
	}
	for range 3 {
		r := <-results
		assert.Equal(t, 200, r.code, r.body)
	}
	idle(t, s)
	assert.Zero(t, s.preparing.Load())
	assert.Regexp(t, `toy_requests_total\{endpoint="completions",code="429"\} 16`, metricsText(t, ts))
}
