package training

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/generated/config"
)

// refViT is a plain float64 forward of the ViT classifier, written from its definition
// (timm's VisionTransformer with a channel-last patch flattening) and independent of ggml:
// patches → patch_embd (+bias), [cls; patches] + position_embd, pre-norm blocks with
// non-causal attention and a GELU MLP, the final LayerNorm and the head on the class token.
type refViT struct{ transformertest.RefInfer }

// logits are the class logits of one image ([H, W, C] row by row, channel fastest).
func (r *refViT) logits(img []float64) []float64 {
	a := r.A
	d, P, C, S := a.DModel, a.PatchSize, a.Channels, a.ImageSize
	H, hd := a.NHeads, a.HeadDimK
	n := S / P
	pos := r.Get("position_embd.weight")
	x := [][]float64{append([]float64(nil), r.Get("cls_token.weight")...)}
	for py := 0; py < n; py++ {
		for px := 0; px < n; px++ {
			var patch []float64
			for dy := 0; dy < P; dy++ {
				for dx := 0; dx < P; dx++ {
					for c := 0; c < C; c++ {
						patch = append(patch, img[((py*P+dy)*S+px*P+dx)*C+c])
					}
				}
			}
			x = append(x, r.Linear("patch_embd", P*P*C, d, patch))
		}
	}
	T := len(x)
	for t := range x {
		for i := range x[t] {
			x[t][i] += pos[t*d+i]
		}
	}
	for il := 0; il < a.NLayers; il++ {
		p := fmt.Sprintf("blk.%d.", il)
		q, k, v := make([][]float64, T), make([][]float64, T), make([][]float64, T)
		for t := range x {
			all := r.Linear(p+"attn_qkv", d, 3*d, r.Norm(x[t], p+"attn_norm"))
			q[t], k[t], v[t] = all[:d], all[d:2*d], all[2*d:]
		}
		for t := range x {
			o := make([]float64, d)
			for h := 0; h < H; h++ {
				s := make([]float64, T)
				for j := range s { // every token sees every token
					for i := 0; i < hd; i++ {
						s[j] += q[t][h*hd+i] * k[j][h*hd+i]
					}
					s[j] /= math.Sqrt(float64(hd))
				}
				pr := transformertest.SoftmaxRef(s)
				for j := range pr {
					for i := 0; i < hd; i++ {
						o[h*hd+i] += pr[j] * v[j][h*hd+i]
					}
				}
			}
			o = r.Linear(p+"attn_output", d, d, o)
			for i := range o {
				x[t][i] += o[i]
			}
		}
		for t := range x {
			u := r.Linear(p+"ffn_up", d, a.DFF, r.Norm(x[t], p+"ffn_norm"))
			for i := range u {
				u[i] = r.Gelu(u[i])
			}
			y := r.Linear(p+"ffn_down", a.DFF, d, u)
			for i := range y {
				x[t][i] += y[i]
			}
		}
	}
	return r.Linear("output", d, a.Vocab, r.Norm(x[0], "output_norm"))
}

// loss is the mean cross entropy of the images' logits against their labels.
func (r *refViT) loss(imgs [][]float64, labels []int32) float64 {
	s := 0.0
	for i, img := range imgs {
		s -= math.Log(transformertest.SoftmaxRef(r.logits(img))[labels[i]])
	}
	return s / float64(len(imgs))
}

func randomImages(rng *rand.Rand, B, ppi, classes int) ([][]float64, [][]float32, []int32) {
	var f64 [][]float64
	var f32 [][]float32
	var labels []int32
	for i := 0; i < B; i++ {
		var a []float64
		var b []float32
		for j := 0; j < ppi; j++ {
			v := float32(rng.NormFloat64())
			a, b = append(a, float64(v)), append(b, v)
		}
		f64, f32, labels = append(f64, a), append(f32, b), append(labels, int32(rng.IntN(classes)))
	}
	return f64, f32, labels
}

