package training

import (
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

func tinyConfig(t *testing.T, tied, bias bool) transformer.Config {
	c := config.DefaultLlama()
	c.Vocab, c.DModel, c.DFF, c.NHeads, c.NKVHeads, c.NLayers, c.Context = 11, 8, 12, 4, 2, 2, 8
	c.TiedOutput, c.QKVBias, c.InitScale, c.Seed = tied, bias, 0.5, 7
	require.NoError(t, transformer.Validate(c))
	return c
}

// scaleRope gives c RoPE scaling of the kind given: a factor of 4 and, for YaRN, an original
// context of 4 (half of tinyConfig's), so most positions lie beyond it.
func scaleRope(c *transformer.Config, kind config.LlamaRopeScaling) {
	c.RopeScaling = kind
	if kind != "none" {
		c.RopeScaleFactor, c.RopeOrigContext = 4, 4
	}
}

func newBackend(t *testing.T) *ggml.Backend { return transformertest.CPUBackend(t) }

func randomSeqs(rng *rand.Rand, B, T, vocab int) [][]int32 {
	seqs := make([][]int32, B)
	for s := range seqs {
		seqs[s] = make([]int32, T+1)
		for i := range seqs[s] {
			seqs[s][i] = int32(rng.IntN(vocab))
		}
	}
	return seqs
}

// randomize gives every weight (norms and biases included) random values, so no gradient is
// trivially zero.
func randomize(t *testing.T, m *Model, rng *rand.Rand) *transformertest.RefModel {
	return &transformertest.RefModel{C: transformer.ConfigFromArch(&m.Arch), W: randomWeights(t, m, rng)}
}

// randomWeights sets every weight to N(0, 0.25) (norm scales around 1) and returns the values
// by name, in float64.
func randomWeights(t *testing.T, m *Model, rng *rand.Rand) map[string][]float64 {
	out := map[string][]float64{}
	for _, w := range m.Weights() {
		vals := make([]float32, w.Len())
		f := make([]float64, len(vals))
		for i := range vals {
			vals[i] = float32(rng.NormFloat64() * 0.5)
			if m.roles[w] == transformer.RoleNorm {
				vals[i] += 1
			}
			f[i] = float64(vals[i])
		}
		require.NoError(t, w.SetF32(vals))
		out[w.Name()] = f
	}
	return out
}

// worstFDError is the largest error of got, a weight's gradient, against central finite
// differences of loss at n random entries of vals (the weight's float64 values, which loss
// reads): relative to the difference, or to 1e-3 of got's largest entry where that is larger.
// The differences step 1e-4 either way.
func worstFDError(rng *rand.Rand, got []float32, vals []float64, n int, loss func() float64) float64 {
	return worstFDErrorAt(rng, got, vals, n, 1e-4, 1e-3, loss)
}

// worstFDErrorAt is worstFDError with the step eps and the floor, over float32 or float64
// values: errors are relative to the difference, or to floor times got's largest entry where
// that is larger.
func worstFDErrorAt[F float32 | float64](rng *rand.Rand, got []float32, vals []F, n int, eps, floor float64, loss func() float64) float64 {
	maxAbs, worst := 0.0, 0.0
	for _, g := range got {
		maxAbs = math.Max(maxAbs, math.Abs(float64(g)))
	}
	for _, i := range rng.Perm(len(vals))[:min(n, len(vals))] {
		orig := vals[i]
		vals[i] = orig + F(eps)
		up := loss()
		vals[i] = orig - F(eps)
		down := loss()
		vals[i] = orig
		fd := (up - down) / (2 * eps)
		worst = math.Max(worst, math.Abs(float64(got[i])-fd)/math.Max(math.Abs(fd), floor*math.Max(maxAbs, 1e-6)))
	}
	return worst
}

// TestGradientsMatchFiniteDifferences checks the gradient of every weight of the whole model
// against central finite differences of the float64 reference forward, for tied and untied
// output, with and without QKV bias, with GQA (4 query heads on 2 kv heads), a batch of 2 and a
// document separator in the block-causal mask. It is also what catches ggml's in-place
// RMS_NORM_BACK bug should its fix regress: every gradient upstream of a norm would be wrong.
func TestGradientsMatchFiniteDifferences(t *testing.T) {
	be := newBackend(t)
	for _, tc := range []struct {
		name       string
		tied, bias bool
		scaling    config.LlamaRopeScaling
		chunk      int64 // inputGradChunk, 0 for the default
	}{{"tied", true, false, "none", 0}, {"untied", false, false, "none", 0}, {"tied+bias", true, true, "none", 0},
		{"untied+bias", false, true, "none", 0}, {"linear", true, false, "linear", 0}, {"yarn", false, true, "yarn", 0},
		// input gradients by chunks of 4 outputs: the head's 11 (a ragged last chunk), the
		// feed-forward's 12, the model width's 8
		{"tied+chunked", true, false, "none", 4}, {"untied+chunked", false, true, "none", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.chunk > 0 {
				defer func(c int64) { inputGradChunk = c }(inputGradChunk)
				inputGradChunk = tc.chunk
			}
			rng := rand.New(rand.NewPCG(11, 12))
			c := tinyConfig(t, tc.tied, tc.bias)
			scaleRope(&c, tc.scaling)
			m, err := New(c, be)
			require.NoError(t, err)
			defer m.Close()
			ref := randomize(t, m, rng)
			const T, B, sep = 6, 2, 3
			tr, err := newTrainer(m, T, B, true, false)
			require.NoError(t, err)
			defer tr.Close()
			tr.Sep = sep
			seqs := randomSeqs(rng, B, T, m.Arch.Vocab)
			seqs[0][2] = sep // a document boundary inside the first sequence
			loss, err := tr.Step(seqs, [7]float32{0, 0.9, 0.999, 1e-8, 0, 1, 1}, [7]float32{0, 0.9, 0.999, 1e-8, 0, 1, 1})
			require.NoError(t, err)
			assert.InDelta(t, ref.Loss(seqs, sep), float64(loss), 1e-4*math.Max(1, float64(loss)), "loss")

			for _, w := range m.Weights() {
				got, err := tr.grad(w)
				require.NoError(t, err)
				worst := worstFDError(rng, got, ref.W[w.Name()], 12, func() float64 { return ref.Loss(seqs, sep) })
				assert.Less(t, worst, 1e-2, "%s: worst relative error %.3g", w.Name(), worst)
			}
		})
	}
}

