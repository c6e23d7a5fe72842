package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/generated/config"
)

// runBenchServe is `toy bench serve`: the server's aggregate generation throughput with one
// streaming client and with -streams of them at once, over HTTP on loopback, and their time to
// first token.
func runBenchServe(args []string, stdout, stderr io.Writer) (err error) {
	defer cli.OneGoProc()() // as toy serve runs
	fs := flag.NewFlagSet("bench serve", flag.ContinueOnError)
	var f cli.ServeFlags
	f.Register(fs)
	url := fs.String("url", "", "bench the server at this URL (http://host:port) instead of starting one in-process; the model flags are then unused")
	random := fs.String("random", "", "instead of -m, serve random weights of a training preset's shape ("+strings.Join(config.LlamaPresetNames(), ", ")+") with a synthetic tokenizer of its vocabulary")
	randomType := fs.String("random-type", "f16", "weight type of the -random model's matrices (f32, f16, bf16, q8_0, q4_0, q4_K, …)")
	streams := fs.Int("streams", 8, "concurrent streaming clients of the second measurement (the first has one)")
	requests := fs.Int("requests", 4, "requests each client sends, one after the other")
	maxTokens := fs.Int("n", 64, "max_tokens of each request (greedy; a random model has no end of text, so it generates them all)")
	temp := fs.Float64("temp", 0, "temperature of the requests (0: greedy)")
	prompt := fs.String("prompt", "Once upon a time, in a land far away, there lived a", "the prompt of each request (a client's number and the request's are appended)")
	profile := fs.String("profile", "", "write Go profiles of the measured runs (server and clients, one process) to PREFIX.cpu.pprof, PREFIX.block.pprof and PREFIX.mutex.pprof (go tool pprof reads them)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: toy bench serve -random smollm2-135m [-streams 8] [-t 2] [flags]
       toy bench serve -m MODEL [flags]
       toy bench serve -url http://127.0.0.1:8080 [-streams 8] [flags]

Starts toy serve in-process (with -parallel = -streams unless given) on a loopback port, or
uses the server at -url, and drives it with streaming clients over HTTP: first one client,
then -streams at once, each sending -requests streamed completions of -n tokens one after
the other, after one warm-up request. For each it reports the aggregate generation
throughput (completion tokens over the wall time of all the requests), its ratio to one
client's, each request's generation speed after its first token, and the time to first
token (p50, p99) measured by the client. See docs/PERFORMANCE.md.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	set := cli.SetFlags(fs)
	switch {
	case *streams < 1:
		return cli.Usagef("-streams %d: want at least 1", *streams)
	case *requests < 1:
		return cli.Usagef("-requests %d: want at least 1", *requests)
	case *maxTokens < 1:
		return cli.Usagef("-n %d: want at least 1", *maxTokens)
	case *temp < 0:
		return cli.Usagef("-temp %g: want 0 or more", *temp)
	case *url != "" && (f.Model != "" || *random != ""):
		return cli.Usagef("-url benches a running server: give neither -m nor -random")
	case f.Model != "" && *random != "":
		return cli.Usagef("-m and -random exclude each other")
	case *url == "" && f.Model == "" && *random == "":
		return cli.Usagef("give -m MODEL, -random PRESET or -url URL")
	}
	if !set["parallel"] && !set["np"] {
		f.Parallel = *streams
	}
	base := strings.TrimSuffix(*url, "/")
	if base == "" {
		if *random != "" {
			dir, err := os.MkdirTemp("", "toy-bench-serve-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			f.Model = filepath.Join(dir, *random+".gguf")
			if err = writeRandomServable(f.Model, *random, *randomType, stderr); err != nil {
				return err
			}
		}
		if err := f.Check(); err != nil {
			return err
		}
		sm, err := f.Start(stderr)
		if err != nil {
			return err
		}
		defer sm.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		hs := &http.Server{Handler: sm.Server.Handler(), ReadHeaderTimeout: 30 * time.Second}
		go hs.Serve(ln)
		defer hs.Close()
		base = "http://" + ln.Addr().String()
		fmt.Fprintf(stderr, "toy bench: serving %s on %s, %d threads\n", sm.Ready, base, f.Threads)
	}
	c := &benchClient{base: base, prompt: *prompt, maxTokens: *maxTokens, temp: *temp,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *streams}}}
	fmt.Fprintf(stderr, "toy bench: warm-up request …\n")
	if _, err := c.complete(context.Background(), "warm-up"); err != nil {
		return err
	}
	counts := []int{1}
	if *streams > 1 {
		counts = append(counts, *streams)
	}
	if *profile != "" {
		stop, err := startProfiles(*profile)
		if err != nil {
			return err
		}
		defer func() {
			if perr := stop(); err == nil {
				err = perr
			}
		}()
	}
	var rows []benchServeRow
	for _, n := range counts {
		fmt.Fprintf(stderr, "toy bench: %d client(s) × %d requests of %d tokens …\n", n, *requests, *maxTokens)
		r, err := c.run(n, *requests)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	writeBenchServe(stdout, rows, *maxTokens)
	if f.Draft != "" || f.DFlash {
		writeAcceptance(stdout, c, base)
	}
	return nil
}

// writeAcceptance writes the server's drafted and accepted tokens (its /metrics' totals, the
// warm-up's included), when it reports them.
func writeAcceptance(w io.Writer, c *benchClient, base string) {
	resp, err := c.http.Get(base + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		return
	}
	total := func(name string) (n int64, ok bool) {
		for _, l := range strings.Split(string(page), "\n") {
			if v, found := strings.CutPrefix(l, name+" "); found {
				_, err := fmt.Sscan(v, &n)
				return n, err == nil
			}
		}
		return 0, false
	}
	proposed, ok1 := total("toy_draft_proposed_tokens_total")
	accepted, ok2 := total("toy_draft_accepted_tokens_total")
	if ok1 && ok2 && proposed > 0 {
		fmt.Fprintf(w, "\nthe drafter proposed %d tokens, the target accepted %d (%.0f %%)\n", proposed, accepted, 100*float64(accepted)/float64(proposed))
	}
}

// startProfiles starts Go's CPU profile into prefix.cpu.pprof and records blocking and mutex
// contention; stop writes prefix.block.pprof and prefix.mutex.pprof and ends them.
func startProfiles(prefix string) (stop func() error, err error) {
	cpu, err := os.Create(prefix + ".cpu.pprof")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		return nil, err
	}
	runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	runtime.SetMutexProfileFraction(1)
	return func() error {
		pprof.StopCPUProfile()
		runtime.SetBlockProfileRate(0)
		runtime.SetMutexProfileFraction(0)
		err := cpu.Close()
		for _, name := range []string{"block", "mutex"} {
			if werr := writeProfile(name, prefix+"."+name+".pprof"); err == nil {
				err = werr
			}
		}
		return err
	}, nil
}

