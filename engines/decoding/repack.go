package decoding

import (
	"fmt"
	"maps"
	"slices"

	"github.com/toyml/toy/ggml"
)

// mayRepack says whether the file's tensor info is one repackKQuants may copy (a matrix
// ggml.KQuantRepackableShape takes, of a type kquantWeight lists), in a build and on a backend
// where toy's k-quant kernel may run. OpenModel maps these from the file
// (ggml.MapOptions.FileBacked) when it reads the rest, so that once copied the original costs
// no memory (repackKQuants releases it) unless prompts still read it (promptsReadOriginal:
// then it is the file's pages in the page cache, which the system may drop and read again, not
// memory the process allocated).
func (m *GGUFModel) mayRepack(info ggml.GGUFTensor) bool {
	return m.mayOwnKernels && kquantWeight(info.Type) && ggml.KQuantRepackableShape(info.Type, info.Ne) == nil
}

// promptsReadOriginal says whether prompts multiply w's original rather than its repacked
// copy: weights of a type both the k-quant kernel and the 8-bit integer product take (q4_0,
// q5_0 and q5_1), where the latter resolved, whose GEMM (q32Prompt) runs many columns faster
// than the k-quant kernel's tiles over the copy. Such an original stays mapped, not released.
func (m *GGUFModel) promptsReadOriginal(w *ggml.Tensor) bool {
	t := w.Type()
	return kquantWeight(t) && q32Weight(t) && m.kernels.Has(needQ32(t)...)
}

// repackKQuants gives every weight matrix the decoders multiply (the layers' and the head) of
// a type whose k-quant lookup resolved a copy in the layout of toy's kernel, once: GGUFModel.MulMat
// multiplies through the copy from then on. A matrix the kernel cannot take keeps ggml's kernel;
// a failed copy is a warning, not an error. The copies of one call share one buffer
// (ggml.RepackKQuants), kept until Close (a decoder made under an earlier resolution may still
// run them).
//
// The weights are held once: the file's tensor of each copied matrix is mapped from the file,
// not read (mayRepack); the copy is made from the file's bytes read a few MiB at a time, and the
// original released (ggml.MappedGGUF.Release) unless prompts read it (promptsReadOriginal), so
// its pages never enter the process. It stays a valid tensor for whatever else reads it (the row
// lookup of a tied token_embd, LoRA merges, export, training, ggml's product under a
// resolution without the k-quant lookup): those page the bytes they read back in from the page
// cache or the file, and no reader needs to know.
//
// Nothing but toy's kernel can read a copy: it is a ggml.KQuantWeights, not a ggml.Tensor, so
// no ggml operation can be built over it, and MulMat reaches it only through m.kquant, keyed by the
// original.
func (m *GGUFModel) repackKQuants() {
	var ws []*ggml.Tensor
	seen := map[*ggml.Tensor]bool{}
	for _, w := range append([]*ggml.Tensor{m.Head()}, slices.Collect(maps.Values(m.Matrices()))...) {
		if w == nil || seen[w] || m.kquant[w] != nil || !kquantWeight(w.Type()) || !m.kernels.Has(needKQuant(w.Type())) ||
			ggml.KQuantRepackable(w) != nil {
			continue
		}
		seen[w] = true
		ws = append(ws, w)
	}
	if len(ws) == 0 {
		return
	}
	set, err := ggml.RepackKQuants(m.backend, ws, m.mapped)
	if err != nil {
		m.Warnings = append(m.Warnings, fmt.Sprintf("toy's k-quant kernel not used: %v", err))
		return
	}
	m.kquantSets = append(m.kquantSets, set)
	if m.kquant == nil {
		m.kquant = map[*ggml.Tensor]*ggml.KQuantWeights{}
	}
	for _, w := range ws {
		m.kquant[w] = set.Weights(w)
		if !m.promptsReadOriginal(w) {
			m.mapped.Release(w) // nothing where w was read, not mapped
		}
	}
}

// closeKQuants frees the repacked copies.
func (m *GGUFModel) closeKQuants() {
	for _, s := range m.kquantSets {
		s.Close()
	}
	m.kquant, m.kquantSets = nil, nil
}