// TestPackedAttentionGradients checks, against central finite differences of the float64
// reference, the gradients of a model large enough for toy's packed GEMM to compute every
// product of the trainer's attention on the CPU, with the zeros of the causal mask skipped
// (ggml.Causality): 70 positions, heads of 64 values, GQA (2 query heads on 1 key/value head), a
// batch of 2 and a document separator. TestGradientsMatchFiniteDifferences's models are too
// small for the packed kernel (it takes 64 rows or more), so ggml computes theirs.
func TestPackedAttentionGradients(t *testing.T) {
	if !ggml.CPUKernelsFast() {
		t.Skip("toy's packed GEMM runs on a vectorized CPU build only")
	}
	be := newBackend(t)
	rng := rand.New(rand.NewPCG(13, 14))
	c := tinyConfig(t, true, false)
	c.Vocab, c.DModel, c.DFF, c.NHeads, c.NKVHeads, c.NLayers, c.Context = 67, 128, 192, 2, 1, 2, 72
	require.NoError(t, transformer.Validate(c))
	m, err := New(c, be)
	require.NoError(t, err)
	defer m.Close()
	ref := randomize(t, m, rng)
	const T, B, sep = 70, 2, 3
	tr, err := newTrainer(m, T, B, true, false)
	require.NoError(t, err)
	defer tr.Close()
	packed := 0
	for i := 0; i < tr.graph.Len(); i++ {
		if n := tr.graph.Node(i); n.OpName() == "CUSTOM" && n.Ne()[0] == T && n.Ne()[1] == T {
			packed++ // a head's scores k·q or dp = v·do
		}
	}
	require.Positive(t, packed, "no attention product of the training graph is toy's kernel")
	tr.Sep = sep
	seqs := randomSeqs(rng, B, T, m.Arch.Vocab)
	seqs[1][40] = sep // a document boundary inside the second sequence
	loss, err := tr.Step(seqs, [7]float32{0, 0.9, 0.999, 1e-8, 0, 1, 1}, [7]float32{0, 0.9, 0.999, 1e-8, 0, 1, 1})
	require.NoError(t, err)
	assert.InDelta(t, ref.Loss(seqs, sep), float64(loss), 1e-4*math.Max(1, float64(loss)), "loss")
	for _, w := range m.Weights() {
		switch w.Name() {
		case "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.1.attn_k.weight":
		default:
			continue
		}
		got, err := tr.grad(w)
		require.NoError(t, err)
		worst := worstFDError(rng, got, ref.W[w.Name()], 5, func() float64 { return ref.Loss(seqs, sep) })
		assert.Less(t, worst, 1e-2, "%s: worst relative error %.3g", w.Name(), worst)
	}
}

