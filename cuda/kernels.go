package cuda

import (
	"fmt"
	"math"

	"github.com/toyml/toy/generated/cudadrv"
	"github.com/toyml/toy/generated/kernels"
)

// blockFor is the thread-block size for a one-block kernel over n elements: the smallest power
// of two ≥ n, from 32 up to the kernels' limit of 1024.
func blockFor(n int) int {
	b := 32
	for b < n && b < 1024 {
		b *= 2
	}
	return b
}

// checkLogits validates a logits row of n values in buf.
func checkLogits(op string, logits *Buffer, n int) error {
	if logits == nil || logits.ptr == 0 {
		return fmt.Errorf("cuda: %s: no logits buffer", op)
	}
	if n <= 0 || n > math.MaxInt32 || 4*n > logits.size {
		return fmt.Errorf("cuda: %s: %d logits in a buffer of %d bytes", op, n, logits.size)
	}
	return nil
}

// Argmax returns the index of the largest of the n float32 logits in buf (the lowest index on
// ties; NaN never wins), computed on the device by sampling.cu's argmax_f32.
func (d *Device) Argmax(logits *Buffer, n int) (int, error) {
	fn, err := d.function(kernels.KernelCUDASamplingArgmaxF32)
	if err != nil {
		return 0, err
	}
	return d.argmax(fn, logits, n)
}

// argmax launches fn, an argmax_f32 entry point, over the n logits in buf.
func (d *Device) argmax(fn cudadrv.Function, logits *Buffer, n int) (int, error) {
	if err := checkLogits("Argmax", logits, n); err != nil {
		return 0, err
	}
	if err := d.launch(fn, kernels.KernelCUDASamplingArgmaxF32, 1, blockFor(n), logits, int32(n), d.scratch); err != nil {
		return 0, err
	}
	return d.result()
}

// SampleParams select which tokens sampling keeps.
type SampleParams struct {
	// Temperature divides the logits; ≤ 0 means argmax.
	Temperature float32
	// TopK keeps the TopK largest logits (0: all); ties at the boundary are all kept.
	TopK int
	// TopP keeps the smallest set of largest logits whose probability reaches TopP (1: all).
	TopP float32
}

// Sample draws one of the n logits in buf from softmax(logits/Temperature) restricted by TopK
// and TopP, inverting the uniform number u ∈ [0, 1) through the kept tokens' probabilities in
// index order (sampling.cu's sample_f32). The same u always gives the same token.
func (d *Device) Sample(logits *Buffer, n int, p SampleParams, u float32) (int, error) {
	fn, err := d.function(kernels.KernelCUDASamplingSampleF32)
	if err != nil {
		return 0, err
	}
	return d.sample(fn, logits, n, p, u)
}

// sample launches fn, a sample_f32 entry point, as Sample describes.
func (d *Device) sample(fn cudadrv.Function, logits *Buffer, n int, p SampleParams, u float32) (int, error) {
	if err := checkLogits("Sample", logits, n); err != nil {
		return 0, err
	}
	switch {
	case math.IsNaN(float64(p.Temperature)) || math.IsInf(float64(p.Temperature), 0):
		return 0, fmt.Errorf("cuda: Sample: temperature %v", p.Temperature)
	case p.TopK < 0 || p.TopK > math.MaxInt32:
		return 0, fmt.Errorf("cuda: Sample: top-k %d", p.TopK)
	case !(p.TopP > 0 && p.TopP <= 1):
		return 0, fmt.Errorf("cuda: Sample: top-p %v is outside (0, 1]", p.TopP)
	case !(u >= 0 && u < 1):
		return 0, fmt.Errorf("cuda: Sample: u = %v is outside [0, 1)", u)
	}
	if err := d.launch(fn, kernels.KernelCUDASamplingSampleF32, 1, blockFor(n), logits, int32(n), p.Temperature, int32(p.TopK), p.TopP, u, d.scratch); err != nil {
		return 0, err
	}
	return d.result()
}

// result reads the int32 a sampling kernel wrote to the scratch buffer (waiting for it).
func (d *Device) result() (int, error) {
	out := []int32{0}
	if err := Download(d.scratch, out); err != nil {
		return 0, err
	}
	return int(out[0]), nil
}

// AdamW applies one fused AdamW step (adamw.cu's adamw_f32) to the n float32 parameters in x,
// with gradients g and moments m and v (all n float32, updated in place), and params the 7
// floats of ggml_opt_step_adamw: alpha, beta1, beta2, eps, wd, 1/(1-beta1^t), 1/(1-beta2^t).
// The launch is queued; Synchronize or a download waits for it.
func (d *Device) AdamW(x, g, m, v, params *Buffer, n int) error {
	for i, b := range []*Buffer{x, g, m, v} {
		if b == nil || b.ptr == 0 || 4*n > b.size {
			return fmt.Errorf("cuda: AdamW: buffer %d cannot hold %d floats", i, n)
		}
	}
	if params == nil || params.ptr == 0 || params.size < 7*4 {
		return fmt.Errorf("cuda: AdamW: the parameter buffer needs 7 floats")
	}
	if n <= 0 {
		return fmt.Errorf("cuda: AdamW: %d parameters", n)
	}
	fn, err := d.function(kernels.KernelCUDAAdamwAdamwF32)
	if err != nil {
		return err
	}
	const block = 256
	grid := (n + block - 1) / block
	if grid > math.MaxInt32 {
		return fmt.Errorf("cuda: AdamW: %d parameters is too many for one launch", n)
	}
	return d.launch(fn, kernels.KernelCUDAAdamwAdamwF32, grid, block, x, g, m, v, params, int64(n))
}
