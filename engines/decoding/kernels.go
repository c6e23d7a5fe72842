package decoding

import (
	"slices"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// The decoders reach toy's own CPU operations through the kernel table (generated/kernels,
// kernels/cpu): each use of one is a lookup (a kernelrt.Need), KernelNeeds lists those a model's
// decoders make, the table resolves them (by default the build's own modules; the commands'
// gate the model's entry, which may refuse), and a decoder runs toy's kernel for a lookup that
// resolved and ggml's operation for any other. The lookups below are the only ones the
// decoders make: what the gate audits is what runs.

// needColumns is toy's product of a few columns (ggml.MulMatCols) over weights of type t.
func needColumns(t ggml.Type) kernelrt.Need {
	return kernelrt.Need{Kernel: kernels.KernelCPUMulMatColsMulMatCols, Type: ggml.TypeName(t)}
}

// NeedPacked is toy's packed GEMM (ggml.MulMatPacked) over an operand a of type t: a lookup
// the decoders and training's graphs (engines/training) both make.
func NeedPacked(t ggml.Type) kernelrt.Need {
	return kernelrt.Need{Kernel: kernels.KernelCPUMulMatPackedMulMatPacked, Type: ggml.TypeName(t)}
}

// needQ32 lists toy's 8-bit integer product (ggml.MulMatQ32) over weights of type t: the
// rounding of the columns and the product.
func needQ32(t ggml.Type) []kernelrt.Need {
	return []kernelrt.Need{{Kernel: kernels.KernelCPUMulMatQ32QuantizeQ32}, {Kernel: kernels.KernelCPUMulMatQ32MulMatQ32, Type: ggml.TypeName(t)}}
}

// needStore is toy's store of new values into a transposed value cache of type t
// (ggml.StoreTransposed).
func needStore(t ggml.Type) kernelrt.Need {
	return kernelrt.Need{Kernel: kernels.KernelCPUStoreStoreTransposed, Type: ggml.TypeName(t)}
}

// NeedSoftMax is toy's softmax of attention's scores (ggml.SoftMaxCPU), which the decoders'
// unfused attention and training's attention look up.
var NeedSoftMax = kernelrt.Need{Kernel: kernels.KernelCPUSoftMaxSoftMax}

// packedWeight says whether the decoders multiply a prompt by weights of type t with toy's
// packed GEMM at all: the float types; block-quantized weights stay with ggml's integer kernels.
func packedWeight(t ggml.Type) bool { return t == ggml.F32 || t == ggml.F16 || t == ggml.BF16 }

// q32Weight says whether the decoders multiply by weights of type t with toy's 8-bit integer
// product where its few-column product does not take them (a prompt, or a step of a type
// MulMatCols does not read): the block types of 32 values.
func q32Weight(t ggml.Type) bool {
	return t == ggml.Q8_0 || t == ggml.Q4_0 || t == ggml.Q5_0 || t == ggml.Q5_1
}

// q32Prompt says whether W·x multiplies more than ggml.MulMatColsMax columns (a prompt) by q4_0
// or q5_1 weights that toy's 8-bit integer GEMM (ggml.MulMatQ32) takes: it runs them faster than
// the k-quant kernel's tiles over the repacked copy, which take the fewer columns of a step
// (one core, 2048×2048 q4_0 in the L3 cache, 2026-12-06: by 128 columns 311–329 GMAC/s against
// 265–276; by 16 columns 170–184 against 266–285).
func (m *GGUFModel) q32Prompt(w, x *ggml.Tensor) bool {
	return x.Ne()[1] > ggml.MulMatColsMax && m.promptsReadOriginal(w) && m.ownQ32(w, x)
}

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