// TestTrainerMultipliesWeightsWithGEMMs: no weight reaches ggml's OUT_PROD in a training
// graph, neither a trained one (full model, tied embedding) nor a frozen base's (LoRA), and no
// attention operand either: gemmBackward differentiates them with GEMMs. Only the LoRA terms
// have OUT_PRODs, at most three each (A's gradient and its input's, B's), none of them a
// vector operation along the rank.
func TestTrainerMultipliesWeightsWithGEMMs(t *testing.T) {
	be := newBackend(t)
	m, err := New(tinyConfig(t, true, false), be)
	require.NoError(t, err)
	defer m.Close()
	base := decodingtest.OpenTiny(t, transformertest.WriteTiny(t, transformertest.TinyArch("llama"), ggml.F16, 3), decoding.ModelOptions{Backend: be})
	ad, err := NewAdapter(base, LoRAOptions{Rank: 2, Alpha: 3, Targets: []string{"q", "v"}})
	require.NoError(t, err)
	defer ad.Close()
	for _, c := range []struct {
		name    string
		model   Trainable
		weights []*ggml.Tensor
		outProd int // OUT_PROD nodes expected: the LoRA terms' (three each, two tensors each)
	}{{"full", m, m.Weights(), 0}, {"lora", ad, append(slices.Collect(maps.Values(base.Matrices())), base.TokEmbd), 3 * len(ad.Tensors()) / 2}} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := NewTrainer(c.model, 6, 1)
			require.NoError(t, err)
			defer tr.Close()
			weights := map[ggml.TensorID]string{}
			for _, w := range c.weights {
				weights[w.ID()] = w.Name()
			}
			outProds := 0
			for i := 0; i < tr.graph.Len(); i++ {
				n := tr.graph.Node(i)
				if n.OpName() != "OUT_PROD" {
					continue
				}
				outProds++
				assert.NotEqual(t, int64(2), n.Ne()[0], "OUT_PROD node %d runs along the rank", i)
				for j := 0; j < 2; j++ {
					s := n.Src(j)
					for slices.Contains([]string{"TRANSPOSE", "RESHAPE", "VIEW", "PERMUTE", "CPY"}, s.OpName()) {
						s = s.Src(0)
					}
					assert.NotContains(t, weights, s.ID(), "OUT_PROD node %d multiplies a weight", i)
				}
			}
			assert.LessOrEqual(t, outProds, c.outProd)
		})
	}
}

// TestAdamWStepMatchesGo takes one real step and checks every updated weight against a plain Go
// AdamW on the gradients the step computed.
func TestAdamWStepMatchesGo(t *testing.T) {
	be := newBackend(t)
	rng := rand.New(rand.NewPCG(21, 22))
	m, err := New(tinyConfig(t, false, true), be)
	require.NoError(t, err)
	defer m.Close()
	randomize(t, m, rng)
	before := map[string][]float32{}
	for _, w := range m.Weights() {
		before[w.Name()], err = w.F32()
		require.NoError(t, err)
	}
	tr, err := newTrainer(m, 5, 2, true, false)
	require.NoError(t, err)
	defer tr.Close()
	const lr, b1, b2, eps, wd = 1e-2, 0.9, 0.95, 1e-8, 0.1
	decay := [7]float32{lr, b1, b2, eps, wd, 1 / (1 - b1), 1 / (1 - b2)}
	noDecay := decay
	noDecay[4] = 0
	_, err = tr.Step(randomSeqs(rng, 2, 5, m.Arch.Vocab), decay, noDecay)
	require.NoError(t, err)
	for _, w := range m.Weights() {
		g, err := tr.grad(w)
		require.NoError(t, err)
		after, err := w.F32()
		require.NoError(t, err)
		p := noDecay
		if m.IsMatrix(w) {
			p = decay
		}
		for i, w0 := range before[w.Name()] {
			gi := float64(g[i])
			mm, vv := (1-b1)*gi, (1-b2)*gi*gi
			want := float64(w0)*(1-float64(p[0])*float64(p[4])) - float64(p[0])*(mm*float64(p[5]))/(math.Sqrt(vv*float64(p[6]))+eps)
			require.InDelta(t, want, float64(after[i]), 1e-5, "%s[%d]", w.Name(), i)
		}
	}
}

