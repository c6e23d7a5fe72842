package decoding

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// TestEveryArchitectureHasAnEntry fails when toy can decode (or, for ViT, train and classify) an
// architecture that the cpu kernel table declares no model for: the gate would refuse it.
func TestEveryArchitectureHasAnEntry(t *testing.T) {
	cpu := kernelrt.BuildTarget(kernels.BackendCPU)
	require.NotNil(t, cpu)
	for _, arch := range append(transformer.SupportedArchitectures(), transformer.ViTArch) {
		_, err := kernelrt.Resolve(cpu, kernelrt.Ref{ModelType: arch, HiddenSize: 64, Names: []string{"model.gguf"}})
		assert.NoError(t, err, "architecture %s", arch)
	}
}

// TestKernelNeeds checks the lookups a decoder makes: the products over each weight type (the
// packed GEMM for float weights only, the 8-bit integer product for q8_0 where the build has
// AVX-512 VNNI), RoPE only for a model that rotates, the attention over
// the cache's type, and the transposed store only outside flash attention's layout.
func TestKernelNeeds(t *testing.T) {
	if !ggml.CPUKernelsFast() {
		t.Skip("toy's CPU kernels are compiled scalar in this build: nothing is looked up")
	}
	m, err := OpenModel(transformertest.WriteTiny(t, transformertest.TinyArch("llama"), ggml.Q8_0, 1), ModelOptions{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	var names []string
	for _, n := range m.KernelNeeds(KVF16, false) {
		names = append(names, n.String())
	}
	products := []string{"mul_mat_cols.mul_mat_cols[q8_0]"}
	if ggml.CPUKernelsQ32() {
		products = append(products, "mul_mat_q32.quantize_q32", "mul_mat_q32.mul_mat_q32[q8_0]")
	}
	assert.Equal(t, append(products,
		"rms_norm.rms_norm_mul", "rope.rope_table", "rope.rope_apply",
		"attend.attend_one[f16]", "attend.attend_blocks[f16]", "attend.attend_merge",
		"store.store_transposed[f16]", "mul_mat_packed.mul_mat_packed[f16]", "soft_max.soft_max",
	), names)
	assert.NotContains(t, m.KernelNeeds(KVQ8_0, true), needStore(ggml.Q8_0), "flash attention's values are not stored transposed")

	g, err := OpenModel(transformertest.WriteTiny(t, transformertest.TinyArch("gpt2"), ggml.F16, 1), ModelOptions{Threads: 1})
	require.NoError(t, err)
	defer g.Close()
	needs := g.KernelNeeds(KVF16, false)
	assert.Contains(t, needs, needColumns(ggml.F16))
	assert.Contains(t, needs, NeedPacked(ggml.F16))
	assert.NotContains(t, needs, needRope[0], "learned positions rotate nothing")

	ggmlOnly, err := OpenModel(transformertest.WriteTiny(t, transformertest.TinyArch("llama"), ggml.F16, 1), ModelOptions{Threads: 1, GGMLKernels: true})
	require.NoError(t, err)
	defer ggmlOnly.Close()
	assert.Empty(t, ggmlOnly.KernelNeeds(KVF16, false), "ModelOptions.GGMLKernels looks nothing up")
}

// TestKernelsGovernWhatRuns decodes the same prompt and steps with what the table resolved:
// with nothing resolved the logits are ggml's to the bit (a model with ModelOptions.GGMLKernels),
// with everything resolved they are toy's kernels' (the default), which differ from ggml's in
// their rounding (ggml rounds the columns to f16 for f16 weights), and with only the
// few-column product withdrawn they are neither: each lookup decides its own operation.
func TestKernelsGovernWhatRuns(t *testing.T) {
	if !ggml.CPUKernelsFast() {
		t.Skip("toy's CPU kernels are compiled scalar in this build: none runs")
	}
	path := transformertest.WriteTiny(t, transformertest.TinyArch("llama"), ggml.F16, 3)
	tokens := []int32{1, 5, 9, 2, 7}
	run := func(opts ModelOptions, use func(m *GGUFModel)) []float32 {
		m, err := OpenModel(path, opts)
		require.NoError(t, err)
		defer m.Close()
		if use != nil {
			use(m)
		}
		d, err := NewDecoder(m, DecoderOptions{Threads: 1})
		require.NoError(t, err)
		defer d.Close()
		_, err = d.Prompt(tokens)
		require.NoError(t, err)
		var all []float32
		for _, tok := range []int32{3, 4, 6} {
			l, err := d.Next(tok)
			require.NoError(t, err)
			all = append(all, l...)
		}
		return all
	}
	ggmlLogits := run(ModelOptions{Threads: 1, GGMLKernels: true}, nil)
	toyLogits := run(ModelOptions{Threads: 1}, nil)
	none := run(ModelOptions{Threads: 1}, func(m *GGUFModel) { m.UseKernels(nil) })
	assert.Equal(t, ggmlLogits, none, "nothing resolved: ggml's operations throughout")
	assert.NotEqual(t, ggmlLogits, toyLogits, "toy's kernels ran by default")
	assert.InDeltaSlice(t, toUnit64(ggmlLogits), toUnit64(toyLogits), 0.05, "the same model either way")
	noColumns := run(ModelOptions{Threads: 1}, func(m *GGUFModel) {
		var keep []kernelrt.Need
		for _, n := range m.KernelNeeds(KVF16, false) {
			if n != needColumns(ggml.F16) {
				keep = append(keep, n)
			}
		}
		m.UseKernels(keep)
	})
	assert.NotEqual(t, toyLogits, noColumns, "withdrawing the few-column product changes the steps")
	assert.NotEqual(t, ggmlLogits, noColumns, "the rest of toy's kernels still run")
}

func toUnit64(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// TestQ32KernelsMatchGGML decodes a random model quantized to each block type of 32 values
// (q8_0, q4_0, q5_0, q5_1) with toy's 8-bit integer products (a prompt of more columns than the
// few-column product takes, then steps of one column) and with ggml's kernels alone
// (ModelOptions.GGMLKernels), both fed ggml's greedy tokens: both round the columns to 8 bits
// (toy with f32 scales, ggml with f16; q8_0's steps are toy's f32 few-column product, q4_0's,
// q5_0's and q5_1's products all the k-quant kernel's over their repacked copies,
// whose columns are rounded as the integer product rounds them), so every step's logits are close, each step's greedy token is ggml's wherever
// ggml's margin between its two best exceeds twice the step's largest difference, and against
// a float64 decoding toy's logits are off by about as much as ggml's.
func TestQ32KernelsMatchGGML(t *testing.T) {
	if !ggml.CPUKernelsFast() || !ggml.CPUKernelsQ32() {
		t.Skip("toy's 8-bit integer products need AVX-512 VNNI in this build")
	}
	a := transformertest.TinyArch("llama")
	a.Context = 256
	prompt := transformertest.RandomTokens(rand.New(rand.NewPCG(11, 12)), ggml.MulMatColsMax+17, a.Vocab)
	for _, typ := range []ggml.Type{ggml.Q8_0, ggml.Q4_0, ggml.Q5_0, ggml.Q5_1} {
		t.Run(ggml.TypeName(typ), func(t *testing.T) {
			path := transformertest.WriteTiny(t, a, typ, 21)
			// decode runs the prompt, then steps: ggml's greedy tokens where forced is nil.
			decode := func(opts ModelOptions, forced []int32) (logits [][]float32, tokens []int32) {
				m := openTiny(t, path, opts)
				if !opts.GGMLKernels {
					require.Contains(t, m.KernelNeeds(KVF16, false), needQ32(typ)[1])
				}
				d := newDecoder(t, m, DecoderOptions{}, 0)
				l, err := d.Prompt(prompt)
				require.NoError(t, err)
				logits = append(logits, slices.Clone(l)) // the decoder reuses its logits' buffer
				for i := range 12 {
					tok := transformertest.Argmax32(l)
					if forced != nil {
						tok = forced[i]
					}
					tokens = append(tokens, tok)
					l, err = d.Next(tok)
					require.NoError(t, err)
					logits = append(logits, slices.Clone(l))
				}
				return logits, tokens
			}
			ggmlLogits, tokens := decode(ModelOptions{Threads: 2, GGMLKernels: true}, nil)
			toyLogits, _ := decode(ModelOptions{Threads: 2}, tokens)
			assert.NotEqual(t, ggmlLogits[0], toyLogits[0], "toy's kernels computed the prompt")
			worst, decided := 0.0, 0
			for i, want := range ggmlLogits {
				e := transformertest.RelErr(toyLogits[i:i+1], [][]float64{toUnit64(want)})
				worst = max(worst, e)
				assert.Less(t, e, 4e-2, "step %d: logits against ggml's", i)
				diff := 0.0
				for j, w := range want {
					diff = max(diff, math.Abs(float64(toyLogits[i][j]-w)))
				}
				if best := transformertest.Argmax32(want); margin(want, best) > 2*diff {
					decided++
					assert.Equal(t, best, transformertest.Argmax32(toyLogits[i]), "step %d: greedy token", i)
				}
			}
			t.Logf("%s: logits within %.2e of ggml's (relative to the largest); %d of %d greedy tokens decided", ggml.TypeName(typ),
				worst, decided, len(ggmlLogits))
			assert.Greater(t, decided, len(ggmlLogits)/2, "most steps decide their token")
			// Against a float64 decoding of the weights the file holds (ggml's dequantizer) and
			// unrounded columns, toy's error is of the size of ggml's: both round the columns
			// to 8 bits, each a different random error (measured: toy's 0.3 to 1.3 times ggml's).
			m := openTiny(t, path, ModelOptions{GGMLKernels: true})
			ref := (&transformertest.RefInfer{A: m.Arch, W: loadedWeights(t, m)}).Logits(append(slices.Clone(prompt), tokens...))
			ref = ref[len(prompt)-1 : len(prompt)+len(tokens)]
			eToy, eGGML := transformertest.RelErr(toyLogits, ref), transformertest.RelErr(ggmlLogits, ref)
			t.Logf("%s: against float64, toy's logits within %.2e, ggml's within %.2e", ggml.TypeName(typ), eToy, eGGML)
			assert.Less(t, eToy, 2*eGGML, "toy's error against ggml's")
		})
	}
}

// margin is how far x[best] is above the next largest value.
func margin(x []float32, best int32) float64 {
	next := math.Inf(-1)
	for j, v := range x {
		if int32(j) != best {
			next = max(next, float64(v))
		}
	}
	return float64(x[best]) - next
}

// TestQ32PromptsKQuantSteps checks which kernel multiplies q4_0, q5_0 and q5_1 weights, all repacked
// for the k-quant kernel at load: a step's columns (up to ggml.MulMatColsMax) go to the k-quant
// kernel, a prompt's more to toy's 8-bit integer GEMM, which is faster there (q32Prompt); the
// products of both are held to ggml's and to a float64 decoding by TestQ32KernelsMatchGGML.
func TestQ32PromptsKQuantSteps(t *testing.T) {
	if !ggml.CPUKernelsFast() || !ggml.CPUKernelsQ32() || !ggml.KQuantFast() {
		t.Skip("toy's integer products need AVX-512 VNNI in this build")
	}
	for _, typ := range []ggml.Type{ggml.Q4_0, ggml.Q5_0, ggml.Q5_1} {
		t.Run(ggml.TypeName(typ), func(t *testing.T) {
			m := openTiny(t, transformertest.WriteTiny(t, transformertest.TinyArch("llama"), typ, 5), ModelOptions{})
			ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: 2 * len(m.Matrices())})
			require.NoError(t, err)
			defer ctx.Close()
			checked := 0
			for name, w := range m.Matrices() {
				if w.Type() != typ {
					continue
				}
				require.NotNil(t, m.kquant[w], "%s repacked", name)
				k := w.Ne()[0]
				step, prompt := ctx.NewTensor(ggml.F32, k, ggml.MulMatColsMax), ctx.NewTensor(ggml.F32, k, ggml.MulMatColsMax+1)
				assert.True(t, m.ownKQuant(w, step), "%s: %d columns by the k-quant kernel", name, ggml.MulMatColsMax)
				assert.False(t, m.ownKQuant(w, prompt), "%s: a prompt not by the k-quant kernel", name)
				assert.True(t, m.ownQ32(w, prompt), "%s: a prompt by the integer GEMM", name)
				checked++
			}
			require.NotZero(t, checked, "no %s matrix", ggml.TypeName(typ))
		})
	}
}
