package cuda

import (
	"fmt"
	"math"

	"github.com/toyml/toy/generated/cudadrv"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/sampleparams"
	"github.com/toyml/toy/kernelrt"
)

// DeviceSampling says which of toy's sampling kernels generating with p dispatches on the
// device: argmax_f32 when greedy; sample_f32 when drawing with only what that kernel computes
// as engines/sample does (a temperature, and top-k or top-p but not both: the kernel keeps
// the larger of the two sets where the sampler chain keeps top-p within top-k; no min-p; no
// penalty, which reads the history, and no logit bias: Params.AdjustsLogits). Anything
// else samples on the host, and the zero Dispatch says so.
func DeviceSampling(p sampleparams.Params) kernelrt.Dispatch {
	if p.AdjustsLogits() {
		return kernelrt.Dispatch{}
	}
	if p.Temperature == 0 {
		return kernelrt.Dispatch{Argmax: true}
	}
	if p.MinP > 0 || p.TopK > 0 && p.TopP < 1 {
		return kernelrt.Dispatch{}
	}
	return kernelrt.Dispatch{Sample: true}
}

// TokenSampler samples tokens on the device from logits ggml's CUDA backend left in device
// memory, read in place (ggml's backend and this package share the device's primary context):
// only the chosen token id comes back to the host. Its draws follow the host sampler's
// distribution, sample.Sampler.Probs, taking their uniform numbers from the sampler's generator
// (sample.Sampler.Uniform) and inverting them in token order as sample.Sampler.Draw does; so
// given the same seed, Draw(Probs(logits)) on the host picks the same tokens (up to float32
// rounding at the boundaries between two tokens).
type TokenSampler struct {
	d      *Device
	s      HostSampler
	greedy bool
	kernel kernels.KernelID
	fn     cudadrv.Function
	p      SampleParams
}

// HostSampler is the host's sampler a TokenSampler follows (engines/sample's *Sampler): its
// parameters, and the uniform numbers in [0, 1) its draws invert, one per token.
type HostSampler interface {
	Params() sampleparams.Params
	Uniform() float64
}

// NewTokenSampler prepares sampling with s's parameters, which DeviceSampling must accept. The
// kernel is looked up as the start-up gate audited it (kernelrt.Lookup): in the effective
// modules of entry, the model's entry of the device's target; with a nil entry (a model the
// table does not declare), in its own module of the target.
func (d *Device) NewTokenSampler(entry *kernels.Model, s HostSampler) (*TokenSampler, error) {
	p := s.Params()
	use := DeviceSampling(p)
	ts := &TokenSampler{d: d, s: s, greedy: use.Argmax}
	switch {
	case use.Argmax:
		ts.kernel = kernels.KernelCUDASamplingArgmaxF32
	case use.Sample:
		ts.kernel = kernels.KernelCUDASamplingSampleF32
		ts.p = SampleParams{Temperature: float32(p.Temperature), TopK: p.TopK, TopP: float32(p.TopP)}
	default:
		return nil, fmt.Errorf("cuda: sampling with %+v runs on the host: toy's sampling kernel computes temperature with top-k or top-p, without min-p, a penalty or a logit bias", p)
	}
	mod := ts.kernel.Module()
	if entry != nil {
		var ok bool
		if mod, ok = kernelrt.Lookup(d.target, entry, ts.kernel); !ok {
			return nil, fmt.Errorf("cuda: target %s, model %s: %s does not resolve", d.target.Name, entry.Name, ts.kernel)
		}
	}
	var err error
	if ts.fn, err = d.functionIn(mod, ts.kernel); err != nil {
		return nil, err
	}
	return ts, nil
}

// Kernel is the kernel the sampler launches.
func (ts *TokenSampler) Kernel() kernels.KernelID { return ts.kernel }

// Sample picks a token from logits, a float32 tensor of one row (its first Len values are the
// vocabulary's logits) in device memory.
func (ts *TokenSampler) Sample(logits *ggml.Tensor) (int32, error) {
	if logits.Type() != ggml.F32 {
		return 0, fmt.Errorf("cuda: TokenSampler: logits of type %s, not f32", ggml.TypeName(logits.Type()))
	}
	addr, err := logits.DeviceAddress()
	if err != nil {
		return 0, err
	}
	return ts.SampleAt(addr, int(logits.Len()))
}

// SampleAt picks a token from the n float32 logits at device address addr, which the caller
// keeps valid for the call.
func (ts *TokenSampler) SampleAt(addr uintptr, n int) (int32, error) {
	// A view of memory the caller owns: never freed here.
	view := &Buffer{d: ts.d, ptr: uint64(addr), size: 4 * n}
	var tok int
	var err error
	if ts.greedy {
		tok, err = ts.d.argmax(ts.fn, view, n)
	} else {
		u := float32(ts.s.Uniform())
		if u >= 1 { // float64 just below 1 rounds up
			u = math.Nextafter32(1, 0)
		}
		tok, err = ts.d.sample(ts.fn, view, n, ts.p, u)
	}
	return int32(tok), err
}
