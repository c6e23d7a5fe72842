package reference

import "math"

// ggml rope modes (GGML_ROPE_TYPE_*). Only NORMAL and NEOX are modelled.
const (
	RopeNormal = 0 // GGML_ROPE_TYPE_NORMAL: rotate adjacent pairs (x[2i], x[2i+1])
	RopeNeox   = 2 // GGML_ROPE_TYPE_NEOX: rotate halves (x[i], x[i+nDims/2])
)

// RopeParams are the parameters of ggml_rope_ext, by name.
type RopeParams struct {
	NDims      int // number of rotated dims (even, <= head dim); dims past it are copied
	Mode       int // RopeNormal or RopeNeox
	NCtxOrig   int // YaRN original context length (only used when ExtFactor != 0)
	FreqBase   float64
	FreqScale  float64
	ExtFactor  float64
	AttnFactor float64
	BetaFast   float64
	BetaSlow   float64
	// FreqFactors is ggml_rope_ext's optional c tensor (nil, or at least
	// NDims/2 values): pair i uses theta_i / FreqFactors[i].
	FreqFactors []float64
}

// RopeExt is ggml_rope_ext(a, pos, NULL, nDims, mode, nCtxOrig, freqBase,
// freqScale, extFactor, attnFactor, betaFast, betaSlow) on the CPU (note the
// argument order differs from ggml's: nCtxOrig comes last here).
//
// a is [headDim, nHeads, nTokens, ne3] and len(pos) == nTokens; token i2 is at
// position p = pos[i2]. For pair index i in [0, nDims/2):
//
//	theta_extrap = p * freqBase^(-2i/nDims) / ff_i        (ff_i = 1 without freq factors)
//	theta_interp = freqScale * theta_extrap
//	theta = theta_interp, mscale = attnFactor                  if extFactor == 0
//	theta = theta_interp*(1-mix) + theta_extrap*mix,           otherwise (YaRN), with
//	        mix = ramp(i)*extFactor, ramp(i) = 1 - clamp((i - lo)/max(0.001, hi - lo), 0, 1),
//	        [lo, hi] = RopeYarnCorrDims(...), and mscale = attnFactor*(1 + 0.1*ln(1/freqScale))
//	c, s = mscale*cos(theta), mscale*sin(theta)
//
// and the pair (x0, x1) becomes (x0*c - x1*s, x0*s + x1*c), where the pair is
// (x[2i], x[2i+1]) in mode RopeNormal and (x[i], x[i+nDims/2]) in mode
// RopeNeox. Elements at index >= nDims are copied. Shape of a.
//
// Precision note: ggml builds theta_i in float32 by repeated multiplication by
// freqBase^(-2/nDims), so its angles carry an absolute error of roughly
// |p|·i·6e-8 rad; this function uses the exact float64 angle. Keep positions
// small (or tolerances proportional to |p|) when comparing.
func RopeExt(a Tensor, pos []int32, nDims, mode int, freqBase, freqScale, extFactor, attnFactor, betaFast, betaSlow float64, nCtxOrig int) Tensor {
	return RopeParams{
		NDims: nDims, Mode: mode, NCtxOrig: nCtxOrig,
		FreqBase: freqBase, FreqScale: freqScale, ExtFactor: extFactor, AttnFactor: attnFactor,
		BetaFast: betaFast, BetaSlow: betaSlow,
	}.Apply(a, pos)
}

// RopeExtBack is ggml_rope_ext_back with the same parameters as RopeExt: the
// adjoint (and inverse when mscale == 1) of RopeExt, i.e. every pair is
// rotated by -theta (sin negated) and scaled by the same mscale.
func RopeExtBack(a Tensor, pos []int32, nDims, mode int, freqBase, freqScale, extFactor, attnFactor, betaFast, betaSlow float64, nCtxOrig int) Tensor {
	return RopeParams{
		NDims: nDims, Mode: mode, NCtxOrig: nCtxOrig,
		FreqBase: freqBase, FreqScale: freqScale, ExtFactor: extFactor, AttnFactor: attnFactor,
		BetaFast: betaFast, BetaSlow: betaSlow,
	}.ApplyBack(a, pos)
}

// Apply is RopeExt with these parameters (including FreqFactors).
func (p RopeParams) Apply(a Tensor, pos []int32) Tensor { return p.rope(a, pos, 1) }

