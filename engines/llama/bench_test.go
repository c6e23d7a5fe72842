package llama

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
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
