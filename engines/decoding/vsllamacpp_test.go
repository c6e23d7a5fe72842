//go:build unix

package decoding

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/cputime"
	"github.com/toyml/toy/internal/oracle"
)

// The side-by-side benchmark: toy's Decoder and llama.cpp (internal/oracle, the llama.cpp core
// of the ollama module toy links, over the same ggml) on the same GGUF in one process, their
// tests alternating, reporting toy's throughput over llama.cpp's. It lives in a test so that
// the product binary never links llama.cpp.

// oracleEngine is llama.cpp as a benchEngine.
type oracleEngine struct{ o *oracle.Model }

func (e oracleEngine) Reset() error { return e.o.Reset() }

func (e oracleEngine) Eval(tokens []int32) error {
	_, err := e.o.Eval(tokens)
	return err
}

// vsEnv reads the benchmark's settings: TOY_VS_TYPES (default f32,f16,q8_0,q4_K), TOY_VS_THREADS
// (default 2; a list such as 1,2 runs each), TOY_VS_ROUNDS (default 3), TOY_VS_FA=1 (flash
// attention on both sides; default off on both).
func vsEnv(t *testing.T) (types []ggml.Type, threads []int, rounds int, fa bool) {
	types = []ggml.Type{ggml.F32, ggml.F16, ggml.Q8_0, ggml.Q4_K}
	if s := os.Getenv("TOY_VS_TYPES"); s != "" {
		types = nil
		for _, name := range strings.Split(s, ",") {
			typ, ok := typeNamed(name)
			require.True(t, ok, "TOY_VS_TYPES: unknown type %q", name)
			types = append(types, typ)
		}
	}
	threads = []int{2}
	if s := os.Getenv("TOY_VS_THREADS"); s != "" {
		threads = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			require.NoError(t, err, "TOY_VS_THREADS")
			require.Positive(t, n, "TOY_VS_THREADS")
			threads = append(threads, n)
		}
	}
	rounds = 3
	if s := os.Getenv("TOY_VS_ROUNDS"); s != "" {
		var err error
		rounds, err = strconv.Atoi(s)
		require.NoError(t, err, "TOY_VS_ROUNDS")
		require.Positive(t, rounds, "TOY_VS_ROUNDS")
	}
	return types, threads, rounds, os.Getenv("TOY_VS_FA") == "1"
}

// typeNamed is the weight type ggml names name ("q4_K").
func typeNamed(name string) (ggml.Type, bool) {
	for _, typ := range []ggml.Type{ggml.F32, ggml.F16, ggml.BF16, ggml.Q8_0, ggml.Q4_0, ggml.Q4_1, ggml.Q5_0,
		ggml.Q5_1, ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K} {
		if ggml.TypeName(typ) == name {
			return typ, true
		}
	}
	return 0, false
}