// ApplyBack is RopeExtBack with these parameters (including FreqFactors).
func (p RopeParams) ApplyBack(a Tensor, pos []int32) Tensor { return p.rope(a, pos, -1) }

// RopeYarnCorrDims is ggml_rope_yarn_corr_dims: the pair range [lo, hi] over
// which YaRN blends interpolation and extrapolation,
//
//	corr(b) = nDims * ln(nCtxOrig / (2*pi*b)) / (2 ln freqBase)
//	lo = max(0, floor(corr(betaFast))),  hi = min(nDims-1, ceil(corr(betaSlow))).
//
// It is evaluated in float32 like ggml, because floor/ceil make the result
// sensitive to rounding.
func RopeYarnCorrDims(nDims, nCtxOrig int, freqBase, betaFast, betaSlow float64) [2]float64 {
	logf := func(x float32) float32 { return float32(math.Log(float64(x))) }
	corr := func(nRot float64) float32 {
		den := float32(float32(float32(nRot)*2) * float32(math.Pi))
		num := float32(float32(nDims) * logf(float32(float32(nCtxOrig)/den)))
		return float32(num / float32(2*logf(float32(freqBase))))
	}
	start := math.Floor(float64(corr(betaFast)))
	end := math.Ceil(float64(corr(betaSlow)))
	return [2]float64{cmax(0, start), cmin(float64(nDims-1), end)}
}

// ropeCosSin returns mscale*cos(theta) and mscale*sin(theta) for pair i of a
// token at position p (rope_yarn in ggml-cpu/ops.cpp).
func (p RopeParams) ropeCosSin(pos float64, i int, corr [2]float64) (float64, float64) {
	thetaExtrap := pos * math.Pow(p.FreqBase, -2*float64(i)/float64(p.NDims))
	if p.FreqFactors != nil {
		thetaExtrap /= p.FreqFactors[i]
	}
	thetaInterp := p.FreqScale * thetaExtrap
	theta := thetaInterp
	mscale := p.AttnFactor
	if p.ExtFactor != 0 {
		y := (float64(i) - corr[0]) / cmax(0.001, corr[1]-corr[0])
		ramp := 1 - cmin(1, cmax(0, y))
		mix := ramp * p.ExtFactor
		theta = thetaInterp*(1-mix) + thetaExtrap*mix
		mscale *= 1 + 0.1*math.Log(1/p.FreqScale)
	}
	return math.Cos(theta) * mscale, math.Sin(theta) * mscale
}

func (p RopeParams) rope(a Tensor, pos []int32, sinSign float64) Tensor {
	a.check("RopeExt")
	assertf(p.Mode == RopeNormal || p.Mode == RopeNeox, "RopeExt", "mode %d not supported (only 0 normal, 2 neox)", p.Mode)
	assertf(p.NDims > 0 && p.NDims%2 == 0 && p.NDims <= a.Ne[0], "RopeExt", "nDims=%d must be even and in (0, ne0=%d]", p.NDims, a.Ne[0])
	assertf(len(pos) == a.Ne[2], "RopeExt", "len(pos)=%d != a.ne2=%d", len(pos), a.Ne[2])
	assertf(p.FreqFactors == nil || len(p.FreqFactors) >= p.NDims/2, "RopeExt", "%d freq factors < nDims/2=%d", len(p.FreqFactors), p.NDims/2)
	corr := RopeYarnCorrDims(p.NDims, p.NCtxOrig, p.FreqBase, p.BetaFast, p.BetaSlow)
	half := p.NDims / 2
	out := a.Clone()
	cs := make([]float64, half)
	sn := make([]float64, half)
	for i3 := 0; i3 < a.Ne[3]; i3++ {
		for i2 := 0; i2 < a.Ne[2]; i2++ {
			for i := 0; i < half; i++ {
				cs[i], sn[i] = p.ropeCosSin(float64(pos[i2]), i, corr)
				sn[i] *= sinSign
			}
			for i1 := 0; i1 < a.Ne[1]; i1++ {
				x := a.Row(i1, i2, i3)
				y := out.Row(i1, i2, i3)
				for i := 0; i < half; i++ {
					j0, j1 := 2*i, 2*i+1
					if p.Mode == RopeNeox {
						j0, j1 = i, i+half
					}
					x0, x1 := x[j0], x[j1]
					y[j0] = x0*cs[i] - x1*sn[i]
					y[j1] = x0*sn[i] + x1*cs[i]
				}
			}
		}
	}
	return out
}
