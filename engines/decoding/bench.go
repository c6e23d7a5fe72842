package decoding

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/toyml/toy/ggml"
)

// BenchOptions tune Bench.
type BenchOptions struct {
	// Decoder configures the decoder measured (its Threads, Batch and MaxContext are set by
	// Bench: the given threads, one batch for the whole prompt, prompt+generation positions).
	Decoder DecoderOptions
	// Reps is the number of timed repetitions of each test (default 5), after one warm-up.
	Reps int
	// Mmap maps the weights instead of reading them (ModelOptions.Mmap).
	Mmap bool
	// Seed seeds the random tokens.
	Seed uint64
	// Depth is how many random tokens the cache holds before each test (llama-bench's -d):
	// the prompt is processed, and the tokens generated, after them. 0: an empty cache.
	Depth int
	// Prompt, when set, is the speculative bench's prompt (BenchSpeculative), instead of
	// random tokens.
	Prompt []int32
	// Gate, when set, runs on each model the bench loads (the target, a draft model) before
	// its decoders are made, with their options: the command's kernel gate, which may refuse
	// the model and gives it the kernels the table resolved (GGUFModel.UseKernels).
	Gate func(m *GGUFModel, o DecoderOptions) error
}

// RunGate runs o.Gate, when set, on m for decoders of options do.
func (o BenchOptions) RunGate(m *GGUFModel, do DecoderOptions) error {
	if o.Gate == nil {
		return nil
	}
	return o.Gate(m, do)
}

// BenchStat is one test's throughput over the repetitions.
type BenchStat struct {
	Mean, StdDev float64   // tokens per second
	Samples      []float64 // tokens per second of each repetition
}

func (s BenchStat) String() string { return fmt.Sprintf("%.2f ± %.2f t/s", s.Mean, s.StdDev) }

func Stat(samples []float64) BenchStat {
	s := BenchStat{Samples: samples}
	for _, v := range samples {
		s.Mean += v
	}
	s.Mean /= float64(len(samples))
	if len(samples) > 1 {
		for _, v := range samples {
			s.StdDev += (v - s.Mean) * (v - s.Mean)
		}
		s.StdDev = math.Sqrt(s.StdDev / float64(len(samples)-1))
	}
	return s
}

// BenchResult is what Bench measured, as llama-bench reports it.
type BenchResult struct {
	Path                     string
	Arch                     string
	WeightType               ggml.Type
	Params, Bytes            int64
	Mapped                   bool
	Threads                  int
	KVType                   KVCacheType
	FlashAttention           bool
	PromptTokens, GenTokens  int
	Depth                    int // tokens in the cache before each test
	PP, TG                   BenchStat
	LoadTime, FirstGraphTime time.Duration
	// MatrixBytes is the weights each generated token multiplies (MatrixBytesPerToken),
	// KVBytes the mean key/value cache each reads at the test's depth (KVBytesRead).
	MatrixBytes int64
	KVBytes     float64
}

// GenGBps is the memory the generation test streamed per second, in 10⁹ bytes: (MatrixBytes
// + KVBytes) × its mean tokens per second.
func (r BenchResult) GenGBps() float64 {
	return (float64(r.MatrixBytes) + r.KVBytes) * r.TG.Mean / 1e9
}

func (r BenchResult) String() string {
	fa := 0
	if r.FlashAttention {
		fa = 1
	}
	at := ""
	if r.Depth > 0 {
		at = fmt.Sprintf(" @ d%d", r.Depth) // llama-bench's name for a test after a filled cache
	}
	var tests []string // as llama-bench, only the tests of some tokens
	if r.PromptTokens > 0 {
		tests = append(tests, fmt.Sprintf("pp%d%s %s", r.PromptTokens, at, r.PP))
	}
	if r.GenTokens > 0 {
		tests = append(tests, fmt.Sprintf("tg%d%s %s", r.GenTokens, at, r.TG))
	}
	return fmt.Sprintf("%s %s %.1fM params %.1f MiB (mapped %v), %d threads, kv %s, fa %d: %s",
		r.Arch, ggml.TypeName(r.WeightType), float64(r.Params)/1e6, float64(r.Bytes)/(1<<20), r.Mapped, r.Threads,
		r.KVType, fa, strings.Join(tests, ", "))
}

// Bench measures the checkpoint at path as llama-bench does: pp is the throughput of
// processing promptTokens random tokens as one batch from an empty cache, tg that of
// generating genTokens tokens one at a time from an empty cache (after opts.Depth random
// tokens, untimed, where that is set); each is repeated opts.Reps times after a warm-up, and
// the means are returned (BenchStats has the rest).
func Bench(path string, promptTokens, genTokens, threads int, opts BenchOptions) (ppTokensPerS, tgTokensPerS float64, err error) {
	r, err := BenchStats(path, promptTokens, genTokens, threads, opts)
	return r.PP.Mean, r.TG.Mean, err
}

// BenchPositions is how many context positions a bench of promptTokens and genTokens after
// depth tokens (BenchOptions.Depth) needs: the depth, then the longer of its two tests.
func BenchPositions(promptTokens, genTokens, depth int) int {
	return depth + max(promptTokens, genTokens)
}

