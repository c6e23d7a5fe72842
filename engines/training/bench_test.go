package training

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/cputime"
)

// BenchmarkTrainStep times one training step (forward, backward, AdamW) of the preset named by
// TOY_BENCH_PRESET (default "demo") at context TOY_BENCH_T (default the preset's, capped at
// 512) and batch 1 on 2 threads, reporting tokens/s and GFLOP/s (6·params·tokens per step).
func BenchmarkTrainStep(b *testing.B) {
	name := os.Getenv("TOY_BENCH_PRESET")
	if name == "" {
		name = "demo"
	}
	c, err := config.LlamaPreset(name)
	if err != nil {
		b.Fatal(err)
	}
	T := min(c.Context, 512)
	be, err := ggml.NewCPUBackend(2)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	m, err := New(c, be)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if err := m.Init(); err != nil {
		b.Fatal(err)
	}
	tr, err := NewTrainer(m, T, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	seqs := randomSeqs(rand.New(rand.NewPCG(1, 2)), 1, T, c.Vocab)
	d, nd := adamParams(0)
	if _, err := tr.Step(seqs, d, nd); err != nil { // warm-up
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tr.Step(seqs, d, nd); err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(T)/sec, "tokens/s")
	b.ReportMetric(6*float64(m.Params())*float64(T)/sec/1e9, "GFLOP/s")
	b.ReportMetric(float64(tr.ComputeBytes())/(1<<20), "compute-MiB")
}

// TestBenchSmolLM2 measures Bench on SmolLM2-135M-shaped checkpoints with random weights (f32,
// f16, q8_0) on 2 threads, as llama-bench's pp128/tg128. It runs only when TOY_BENCH_SMOLLM2
// names a directory to keep the checkpoints in (they take a while to write).
func TestBenchSmolLM2(t *testing.T) {
	dir := os.Getenv("TOY_BENCH_SMOLLM2")
	if dir == "" {
		t.Skip("set TOY_BENCH_SMOLLM2=<dir> to run")
	}
	types := []ggml.Type{ggml.F32, ggml.F16, ggml.Q8_0}
	if s := os.Getenv("TOY_BENCH_TYPES"); s != "" {
		types = nil
		for _, name := range strings.Split(s, ",") {
			for _, typ := range []ggml.Type{ggml.F32, ggml.F16, ggml.Q8_0, ggml.Q4_0, ggml.Q4_K} {
				if ggml.TypeName(typ) == name {
					types = append(types, typ)
				}
			}
		}
	}
	fa := os.Getenv("TOY_BENCH_FA") == "1"
	for _, typ := range types {
		path := filepath.Join(dir, "smollm2-135m-random-"+ggml.TypeName(typ)+".gguf")
		if _, err := os.Stat(path); err != nil {
			if err := transformer.WriteRandomGGUF(path, transformer.SmolLM2Architecture(), typ, 1); err != nil {
				t.Fatal(err)
			}
		}
		r, err := decoding.BenchStats(path, 128, 128, 2, decoding.BenchOptions{Reps: 3, Decoder: decoding.DecoderOptions{FlashAttention: fa}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v (load %v, warm-up %v)", r, r.LoadTime, r.FirstGraphTime)
	}
}

// BenchmarkBatchDecode's flags.
var (
	batchBenchThreads = flag.Int("batch.t", 2, "BenchmarkBatchDecode: CPU threads (1 compares step costs on a busy machine)")
	batchBenchProcs   = flag.Int("batch.procs", 1, "BenchmarkBatchDecode: Go Ps (GOMAXPROCS) while it decodes; 1 as toy serve and toy generate decode")
	batchBenchStreams = flag.String("batch.streams", "1,4,8", "BenchmarkBatchDecode: comma-separated numbers of sequences")
	batchBenchGGML    = flag.Bool("batch.ggml", false, "BenchmarkBatchDecode: compute with ggml's kernels, not toy's own for a few columns and one query (ModelOptions.GGMLKernels)")
	batchBenchFlash   = flag.Bool("batch.fa", false, "BenchmarkBatchDecode: flash attention's cache layout, values untransposed (BatchDecoderOptions.FlashAttention)")
	batchBenchPrompt  = flag.Int("batch.prompt", 16, "BenchmarkBatchDecode: prompt tokens of each sequence (a long context: 1000)")
	batchBenchQ8      = flag.Bool("batch.q8", false, "BenchmarkBatchDecode: a q8_0 key/value cache (with -batch.fa)")
)

// BenchmarkBatchDecode measures the aggregate generation throughput of the BatchDecoder with
// 1, 4 and 8 concurrent sequences on a random f16 model in the SmolLM2-135M shape, -batch.t threads (2):
// each iteration is one step that appends one token to every sequence (after a prompt of
// -batch.prompt tokens each, 16 by default, in a slot of that and 256 more positions), so
// tokens/s counts every sequence's token. What `toy serve` batches. It decodes with one Go P
// (-batch.procs), as toy serve does: with two, the Go runtime's threads took a core from
// ggml's worker thousands of times a second and an 8-sequence step ran 5-15 % longer
// (docs/PERFORMANCE.md).
func BenchmarkBatchDecode(b *testing.B) {
	if *batchBenchProcs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(*batchBenchProcs))
	}
	path := filepath.Join(b.TempDir(), "smollm2-f16.gguf")
	if err := transformer.WriteRandomGGUF(path, transformer.SmolLM2Architecture(), ggml.F16, 1); err != nil {
		b.Fatal(err)
	}
	be, err := ggml.NewCPUBackend(*batchBenchThreads)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	m, err := decoding.OpenModel(path, decoding.ModelOptions{Backend: be, GGMLKernels: *batchBenchGGML})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	for _, f := range strings.Split(*batchBenchStreams, ",") {
		streams, err := strconv.Atoi(f)
		if err != nil || streams < 1 {
			b.Fatalf("-batch.streams %q: want positive numbers", *batchBenchStreams)
		}
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			prompt := max(*batchBenchPrompt, 2)
			kv := decoding.KVF16
			if *batchBenchQ8 {
				kv = decoding.KVQ8_0
			}
			d, err := decoding.NewBatchDecoder(m, decoding.BatchDecoderOptions{Slots: streams, SlotContext: prompt + 256, Batch: max(prompt, streams), FlashAttention: *batchBenchFlash, KVType: kv})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			rng := rand.New(rand.NewPCG(3, 4))
			in := make([]decoding.BatchInput, streams)
			for s := range in {
				in[s].Slot = s
			}
			fill := func() { // each slot's prompt, one slot a step
				for s := range in {
					d.Release(s)
					if _, err := d.Step([]decoding.BatchInput{{Slot: s, Tokens: randomSeqs(rng, 1, prompt-1, m.Arch.Vocab)[0]}}); err != nil {
						b.Fatal(err)
					}
				}
			}
			fill()
			step := func() {
				if d.Pos(0)+1 > d.SlotContext() {
					b.StopTimer()
					fill()
					b.StartTimer()
				}
				for s := range in {
					in[s].Tokens = []int32{int32(rng.IntN(m.Arch.Vocab))}
				}
				if _, err := d.Step(in); err != nil {
					b.Fatal(err)
				}
			}
			step() // warm-up: the one-token graph
			b.ResetTimer()
			cpu0 := cputime.Process()
			for i := 0; i < b.N; i++ {
				step()
			}
			b.ReportMetric(float64(streams)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			b.ReportMetric(float64(streams)*float64(b.N)/(cputime.Process()-cpu0).Seconds(), "tokens/CPU-s")
		})
	}
	// The same steps of one sequence by the lone Decoder, as toy generate decodes: what one
	// stream of the batched decoder should cost.
	b.Run("decoder", func(b *testing.B) {
		d, err := decoding.NewDecoder(m, decoding.DecoderOptions{MaxContext: 256})
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		rng := rand.New(rand.NewPCG(3, 4))
		if _, err := d.Prompt(randomSeqs(rng, 1, 15, m.Arch.Vocab)[0]); err != nil {
			b.Fatal(err)
		}
		step := func() {
			if d.Pos()+1 > 256 {
				d.Reset()
			}
			if _, err := d.Next(int32(rng.IntN(m.Arch.Vocab))); err != nil {
				b.Fatal(err)
			}
		}
		step()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			step()
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
	})
}