// TestSameSeedSameCurve trains a few steps twice from the same seed: the losses are identical.
func TestSameSeedSameCurve(t *testing.T) {
	be := newBackend(t)
	curve := func() []float32 {
		c := tinyConfig(t, true, false)
		c.InitScale = 0.1
		m, err := New(c, be)
		require.NoError(t, err)
		defer m.Close()
		require.NoError(t, m.Init())
		tr, err := NewTrainer(m, 6, 2)
		require.NoError(t, err)
		defer tr.Close()
		batch := randomSeqs(rand.New(rand.NewPCG(5, 5)), 2, 6, c.Vocab)
		p := [7]float32{1e-2, 0.9, 0.95, 1e-8, 0.1, 0, 0}
		var losses []float32
		for step := 0; step < 8; step++ {
			p[5], p[6] = float32(1/(1-math.Pow(0.9, float64(step+1)))), float32(1/(1-math.Pow(0.95, float64(step+1))))
			nd := p
			nd[4] = 0
			loss, err := tr.Step(batch, p, nd)
			require.NoError(t, err)
			losses = append(losses, loss)
		}
		return losses
	}
	a, b := curve(), curve()
	assert.Equal(t, a, b)
	assert.Less(t, a[len(a)-1], a[0], "training on one batch lowers its loss")
}

func TestBadInput(t *testing.T) {
	be := newBackend(t)
	c := tinyConfig(t, true, false)
	m, err := New(c, be)
	require.NoError(t, err)
	defer m.Close()
	_, err = NewTrainer(m, c.Context+1, 1)
	assert.ErrorContains(t, err, "outside 1..8")
	tr, err := NewTrainer(m, 4, 2)
	require.NoError(t, err)
	defer tr.Close()
	var p [7]float32
	_, err = tr.Step(randomSeqs(rand.New(rand.NewPCG(1, 1)), 1, 4, c.Vocab), p, p)
	assert.ErrorContains(t, err, "a batch of 1 sequences of 4 tokens for a graph of 2 × 4")
	seqs := randomSeqs(rand.New(rand.NewPCG(1, 1)), 2, 4, c.Vocab)
	seqs[1][3] = int32(c.Vocab)
	_, err = tr.Step(seqs, p, p)
	assert.ErrorContains(t, err, "sequence 1 position 3: token id 11 is outside [0, 11)")

	bad := c
	bad.NHeads = 3
	_, err = New(bad, be)
	assert.ErrorContains(t, err, "not a multiple of n_heads")
}

// TestEvaluatorMatchesReference checks the forward-only graph's loss against the float64
// reference, and that Greedy picks the reference's argmax.
func TestEvaluatorMatchesReference(t *testing.T) {
	be := newBackend(t)
	rng := rand.New(rand.NewPCG(31, 32))
	m, err := New(tinyConfig(t, false, true), be)
	require.NoError(t, err)
	defer m.Close()
	ref := randomize(t, m, rng)
	e, err := NewEvaluator(m, 6, 2)
	require.NoError(t, err)
	defer e.Close()
	seqs := randomSeqs(rng, 2, 6, m.Arch.Vocab)
	loss, err := e.Loss(seqs)
	require.NoError(t, err)
	assert.InDelta(t, ref.Loss(seqs, -1), float64(loss), 1e-4)

	g, err := NewEvaluator(m, 6, 1)
	require.NoError(t, err)
	defer g.Close()
	prompt := seqs[0][:3]
	out, err := g.Greedy(prompt, 3, -1)
	require.NoError(t, err)
	require.Len(t, out, 6)
	for i := 3; i < 6; i++ {
		lg := ref.Logits(out[:i], -1)[i-1]
		best := 0
		for id := range lg {
			if lg[id] > lg[best] {
				best = id
			}
		}
		assert.Equal(t, int32(best), out[i], "token %d", i)
	}
}

