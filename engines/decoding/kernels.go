package decoding

import (
	"slices"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// KernelNeeds lists the lookups of toy's CPU operations that m's decoders make with a cache of
// type kv (flash: flash attention's layout): the products over each type of m's weight
// matrices (the 8-bit integer product only in a build with AVX-512 VNNI), the norm (needNorm:
// RMS, or GPT-2's LayerNorm), RoPE (for a model that rotates), and the attention, stores,
// products and softmax over the cache (the attention the gemma family's own: needAttention).
// Nothing is looked up on a GPU backend or with ModelOptions.GGMLKernels, where ggml's kernels
// run alone.
func (m *GGUFModel) KernelNeeds(kv KVCacheType, flash bool) []kernelrt.Need {
	if !m.mayOwnKernels {
		return nil
	}
	var ns []kernelrt.Need
	for _, t := range m.multipliedTypes() {
		ns = append(ns, needColumns(t))
		if kquantWeight(t) {
			ns = append(ns, needKQuant(t))
		}
		if packedWeight(t) {
			ns = append(ns, NeedPacked(t))
		}
		if q32Weight(t) && ggml.CPUKernelsQ32() {
			ns = append(ns, needQ32(t)...)
		}
	}
	ns = append(ns, m.needNorm())
	if m.Arch.Positions == transformer.PosRoPE {
		ns = append(ns, needRope...)
	}
	c := kv.ggmlType()
	ns = append(ns, m.needAttention(c)...)
	if !flash {
		ns = append(ns, needStore(c))
	}
	return append(ns, NeedPacked(c), NeedSoftMax)
}

// allKernelNeeds is every lookup KernelNeeds makes for some cache: what a model loaded without
// a gate resolves against the build's table.
func (m *GGUFModel) allKernelNeeds() []kernelrt.Need {
	var ns []kernelrt.Need
	for _, kv := range []KVCacheType{KVF16, KVQ8_0, KVF32} {
		for _, flash := range []bool{false, true} {
			ns = append(ns, m.KernelNeeds(kv, flash)...)
		}
	}
	return ns
}

// UseKernels sets the lookups m's decoders may run toy's kernels for: what the gate's audit
// resolved (kernelrt.Report.Resolved). Decoders made before keep what they had. A model loaded
// on a GPU backend or with ModelOptions.GGMLKernels runs none whatever resolved.
func (m *GGUFModel) UseKernels(resolved []kernelrt.Need) {
	m.kernels = KernelSet{}
	if !m.mayOwnKernels {
		return
	}
	for _, n := range resolved {
		m.kernels[n] = true
	}
	m.repackKQuants()
}

// multipliedTypes are the types, in ggml's order, of the weight matrices the decoders multiply
// through GGUFModel.mm: the layers' and the output head's (token_embd when the head is tied).
func (m *GGUFModel) multipliedTypes() []ggml.Type {
	seen := map[ggml.Type]bool{}
	for _, w := range m.Matrices() {
		seen[w.Type()] = true
	}
	seen[m.Head().Type()] = true
	ts := make([]ggml.Type, 0, len(seen))
	for t := range seen {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}

// builtinKernels is the set a model loaded without a gate starts with: every lookup of its
// decoders that the build's cpu table resolves with the target's own modules.
func (m *GGUFModel) builtinKernels() {
	m.UseKernels(kernelrt.Builtin(kernelrt.BuildTarget(kernels.BackendCPU), m.allKernelNeeds()))
}
