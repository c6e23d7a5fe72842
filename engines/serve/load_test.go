package serve

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
)

// TestServeUnderLoad: with a busy process on every core and a busy goroutine beside the
// server, as toy serve runs (one Go P, a decoder of 2 threads), concurrent requests all finish,
// within a bound far above their time alone, with the replies they get alone. (A decoder's
// threads meet at a barrier every node: a thread that the competition keeps off its core slows
// the step, and must never stall it.)
func TestServeUnderLoad(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	m, err := decoding.OpenModel(modelPath, decoding.ModelOptions{Threads: 2})
	require.NoError(t, err)
	defer m.Close()
	tok, err := tokenizer.FromGGUF(func(k string) (any, bool) { v, ok := m.Meta[k]; return v, ok })
	require.NoError(t, err)
	dec, err := decoding.NewBatchDecoder(m, decoding.BatchDecoderOptions{Slots: 2, SlotContext: 128, Batch: 64, Threads: 2})
	require.NoError(t, err)
	defer dec.Close()
	tmpl, err := sample.TemplateByName("chatml")
	require.NoError(t, err)
	s, err := New(Config{Model: m, Decoder: dec, Tokenizer: tok, ModelName: "tiny", Template: &tmpl, Defaults: sample.DefaultParams(), Queue: 8})
	require.NoError(t, err)
	defer s.Close()
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	var ps []string
	for _, p := range []string{"func main", "Hello, world", "if err != nil"} {
		ps = append(ps, fmt.Sprintf(`{"prompt":%q,"max_tokens":6,"temperature":0}`, p))
	}
	run := func() ([]string, time.Duration) {
		out := make([]string, len(ps))
		start := time.Now()
		var wg sync.WaitGroup
		for i, p := range ps {
			wg.Go(func() { out[i] = completionText(t, ts, p) })
		}
		wg.Wait()
		return out, time.Since(start)
	}
	alone, quiet := run()
	bounded := func(what string) time.Duration {
		done := make(chan struct{})
		var got []string
		var took time.Duration
		go func() {
			defer close(done)
			got, took = run()
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("%d requests %s did not finish in 2 minutes", len(ps), what)
		}
		assert.Equal(t, alone, got, "the replies %s", what)
		return took
	}

	// The competition: a busy process per core, and a busy goroutine on the server's one P.
	for range runtime.NumCPU() {
		busy := exec.Command("sh", "-c", "while :; do :; done")
		require.NoError(t, busy.Start())
		defer func() {
			busy.Process.Kill()
			busy.Wait()
		}()
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var spins atomic.Int64
	go func() {
		for ctx.Err() == nil {
			spins.Add(1)
		}
	}()
	loaded := bounded("beside busy processes and a busy goroutine")
	assert.Positive(t, spins.Load(), "the busy goroutine ran")
	t.Logf("%d concurrent requests of 6 tokens: %v alone, %v beside %d busy processes and a busy goroutine (%.1fx)",
		len(ps), quiet.Round(time.Millisecond), loaded.Round(time.Millisecond), runtime.NumCPU(), loaded.Seconds()/quiet.Seconds())
	idle(t, s)
}