// TestInitIsSeeded: the same Cfg.Seed gives the same initial weights, another seed other ones
// in every random tensor.
func TestInitIsSeeded(t *testing.T) {
	be := newBackend(t)
	initial := func(seed int) map[string][]float32 {
		c := tinyConfig(t, false, true)
		c.Seed = seed
		m, err := New(c, be)
		require.NoError(t, err)
		defer m.Close()
		require.NoError(t, m.Init())
		out := map[string][]float32{}
		for _, w := range m.Weights() {
			if r := m.roles[w]; r == transformer.RoleNorm || r == transformer.RoleBias {
				continue // constant: 1 and 0
			}
			out[w.Name()], err = w.F32()
			require.NoError(t, err)
		}
		return out
	}
	a, b, c := initial(3), initial(3), initial(4)
	require.NotEmpty(t, a)
	assert.Equal(t, a, b)
	for name := range a {
		assert.NotEqual(t, a[name], c[name], name)
	}
}

// TestGPT2Training trains the GPT-2 choices of the core (LayerNorm with biases and GELU built
// from differentiable ops, learned positions, fused QKV, biases): every weight's gradient
// against central finite differences of the float64 reference, then a trained checkpoint,
// saved, decodes in toy with the training forward's logits and the reference's (the
// decoder's GELU is ggml's f16-table kernel, hence 1e-3).
func TestGPT2Training(t *testing.T) {
	be := newBackend(t)
	a := transformertest.TinyArch("gpt2")
	a.DModel, a.DFF, a.NHeads, a.NKVHeads, a.HeadDimK, a.HeadDimV, a.RopeDims, a.Context, a.Vocab = 16, 24, 2, 2, 8, 8, 8, 8, 13
	a.QueryScale = float32(1 / math.Sqrt(8))
	for _, tied := range []bool{true, false} {
		a.TiedOutput = tied
		c := tinyConfig(t, tied, true)
		m, err := newModel(a, transformer.Init{Scale: c.InitScale, Seed: c.Seed}, be)
		require.NoError(t, err)
		defer m.Close()
		rng := rand.New(rand.NewPCG(31, 32))
		ref := &transformertest.RefInfer{A: a, W: randomWeights(t, m, rng), ExactGELU: true}
		const T = 6
		tr, err := newTrainer(m, T, 1, true, false)
		require.NoError(t, err)
		seq := transformertest.RandomTokens(rng, T+1, a.Vocab)
		loss, err := tr.Step([][]int32{seq}, noStep, noStep)
		require.NoError(t, err)
		assert.InDelta(t, refLoss(ref, seq), float64(loss), 1e-4*math.Max(1, float64(loss)), "loss")
		for _, w := range m.Weights() {
			got, err := tr.grad(w)
			require.NoError(t, err)
			worst := worstFDError(rng, got, ref.W[w.Name()], 6, func() float64 { return refLoss(ref, seq) })
			assert.Less(t, worst, 1e-2, "tied %v: %s: worst relative error %.3g", tied, w.Name(), worst)
		}
		tr.Close()

		ev, err := NewEvaluator(m, T, 1)
		require.NoError(t, err)
		_, err = ev.Loss([][]int32{seq})
		require.NoError(t, err)
		flat, err := ev.logits.F32()
		require.NoError(t, err)
		ev.Close()
		train := make([][]float64, T)
		for i := range train {
			for _, v := range flat[i*a.Vocab : (i+1)*a.Vocab] {
				train[i] = append(train[i], float64(v))
			}
		}
		assert.Less(t, transformertest.RelErr(toF32(train), ref.Logits(seq[:T])), 1e-5, "the training forward is the exact reference")
		path := filepath.Join(t.TempDir(), "gpt2.gguf")
		require.NoError(t, m.Save(path, nil))
		dm := decodingtest.OpenTiny(t, path, decoding.ModelOptions{Backend: be})
		assert.Equal(t, a, dm.Arch, "the checkpoint's architecture reads back")
		got, err := decodingtest.NewDecoder(t, dm, decoding.DecoderOptions{KVType: decoding.KVF32}).Logits(seq[:T])
		require.NoError(t, err)
		assert.Less(t, transformertest.RelErr(got, train), 1e-3, "tied %v: the decoder gives the training forward's logits", tied)
	}
}

// toF32 rounds rows of float64 to float32.
func toF32(rows [][]float64) [][]float32 {
	out := make([][]float32, len(rows))
	for i, r := range rows {
		for _, v := range r {
			out[i] = append(out[i], float32(v))
		}
	}
	return out
}