// BenchStats is Bench with every statistic: mean ± standard deviation of each test.
func BenchStats(path string, promptTokens, genTokens, threads int, opts BenchOptions) (BenchResult, error) {
	if promptTokens < 0 || genTokens < 0 || promptTokens+genTokens == 0 {
		return BenchResult{}, fmt.Errorf("bench of %d prompt and %d generated tokens", promptTokens, genTokens)
	}
	if opts.Depth < 0 {
		return BenchResult{}, fmt.Errorf("bench at a depth of %d tokens", opts.Depth)
	}
	if threads <= 0 {
		return BenchResult{}, fmt.Errorf("bench with %d threads", threads)
	}
	if opts.Reps == 0 {
		opts.Reps = 5
	}
	if opts.Reps < 1 {
		return BenchResult{}, fmt.Errorf("bench: %d repetitions", opts.Reps)
	}
	start := time.Now()
	m, err := OpenModel(path, ModelOptions{Threads: threads, Mmap: opts.Mmap})
	if err != nil {
		return BenchResult{}, err
	}
	defer m.Close()
	r := BenchResult{Path: path, Arch: m.Arch.Name, WeightType: m.WeightType(), Params: m.Params(), Bytes: m.WeightBytes(),
		Mapped: m.Mapped(), Threads: threads, KVType: opts.Decoder.KVType, FlashAttention: opts.Decoder.FlashAttention,
		PromptTokens: promptTokens, GenTokens: genTokens, Depth: opts.Depth, LoadTime: time.Since(start),
		MatrixBytes: m.MatrixBytesPerToken(), KVBytes: m.KVBytesRead(opts.Decoder.KVType, opts.Depth, genTokens)}
	do := opts.Decoder
	do.Threads = 0                                        // the model's backend already has them
	do.Batch = max(promptTokens, min(opts.Depth, 512), 1) // the depth goes in batches of that
	do.MaxContext = max(BenchPositions(promptTokens, genTokens, opts.Depth), 1)
	if do.MaxContext > m.Arch.Context {
		return r, fmt.Errorf("bench: a depth of %d and %d tokens do not fit %s's context of %d", opts.Depth, max(promptTokens, genTokens), path, m.Arch.Context)
	}
	if err := opts.RunGate(m, do); err != nil {
		return r, err
	}
	d, err := NewDecoder(m, do)
	if err != nil {
		return r, err
	}
	defer d.Close()
	rng := rand.New(rand.NewPCG(opts.Seed, 0x62656e6368))
	vocab := m.Arch.Vocab
	tokens := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(rng.IntN(vocab))
		}
		return out
	}
	eng := decoderEngine{d}
	pp := func() (float64, error) { return promptRate(eng, tokens(opts.Depth), tokens(promptTokens)) }
	tg := func() (float64, error) { return generateRate(eng, tokens(opts.Depth), tokens(genTokens)) }
	run := func(f func() (float64, error)) (BenchStat, error) {
		t0 := time.Now()
		return repeated(opts.Reps, f, func() { // the warm-up built the graphs, faulted the mapping in
			if r.FirstGraphTime == 0 {
				r.FirstGraphTime = time.Since(t0)
			}
		})
	}
	if promptTokens > 0 {
		if r.PP, err = run(pp); err != nil {
			return r, err
		}
	}
	if genTokens > 0 {
		if r.TG, err = run(tg); err != nil {
			return r, err
		}
	}
	return r, nil
}

// benchEngine is what the prompt and generation tests drive: toy's Decoder, or (in the
// side-by-side benchmark) llama.cpp.
type benchEngine interface {
	// Reset empties the cache.
	Reset() error
	// Eval appends tokens at the next positions, as one batch, computing the logits of the last.
	Eval(tokens []int32) error
}

// decoderEngine is a Decoder as a benchEngine.
type decoderEngine struct{ d *Decoder }

func (e decoderEngine) Reset() error { e.d.Reset(); return nil }

func (e decoderEngine) Eval(tokens []int32) error {
	_, err := e.d.Prompt(tokens)
	return err
}

// promptRate is llama-bench's pp test: after depth (untimed; none: from an empty cache),
// tokens as one batch; tokens/s.
func promptRate(e benchEngine, depth, tokens []int32) (float64, error) {
	if err := fill(e, depth); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := e.Eval(tokens); err != nil {
		return 0, err
	}
	return float64(len(tokens)) / time.Since(t0).Seconds(), nil
}

// generateRate is llama-bench's tg test: after depth (untimed), tokens one at a time;
// tokens/s.
func generateRate(e benchEngine, depth, tokens []int32) (float64, error) {
	steps, err := generateSteps(e, depth, tokens)
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, d := range steps {
		total += d
	}
	return float64(len(tokens)) / total.Seconds(), nil
}

// fill empties e's cache and evaluates depth (none: the cache stays empty).
func fill(e benchEngine, depth []int32) error {
	if err := e.Reset(); err != nil {
		return err
	}
	if len(depth) == 0 {
		return nil
	}
	return e.Eval(depth)
}

// generateSteps runs generateRate's test and returns the wall time of each step.
func generateSteps(e benchEngine, depth, tokens []int32) ([]time.Duration, error) {
	if err := fill(e, depth); err != nil {
		return nil, err
	}
	steps := make([]time.Duration, len(tokens))
	for i := range tokens {
		t0 := time.Now()
		if err := e.Eval(tokens[i : i+1]); err != nil {
			return nil, err
		}
		steps[i] = time.Since(t0)
	}
	return steps, nil
}

// repeated runs f once to warm up, then warmed, then f reps times, and returns the statistics of
// the reps' results.
func repeated(reps int, f func() (float64, error), warmed func()) (BenchStat, error) {
	if _, err := f(); err != nil {
		return BenchStat{}, err
	}
	warmed()
	var samples []float64
	for i := 0; i < reps; i++ {
		v, err := f()
		if err != nil {
			return BenchStat{}, err
		}
		samples = append(samples, v)
	}
	return Stat(samples), nil
}