// writeProfile writes the named runtime profile to path.
func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeRandomServable writes random weights of preset's shape with a synthetic tokenizer of its
// vocabulary to path.
func writeRandomServable(path, preset, typeName string, stderr io.Writer) error {
	return writeRandom(path, preset, typeName, true, stderr)
}

// benchClient sends streamed completions to a server.
type benchClient struct {
	base, prompt string
	maxTokens    int
	temp         float64
	http         *http.Client
}

// completion is what one streamed request gave, as its client saw it.
type completion struct {
	tokens            int
	start, first, end time.Time // sent, first chunk, last byte
}

// complete sends one streamed completion of the prompt with suffix and reads it to the end.
func (c *benchClient) complete(ctx context.Context, suffix string) (completion, error) {
	body, _ := json.Marshal(map[string]any{"prompt": c.prompt + " " + suffix, "max_tokens": c.maxTokens, "temperature": c.temp,
		"stream": true, "stream_options": map[string]any{"include_usage": true}})
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return completion{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	r := completion{start: time.Now()}
	resp, err := c.http.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return r, fmt.Errorf("%s/v1/completions: %s: %s", c.base, resp.Status, bytes.TrimSpace(b))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		if r.first.IsZero() {
			r.first = time.Now()
		}
		var chunk struct {
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return r, fmt.Errorf("%s/v1/completions: a chunk that is not JSON: %q", c.base, data)
		}
		if chunk.Error != nil {
			return r, fmt.Errorf("%s/v1/completions: %s", c.base, chunk.Error.Message)
		}
		if chunk.Usage != nil {
			r.tokens = chunk.Usage.CompletionTokens
		}
	}
	r.end = time.Now()
	if err := sc.Err(); err != nil {
		return r, err
	}
	if !done || r.tokens == 0 {
		return r, fmt.Errorf("%s/v1/completions: the stream ended without [DONE] and usage", c.base)
	}
	return r, nil
}

// benchServeRow is one measurement: clients at once, each sending requests one after the other.
type benchServeRow struct {
	clients, requests, tokens int
	wall                      time.Duration
	ttft                      []time.Duration // sorted
	decode                    float64         // mean over requests of (tokens-1)/(end-first)
}

func (r benchServeRow) tokensPerSecond() float64 { return float64(r.tokens) / r.wall.Seconds() }

// run has clients send requests each and measures them.
func (c *benchClient) run(clients, requests int) (benchServeRow, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var all []completion
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range requests {
				r, err := c.complete(ctx, fmt.Sprintf("(client %d, request %d)", i, j))
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				if err == nil {
					all = append(all, r)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	row := benchServeRow{clients: clients, requests: len(all), wall: time.Since(start)}
	if firstErr != nil {
		return row, firstErr
	}
	for _, r := range all {
		row.tokens += r.tokens
		row.ttft = append(row.ttft, r.first.Sub(r.start))
		if d := r.end.Sub(r.first).Seconds(); r.tokens > 1 && d > 0 {
			row.decode += float64(r.tokens-1) / d / float64(len(all))
		}
	}
	slices.Sort(row.ttft)
	return row, nil
}

// percentile is the p-th percentile (nearest rank) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func writeBenchServe(w io.Writer, rows []benchServeRow, maxTokens int) {
	fmt.Fprintf(w, "streamed completions of %d tokens over HTTP on loopback\n\n", maxTokens)
	fmt.Fprintln(w, "| clients | requests | tokens | seconds | tokens/s | × one client | t/s per request after its first token | TTFT p50 ms | TTFT p99 ms |")
	fmt.Fprintln(w, "| ------: | -------: | -----: | ------: | -------: | -----------: | ------------------------------------: | ----------: | ----------: |")
	one := rows[0].tokensPerSecond()
	for _, r := range rows {
		fmt.Fprintf(w, "| %7d | %8d | %6d | %7.2f | %8.1f | %12.2f | %37.1f | %11.0f | %11.0f |\n", r.clients, r.requests, r.tokens, r.wall.Seconds(),
			r.tokensPerSecond(), r.tokensPerSecond()/one, r.decode, ms(percentile(r.ttft, 50)), ms(percentile(r.ttft, 99)))
	}
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }
