package transformertest

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

// RefInfer is a plain float64 forward of every architecture the decoder supports, written
// from the architectures' definitions (llama.cpp's graphs) and independent of ggml: the
// reference the decoder's logits are checked against. Weights are by GGUF name in ggml layout
// (ne[0] fastest); a matrix [in, out] maps x to y[o] = Σ_i w[o·in+i]·x[i].
type RefInfer struct {
	A transformer.Architecture
	W map[string][]float64
	// ExactGELU evaluates GELU's tanh form in float64, as the training graph's composite does,
	// instead of as ggml's CPU kernel (geluRef).
	ExactGELU bool
	// States, when non-nil, receives the residual stream after each layer: states[il][t].
	States [][][]float64
	// Final receives the final hidden states (after the output norm) of the last logits call.
	Final [][]float64
}

// Norm is the architecture's normalisation with the weight (and bias) named name.
func (r *RefInfer) Norm(x []float64, name string) []float64 {
	if r.A.Norm == transformer.NormRMS {
		return RMSNormRef(x, r.Get(name+".weight"), r.A.NormEps)
	}
	mean := 0.0
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	c := make([]float64, len(x))
	for i, v := range x {
		c[i] = v - mean
	}
	ones := make([]float64, len(x))
	for i := range ones {
		ones[i] = 1
	}
	y := RMSNormRef(c, ones, r.A.NormEps)
	w, b := r.Get(name+".weight"), r.Get(name+".bias")
	for i := range y {
		y[i] = y[i]*w[i] + b[i]
	}
	return y
}

// Gelu is GELU as the model under test computes it.
func (r *RefInfer) Gelu(x float64) float64 {
	if r.ExactGELU {
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*x*(1+0.044715*x*x)))
	}
	return geluRef(x)
}

func (r *RefInfer) Get(name string) []float64 {
	w, ok := r.W[name]
	if !ok {
		panic("reference: no weight " + name)
	}
	return w
}

func MatVec(w []float64, in, out int, x []float64) []float64 {
	y := make([]float64, out)
	for o := 0; o < out; o++ {
		s := 0.0
		row := w[o*in : (o+1)*in]
		for i, v := range row {
			s += v * x[i]
		}
		y[o] = s
	}
	return y
}

// Linear applies weight name (and its bias, if the model has one).
func (r *RefInfer) Linear(name string, in, out int, x []float64) []float64 {
	y := MatVec(r.Get(name+".weight"), in, out, x)
	if b, ok := r.W[name+".bias"]; ok {
		for o := range y {
			y[o] += b[o]
		}
	}
	return y
}

func RMSNormRef(x, w []float64, eps float32) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	y := make([]float64, len(x))
	for i := range x {
		y[i] = x[i] * inv * w[i]
	}
	return y
}

// RopeRef rotates one head in place: pairs (2i, 2i+1) in NORMAL mode, (i, i+dims/2) in NEOX,
// by the angle scale·pos·base^(-2i/dims)/ff[i]; elements from dims on are left alone.
func RopeRef(x []float64, pos int, dims int, neox bool, base, scale float64, ff []float64) {
	for i := 0; i < dims/2; i++ {
		theta := scale * float64(pos) * math.Pow(base, -2*float64(i)/float64(dims))
		if ff != nil {
			theta /= ff[i]
		}
		a, b := 2*i, 2*i+1
		if neox {
			a, b = i, i+dims/2
		}
		c, s := math.Cos(theta), math.Sin(theta)
		x[a], x[b] = x[a]*c-x[b]*s, x[a]*s+x[b]*c
	}
}

// geluRef is GELU in its tanh form as ggml's CPU kernel evaluates it: from a table indexed by
// the input rounded to f16, holding f16 results (exact beyond ±10).
func geluRef(x float64) float64 {
	if x <= -10 {
		return 0
	}
	if x >= 10 {
		return x
	}
	x = float64(roundF16(float32(x)))
	g := 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*x*(1+0.044715*x*x)))
	return float64(roundF16(float32(g)))
}

func siluRef(x float64) float64 { return x / (1 + math.Exp(-x)) }