// TestViTGradientsMatchFiniteDifferences checks the gradient of every weight of a whole ViT
// (patch embedding and its bias, class token, positions, LayerNorms, fused QKV, non-causal
// attention, GELU MLP, head and its bias) against central finite differences of the float64
// reference, for a batch of 2 images of 2 channels; the loss and the evaluator's logits are the
// reference's, and a saved checkpoint loads back with the same logits.
func TestViTGradientsMatchFiniteDifferences(t *testing.T) {
	be := newBackend(t)
	c := transformertest.TinyViT()
	m, err := NewViT(c, be)
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, 5, m.Arch.Context)
	rng := rand.New(rand.NewPCG(41, 42))
	ref := &refViT{transformertest.RefInfer{A: m.Arch, W: randomWeights(t, m, rng), ExactGELU: true}}
	const B = 2
	imgs, px, labels := randomImages(rng, B, transformer.PixelsPerImage(c), c.Classes)
	batch, err := train.NewClassificationBatch(px, labels, transformer.PixelsPerImage(c), c.Classes)
	require.NoError(t, err)
	tr, err := newTrainer(m, m.Arch.Context, B, true, false)
	require.NoError(t, err)
	loss, _, err := tr.StepImages(batch, noStep, noStep)
	require.NoError(t, err)
	assert.InDelta(t, ref.loss(imgs, labels), float64(loss), 1e-4*math.Max(1, float64(loss)), "loss")
	for _, w := range m.Weights() {
		got, err := tr.grad(w)
		require.NoError(t, err)
		worst := worstFDError(rng, got, ref.W[w.Name()], 6, func() float64 { return ref.loss(imgs, labels) })
		assert.Less(t, worst, 1e-2, "%s: worst relative error %.3g", w.Name(), worst)
	}
	tr.Close()

	ev, err := NewClassifierEvaluator(m, B)
	require.NoError(t, err)
	logits, _, _, err := ev.Classify(batch)
	require.NoError(t, err)
	ev.Close()
	want := [][]float64{ref.logits(imgs[0]), ref.logits(imgs[1])}
	assert.Less(t, transformertest.RelErr(logits, want), 1e-5, "the evaluator is the exact reference")

	path := filepath.Join(t.TempDir(), "vit.gguf")
	require.NoError(t, m.Save(path, nil))
	m2, _, err := Load(path, be)
	require.NoError(t, err)
	defer m2.Close()
	require.Equal(t, transformer.ViTArch, m2.Arch.Name)
	assert.Equal(t, c, transformer.ViTConfig(&m2.Arch, m2.Initial), "the configuration reads back")
	ev2, err := NewClassifierEvaluator(m2, 1)
	require.NoError(t, err)
	defer ev2.Close()
	got, err := ev2.ClassLogits(px)
	require.NoError(t, err)
	assert.Equal(t, logits, got, "the loaded checkpoint classifies as the saved model")
}

// TestViTLearns trains a tiny ViT on a fixed batch with AdamW: its loss falls and it ends
// classifying most of the batch; token-model calls on it are refused.
func TestViTLearns(t *testing.T) {
	be := newBackend(t)
	c := transformertest.TinyViT()
	c.InitScale = 0.02
	m, err := NewViT(c, be)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Init())
	rng := rand.New(rand.NewPCG(1, 2))
	_, px, labels := randomImages(rng, 6, transformer.PixelsPerImage(c), c.Classes)
	batch, err := train.NewClassificationBatch(px, labels, transformer.PixelsPerImage(c), c.Classes)
	require.NoError(t, err)
	tr, err := NewClassifierTrainer(m, 6)
	require.NoError(t, err)
	defer tr.Close()
	_, err = tr.Step(nil, noStep, noStep)
	assert.ErrorContains(t, err, "StepImages")
	var first, last float32
	var correct int
	for i := 0; i < 30; i++ {
		step := [7]float32{1e-2, 0.9, 0.999, 1e-8, 0, float32(1 / (1 - math.Pow(0.9, float64(i+1)))), float32(1 / (1 - math.Pow(0.999, float64(i+1))))}
		loss, n, err := tr.StepImages(batch, step, step)
		require.NoError(t, err)
		if i == 0 {
			first = loss
			assert.InDelta(t, math.Log(3), float64(loss), 1e-5, "the zero head starts at ln(classes)")
		}
		last, correct = loss, n
	}
	assert.Less(t, last, first/2)
	assert.GreaterOrEqual(t, correct, 4)
	_, err = NewTrainer(m, 3, 1)
	assert.Error(t, err)
}

// TestViTTrainFLOPs counts vit-mnist's work by hand: 16 patches of 49 pixels into d 64, four
// blocks over 17 tokens (QKV 3·64², output 64², MLP 2·64·128, attention 2·17²·64 per block),
// a head of 10 classes; three times the forward's two FLOPs per multiply-add.
func TestViTTrainFLOPs(t *testing.T) {
	c, err := config.VitPreset("vit-mnist")
	require.NoError(t, err)
	macs := 16*49*64 + 4*(17*(3*64*64+64*64+2*64*128)+2*17*17*64) + 64*10
	assert.Equal(t, float64(6*macs), ViTTrainFLOPs(c))
}
