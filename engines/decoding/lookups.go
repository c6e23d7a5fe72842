package decoding

import (
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// needAttend lists toy's attention of one query per sequence (ggml.AttendOne: one node, or two
// over a long cache) over a cache of type t.
func needAttend(t ggml.Type) []kernelrt.Need {
	return []kernelrt.Need{
		{Kernel: kernels.KernelCPUAttendAttendOne, Type: ggml.TypeName(t)},
		{Kernel: kernels.KernelCPUAttendAttendBlocks, Type: ggml.TypeName(t)},
		{Kernel: kernels.KernelCPUAttendAttendMerge},
	}
}

var (
	needRMSNormMul = kernelrt.Need{Kernel: kernels.KernelCPURmsNormRmsNormMul}
	needRope       = []kernelrt.Need{{Kernel: kernels.KernelCPURopeRopeTable}, {Kernel: kernels.KernelCPURopeRopeApply}}
)
