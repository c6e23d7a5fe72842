package oracle

import (
	"fmt"
	"os"

	"github.com/toyml/toy/generated/llamacpp"
)

// QuantizeOptions say how Quantize converts a model; the zero value is llama-quantize's
// defaults (every tensor's type chosen by the mix, already-quantized tensors refused).
type QuantizeOptions struct {
	// AllowRequantize converts tensors that are already block-quantized
	// (llama-quantize --allow-requantize).
	AllowRequantize bool
	// Pure gives every converted tensor the mix's default type (llama-quantize --pure).
	Pure bool
	// Threads is the number of threads (0: the hardware's).
	Threads int
}

// Quantize writes out, the GGUF model at in converted to ftype (llama.cpp's enum llama_ftype:
// 15 is Q4_K_M, 7 is Q8_0, ...) by llama.cpp's own quantizer, llama_model_quantize, which is
// what llama-quantize runs. llama.cpp logs each tensor to stderr.
func Quantize(in, out string, ftype int, opts QuantizeOptions) error {
	st, err := os.Stat(in)
	if err != nil {
		return fmt.Errorf("oracle: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("oracle: %s is not a regular file", in)
	}
	backendOnce.Do(llamacpp.BackendInit)
	p := llamacpp.ModelQuantizeDefaultParams()
	p.Ftype = llamacpp.Ftype(ftype)
	p.AllowRequantize = opts.AllowRequantize
	p.Pure = opts.Pure
	p.Nthread = int32(opts.Threads)
	if llamacpp.ModelQuantize(in, out, &p) != 0 {
		return fmt.Errorf("oracle: llama.cpp could not quantize %s to file type %d (its log on stderr says why)", in, ftype)
	}
	return nil
}
