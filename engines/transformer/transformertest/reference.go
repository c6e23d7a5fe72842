package transformertest

import (
	"math"
	"strconv"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/internal/reference"
)

// RefModel is a plain float64 LLaMA forward, written from the architecture's definition and
// independent of ggml: the reference the engine's logits and gradients are checked against.
type RefModel struct {
	C transformer.Config
	W map[string][]float64 // weights by GGUF name, ggml layout (ne[0] fastest)
}

func (r *RefModel) matvec(name string, in, out int, x []float64) []float64 {
	w := r.W[name]
	y := make([]float64, out)
	for o := 0; o < out; o++ {
		s := 0.0
		for i := 0; i < in; i++ {
			s += w[o*in+i] * x[i]
		}
		y[o] = s
	}
	if b, ok := r.W[name[:len(name)-len("weight")]+"bias"]; ok {
		for o := range y {
			y[o] += b[o]
		}
	}
	return y
}

func (r *RefModel) rmsnorm(x []float64, name string) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+float64(r.C.RMSEps))
	w := r.W[name]
	y := make([]float64, len(x))
	for i := range x {
		y[i] = x[i] * inv * w[i]
	}
	return y
}

// rope rotates adjacent pairs of each head (llama.cpp's mode 0) by pos·base^(-2i/hd), with the
// configuration's linear or YaRN scaling applied by internal/reference's ggml_rope_ext.
func (r *RefModel) rope(x []float64, heads int, pos int) {
	hd := transformer.HeadDim(r.C)
	if r.C.RopeScaling == "none" {
		for h := 0; h < heads; h++ {
			for i := 0; i < hd/2; i++ {
				theta := float64(pos) * math.Pow(float64(r.C.RopeBase), -2*float64(i)/float64(hd))
				a, b := x[h*hd+2*i], x[h*hd+2*i+1]
				x[h*hd+2*i] = a*math.Cos(theta) - b*math.Sin(theta)
				x[h*hd+2*i+1] = a*math.Sin(theta) + b*math.Cos(theta)
			}
		}
		return
	}
	p := reference.RopeParams{NDims: hd, Mode: reference.RopeNormal, NCtxOrig: r.C.Context,
		FreqBase: float64(r.C.RopeBase), FreqScale: 1 / float64(r.C.RopeScaleFactor), AttnFactor: 1,
		BetaFast: 32, BetaSlow: 1}
	if r.C.RopeScaling == "yarn" {
		p.ExtFactor = 1
		if r.C.RopeOrigContext > 0 {
			p.NCtxOrig = r.C.RopeOrigContext
		}
	}
	copy(x, p.Apply(reference.FromData(x, hd, heads, 1), []int32{int32(pos)}).Data)
}

// Logits returns the logits of every position of one sequence (block-causal at sep).
func (r *RefModel) Logits(seq []int32, sep int32) [][]float64 {
	c := r.C
	d, hd, H, Hkv, T := c.DModel, transformer.HeadDim(c), c.NHeads, c.NKVHeads, len(seq)
	kvd := Hkv * hd
	doc := make([]int, T)
	for i := 1; i < T; i++ {
		doc[i] = doc[i-1]
		if sep >= 0 && seq[i-1] == sep {
			doc[i]++
		}
	}
	x := make([][]float64, T)
	for p, id := range seq {
		x[p] = append([]float64(nil), r.W["token_embd.weight"][int(id)*d:int(id+1)*d]...)
	}
	for l := 0; l < c.NLayers; l++ {
		pre := "blk." + strconv.Itoa(l) + "."
		q, k, v := make([][]float64, T), make([][]float64, T), make([][]float64, T)
		for p := range x {
			h := r.rmsnorm(x[p], pre+"attn_norm.weight")
			q[p] = r.matvec(pre+"attn_q.weight", d, d, h)
			k[p] = r.matvec(pre+"attn_k.weight", d, kvd, h)
			v[p] = r.matvec(pre+"attn_v.weight", d, kvd, h)
			r.rope(q[p], H, p)
			r.rope(k[p], Hkv, p)
		}
		for j := 0; j < T; j++ {
			att := make([]float64, d)
			for h := 0; h < H; h++ {
				kh := h / (H / Hkv)
				scores := make([]float64, j+1)
				mx := math.Inf(-1)
				for i := 0; i <= j; i++ {
					if doc[i] != doc[j] {
						scores[i] = math.Inf(-1)
						continue
					}
					s := 0.0
					for e := 0; e < hd; e++ {
						s += q[j][h*hd+e] * k[i][kh*hd+e]
					}
					scores[i] = s / math.Sqrt(float64(hd))
					mx = math.Max(mx, scores[i])
				}
				sum := 0.0
				for i := range scores {
					scores[i] = math.Exp(scores[i] - mx)
					sum += scores[i]
				}
				for i := range scores {
					for e := 0; e < hd; e++ {
						att[h*hd+e] += scores[i] / sum * v[i][kh*hd+e]
					}
				}
			}
			o := r.matvec(pre+"attn_output.weight", d, d, att)
			for e := range o {
				x[j][e] += o[e]
			}
		}
		for p := range x {
			h := r.rmsnorm(x[p], pre+"ffn_norm.weight")
			g := r.matvec(pre+"ffn_gate.weight", d, c.DFF, h)
			u := r.matvec(pre+"ffn_up.weight", d, c.DFF, h)
			for i := range g {
				g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
			}
			o := r.matvec(pre+"ffn_down.weight", c.DFF, d, g)
			for e := range o {
				x[p][e] += o[e]
			}
		}
	}
	out := "output.weight"
	if _, ok := r.W[out]; !ok {
		out = "token_embd.weight"
	}
	logits := make([][]float64, T)
	for p := range x {
		logits[p] = r.matvec(out, d, c.Vocab, r.rmsnorm(x[p], "output_norm.weight"))
	}
	return logits
}

// Loss is the mean next-token cross entropy over B sequences of T+1 ids.
func (r *RefModel) Loss(seqs [][]int32, sep int32) float64 {
	total, n := 0.0, 0
	for _, seq := range seqs {
		T := len(seq) - 1
		lg := r.Logits(seq[:T], sep)
		for p := 0; p < T; p++ {
			mx := math.Inf(-1)
			for _, v := range lg[p] {
				mx = math.Max(mx, v)
			}
			sum := 0.0
			for _, v := range lg[p] {
				sum += math.Exp(v - mx)
			}
			total += -(lg[p][seq[p+1]] - mx - math.Log(sum))
			n++
		}
	}
	return total / float64(n)
}