// TestVsLlamaCpp measures prompt processing (128 tokens as one batch) and generation (32 tokens
// one at a time), batch 1, of toy and of llama.cpp on random-weight GGUFs in the SmolLM2-135M
// shape (f32, f16, q8_0, q4_K; an f16 KV cache on both sides), alternating toy and llama.cpp
// test by test and which goes first round by round, and logs each round's toy/llama.cpp ratio
// of tokens per second, of tokens per CPU second and of the median step time (generation: the
// median of the 32 steps, which one disturbed step does not move). Each timed test follows an
// untimed one-token step of the same engine: the first step an engine computes after the other
// one ran takes two to three times a step (docs/PERFORMANCE.md), a cost that falls on whichever
// engine goes second and that neither pays when it runs alone.
// It runs only when TOY_VS_LLAMACPP names a directory to keep the checkpoints in (written once);
// vsEnv lists the other settings.
//
//	TOY_VS_LLAMACPP=/tmp/vs go test ./engines/decoding -run TestVsLlamaCpp -v -timeout 1h
func TestVsLlamaCpp(t *testing.T) {
	dir := os.Getenv("TOY_VS_LLAMACPP")
	if dir == "" {
		t.Skip("set TOY_VS_LLAMACPP=<dir> to run")
	}
	types, threads, rounds, fa := vsEnv(t)
	// One P, as toy generate and toy bench model decode (cmd/toy's oneGoProc): a second one lets
	// Go's scheduler take a core from ggml's workers during a step. TOY_VS_GOMAXPROCS=0 keeps
	// the process's own.
	if os.Getenv("TOY_VS_GOMAXPROCS") != "0" {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	}
	const prompt, gen = 128, 32
	rng := rand.New(rand.NewPCG(16, 16))
	a := transformer.SmolLM2Architecture()
	tokens := func(n int) []int32 { return transformertest.RandomTokens(rng, n, a.Vocab) }
	var table []string
	for _, typ := range types {
		path := filepath.Join(dir, "smollm2-135m-random-"+ggml.TypeName(typ)+"-vocab-none.gguf")
		if _, err := os.Stat(path); err != nil {
			require.NoError(t, transformer.WriteRandomGGUF(path, a, typ, 1))
			transformertest.WithKVs(t, path, transformertest.NoVocab) // llama.cpp needs a tokenizer model to load a file
		}
		for _, th := range threads {
			// Mapped, as the oracle maps it: the engines compare computing the same pages, not
			// loading them (toy's default, reading into huge pages, decodes faster).
			m, err := OpenModel(path, ModelOptions{Threads: th, Mmap: true})
			require.NoError(t, err)
			d, err := NewDecoder(m, DecoderOptions{MaxContext: prompt + gen, Batch: prompt, FlashAttention: fa})
			require.NoError(t, err)
			o, err := oracle.Open(path, oracle.Options{Context: prompt + gen, Threads: th, FlashAttention: fa, KVF16: true})
			require.NoError(t, err)
			engines := [2]benchEngine{decoderEngine{d}, oracleEngine{o}}
			// After its test, each engine's workers sleep instead of polling for a next graph,
			// so that they do not share the cores with the other engine's test.
			pause := [2]func(){m.Backend().PauseWorkers, o.PauseWorkers}
			tests := []struct {
				name string
				n    int
				run  func(benchEngine) ([]time.Duration, error) // each step's wall time
			}{
				{fmt.Sprintf("pp%d", prompt), prompt, func(e benchEngine) ([]time.Duration, error) {
					rate, err := promptRate(e, nil, tokens(prompt))
					return []time.Duration{time.Duration(float64(prompt) / rate * float64(time.Second))}, err
				}},
				{fmt.Sprintf("tg%d", gen), gen, func(e benchEngine) ([]time.Duration, error) { return generateSteps(e, nil, tokens(gen)) }},
			}
			warm := func(e benchEngine) { // one untimed step after the other engine ran
				require.NoError(t, e.Reset())
				require.NoError(t, e.Eval(tokens(1)))
			}
			for i, e := range engines { // warm-up: graphs built, the mapping faulted in
				for _, test := range tests {
					_, err := test.run(e)
					require.NoError(t, err)
				}
				pause[i]()
			}
			for _, test := range tests {
				var rates [2][]float64 // toy, llama.cpp
				var ratios, cpuRatios, medRatios []float64
				for r := 0; r < rounds; r++ {
					var rate, cpuRate [2]float64
					var median [2]time.Duration
					for i := range engines {
						k := (i + r) % 2 // toy first in even rounds, llama.cpp first in odd ones
						warm(engines[k])
						cpu0 := cputime.Process()
						steps, err := test.run(engines[k])
						require.NoError(t, err)
						cpuRate[k] = float64(test.n) / (cputime.Process() - cpu0).Seconds()
						pause[k]()
						var total time.Duration
						for _, d := range steps {
							total += d
						}
						rate[k], median[k] = float64(test.n)/total.Seconds(), medianOf(steps)
					}
					rates[0], rates[1] = append(rates[0], rate[0]), append(rates[1], rate[1])
					ratios, cpuRatios = append(ratios, rate[0]/rate[1]), append(cpuRatios, cpuRate[0]/cpuRate[1])
					medRatios = append(medRatios, median[1].Seconds()/median[0].Seconds())
					t.Logf("%s %s t%d round %d: toy %.1f t/s, llama.cpp %.1f t/s, ratio %.3f; per CPU second %.1f and %.1f, ratio %.3f; median step %.2f and %.2f ms, ratio %.3f",
						ggml.TypeName(typ), test.name, th, r, rate[0], rate[1], rate[0]/rate[1], cpuRate[0], cpuRate[1], cpuRate[0]/cpuRate[1],
						median[0].Seconds()*1e3, median[1].Seconds()*1e3, medRatios[r])
				}
				toy, lc, q, qc, qm := Stat(rates[0]), Stat(rates[1]), Stat(ratios), Stat(cpuRatios), Stat(medRatios)
				table = append(table, fmt.Sprintf("| %s | %d | %s | %.1f ± %.1f | %.1f ± %.1f | %.3f (%.3f–%.3f) | %.3f (%.3f–%.3f) | %.3f (%.3f–%.3f) |",
					ggml.TypeName(typ), th, test.name, toy.Mean, toy.StdDev, lc.Mean, lc.StdDev,
					q.Mean, minOf(ratios), maxOf(ratios), qc.Mean, minOf(cpuRatios), maxOf(cpuRatios),
					qm.Mean, minOf(medRatios), maxOf(medRatios)))
			}
			require.NoError(t, o.Close())
			require.NoError(t, d.Close())
			require.NoError(t, m.Close())
		}
	}
	t.Logf("toy vs llama.cpp (same ggml, same process), flash attention %v, %d rounds; ratios are means over the rounds (min–max):\n"+
		"| weights | threads | test | toy t/s | llama.cpp t/s | toy / llama.cpp | per CPU second | median step |\n| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n%s",
		fa, rounds, strings.Join(table, "\n"))
}

// medianOf is the median of d (the upper one of an even count).
func medianOf(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
