package decoding

import (
	"slices"

	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// needAttendSoftcap lists the gemma family's attention of one query per sequence
// (ggml.AttendOneSoftcap: one node, or two over a long cache) over a cache of type t, the
// kernels of its own module (kernels/cpu/c/gemma/attend.c). That module shadows the common
// attend module for the models whose table entry is gemma: these lookups resolve for them
// alone, and attend_one, attend_blocks and attend_merge do not (the audit says they were
// dropped by shadowing).
func needAttendSoftcap(t ggml.Type) []kernelrt.Need {
	return []kernelrt.Need{
		{Kernel: kernels.KernelCPUGemmaAttendAttendOneSoftcap, Type: ggml.TypeName(t)},
		{Kernel: kernels.KernelCPUGemmaAttendAttendBlocksSoftcap, Type: ggml.TypeName(t)},
		{Kernel: kernels.KernelCPUGemmaAttendAttendMergeSoftcap},
	}
}

// gemmaFamily are the architectures of the table's gemma entry (kernels/models/gemma), whose
// decoders attend through the gemma module: Gemma 2 soft-caps its logits, Gemma 3 (a cap of 0)
// does not, and the module that replaces the common one must serve both.
var gemmaFamily = []string{"gemma2", "gemma3"}

// needAttention is the lookup of the decoders' attention of one query per sequence over a
// cache of type t: the gemma family's soft-capped kernels, or the common ones.
func (m *GGUFModel) needAttention(t ggml.Type) []kernelrt.Need {
	if slices.Contains(gemmaFamily, m.Arch.Name) {
		return needAttendSoftcap(t)
	}
	return needAttend(t)
}
