package ggml

import (
	"fmt"
	"unsafe"
)

// ReadF32Into copies an F32 tensor's values into dst, which must hold exactly its element
// count, without allocating (for outputs read every step, such as a decoder's logits).
func (t *Tensor) ReadF32Into(dst []float32) error {
	if t == nil {
		return fmt.Errorf("ggml: ReadF32Into: invalid tensor")
	}
	if t.Type() != F32 {
		return fmt.Errorf("ggml: ReadF32Into: %s is not f32", t.describe())
	}
	if int64(len(dst)) != t.Len() {
		return fmt.Errorf("ggml: ReadF32Into: %d values for %s, which holds %d", len(dst), t.describe(), t.Len())
	}
	n := 4 * len(dst)
	if err := t.checkIO("ReadF32Into", 0, n); err != nil {
		return err
	}
	if n > 0 {
		t.read(unsafe.Pointer(&dst[0]), 0, n)
	}
	return nil
}