// FFNRef is down(act(gate·h) ⊙ up·h) for weights of width ff stored at the given slices.
func (r *RefInfer) FFNRef(gate, up, down []float64, ff int, h []float64) []float64 {
	d := r.A.DModel
	g, u := MatVec(gate, d, ff, h), MatVec(up, d, ff, h)
	for i := range g {
		if r.A.FFN == transformer.FFNGeGLU {
			g[i] = geluRef(g[i]) * u[i]
		} else {
			g[i] = siluRef(g[i]) * u[i]
		}
	}
	return MatVec(down, ff, d, g)
}

// moeRef: softmax of the router logits, the top-k experts, their weights (renormalised with
// NormTopK), the weighted sum of the experts' SwiGLU outputs, plus the sigmoid-gated shared
// expert.
func (r *RefInfer) moeRef(p string, h []float64) []float64 {
	a := r.A
	d, E, K, ff := a.DModel, a.NExperts, a.NExpertsUsed, a.ExpertFFN
	logits := MatVec(r.Get(p+"ffn_gate_inp.weight"), d, E, h)
	probs := SoftmaxRef(logits)
	idx := make([]int, E)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return probs[idx[i]] > probs[idx[j]] })
	sel := idx[:K]
	sum := 0.0
	for _, e := range sel {
		sum += probs[e]
	}
	out := make([]float64, d)
	gate, up, down := r.Get(p+"ffn_gate_exps.weight"), r.Get(p+"ffn_up_exps.weight"), r.Get(p+"ffn_down_exps.weight")
	n := d * ff
	for _, e := range sel {
		w := probs[e]
		if a.NormTopK {
			w /= sum
		}
		y := r.FFNRef(gate[e*n:(e+1)*n], up[e*n:(e+1)*n], down[e*n:(e+1)*n], ff, h)
		for i := range out {
			out[i] += w * y[i]
		}
	}
	if a.SharedExpertFFN > 0 {
		sf := a.SharedExpertFFN
		y := r.FFNRef(r.Get(p+"ffn_gate_shexp.weight"), r.Get(p+"ffn_up_shexp.weight"), r.Get(p+"ffn_down_shexp.weight"), sf, h)
		g := MatVec(r.Get(p+"ffn_gate_inp_shexp.weight"), d, 1, h)[0]
		g = 1 / (1 + math.Exp(-g))
		for i := range out {
			out[i] += g * y[i]
		}
	}
	return out
}

func SoftmaxRef(x []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, v)
	}
	y := make([]float64, len(x))
	sum := 0.0
	for i, v := range x {
		y[i] = math.Exp(v - mx)
		sum += y[i]
	}
	for i := range y {
		y[i] /= sum
	}
	return y
}

// Logits returns the logits after every token of seq, which starts at position 0.
func (r *RefInfer) Logits(seq []int32) [][]float64 {
	a := r.A
	d, T := a.DModel, len(seq)
	H, Hkv, hdk, hdv := a.NHeads, a.NKVHeads, a.HeadDimK, a.HeadDimV
	emb := r.Get("token_embd.weight")
	x := make([][]float64, T)
	for t, id := range seq {
		x[t] = make([]float64, d)
		for i := range x[t] {
			x[t][i] = emb[int(id)*d+i] * float64(a.EmbedScale)
			if a.Positions == transformer.PosLearned {
				x[t][i] += r.Get("position_embd.weight")[t*d+i]
			}
		}
	}
	ff := r.W["rope_freqs.weight"]
	for il := 0; il < a.NLayers; il++ {
		p := fmt.Sprintf("blk.%d.", il)
		base, scale := float64(a.RopeBase), float64(a.RopeScale)
		window := 0
		if a.IsSliding(il) {
			base, scale, window = float64(a.RopeBaseLocal), float64(a.RopeScaleLocal), a.SlidingWindow
		}
		q, k, v := make([][]float64, T), make([][]float64, T), make([][]float64, T)
		for t := range x {
			h := r.Norm(x[t], p+"attn_norm")
			if a.FusedQKV {
				all := r.Linear(p+"attn_qkv", d, H*hdk+2*Hkv*hdk, h)
				q[t], k[t], v[t] = all[:H*hdk], all[H*hdk:H*hdk+Hkv*hdk], all[H*hdk+Hkv*hdk:]
			} else {
				q[t] = r.Linear(p+"attn_q", d, H*hdk, h)
				k[t] = r.Linear(p+"attn_k", d, Hkv*hdk, h)
				v[t] = r.Linear(p+"attn_v", d, Hkv*hdv, h)
			}
			if a.Positions != transformer.PosRoPE {
				continue
			}
			for hh := 0; hh < H; hh++ {
				head := q[t][hh*hdk : (hh+1)*hdk]
				if a.QKNorm == transformer.QKNormHeadRMS {
					copy(head, RMSNormRef(head, r.Get(p+"attn_q_norm.weight"), a.NormEps))
				}
				RopeRef(head, t, a.RopeDims, a.RopeMode == ggml.RopeNeox, base, scale, ff)
			}
			for hh := 0; hh < Hkv; hh++ {
				head := k[t][hh*hdk : (hh+1)*hdk]
				if a.QKNorm == transformer.QKNormHeadRMS {
					copy(head, RMSNormRef(head, r.Get(p+"attn_k_norm.weight"), a.NormEps))
				}
				RopeRef(head, t, a.RopeDims, a.RopeMode == ggml.RopeNeox, base, scale, ff)
			}
		}
		for t := 0; t < T; t++ {
			att := make([]float64, H*hdv)
			for hh := 0; hh < H; hh++ {
				kh := hh / (H / Hkv)
				var keys []int
				var scores []float64
				for j := 0; j <= t; j++ {
					if window > 0 && t-j >= window {
						continue
					}
					s := 0.0
					for e := 0; e < hdk; e++ {
						s += q[t][hh*hdk+e] * k[j][kh*hdk+e]
					}
					s *= float64(a.QueryScale)
					if c := float64(a.AttnSoftcap); c > 0 {
						s = c * math.Tanh(s/c)
					}
					keys, scores = append(keys, j), append(scores, s)
				}
				pr := SoftmaxRef(scores)
				for i, j := range keys {
					for e := 0; e < hdv; e++ {
						att[hh*hdv+e] += pr[i] * v[j][kh*hdv+e]
					}
				}
			}
			o := r.Linear(p+"attn_output", H*hdv, d, att)
			if a.PostNorms {
				o = RMSNormRef(o, r.Get(p+"post_attention_norm.weight"), a.NormEps)
			}
			for e := range o {
				x[t][e] += o[e]
			}
		}
		for t := range x {
			h := r.Norm(x[t], p+"ffn_norm")
			var f []float64
			switch {
			case a.IsMoE():
				f = r.moeRef(p, h)
			case a.FFN == transformer.FFNGELU:
				u := r.Linear(p+"ffn_up", d, a.DFF, h)
				for i := range u {
					u[i] = r.Gelu(u[i])
				}
				f = r.Linear(p+"ffn_down", a.DFF, d, u)
			default:
				f = r.FFNRef(r.Get(p+"ffn_gate.weight"), r.Get(p+"ffn_up.weight"), r.Get(p+"ffn_down.weight"), a.DFF, h)
			}
			if a.PostNorms {
				f = RMSNormRef(f, r.Get(p+"post_ffw_norm.weight"), a.NormEps)
			}
			for e := range f {
				x[t][e] += f[e]
			}
		}
		if r.States != nil {
			st := make([][]float64, T)
			for t := range x {
				st[t] = slices.Clone(x[t])
			}
			r.States[il] = st
		}
	}
	out := "output.weight"
	if _, ok := r.W[out]; !ok {
		out = "token_embd.weight"
	}
	logits := make([][]float64, T)
	r.Final = make([][]float64, T)
	for t := range x {
		r.Final[t] = r.Norm(x[t], "output_norm")
		logits[t] = MatVec(r.Get(out), d, a.Vocab, r.Final[t])
		if c := float64(a.FinalSoftcap); c > 0 {
			for i, v := range logits[t] {
				logits[t][i] = c * math.Tanh(v/c)
			}
		}
	}
	return logits
}

// roundF16 rounds to the nearest IEEE half-precision value (ties to even), as F16C does.
func roundF16(f float32) float32 { return f16ToF32(F32ToF16(f)) }

func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	e32 := int((b >> 23) & 0xff)
	mant := b & 0x7fffff
	if e32 == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	exp := e32 - 127 + 15
	if exp >= 0x1f {
		return sign | 0x7c00
	}
	if exp <= 0 {
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint(14 - exp)
		half := mant >> shift
		rem := mant & (1<<shift - 1)
		halfway := uint32(1) << (shift - 1)
		if rem > halfway || (rem == halfway && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // a carry into the exponent is the right rounding (up to infinity)
	}
	return sign | uint16(half)
}

func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		v := float32(mant) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp-15+127)<<23 | mant<<13)
}
