package ggml

import (
	"fmt"
	"unsafe"

	"github.com/toyml/toy/generated/cpuops"
	"github.com/toyml/toy/generated/ggmlc"
)

// KQuantWeights is a q4_K or q6_K weight matrix rewritten into the layout of toy's k-quant
// kernel (kernels/cpu/c/mul_mat_kquant.c: 16 rows interleaved, scales and mins unpacked to
// bytes), which only MulMatKQuant reads.
//
// The repacked bytes are deliberately not a *Tensor: no ggml operation can be handed them, so
// none can read the layout as ggml's blocks (the compiler refuses it). They live in a tensor of
// a context of their own that no caller sees; MulMatKQuant passes it to the kernel together
// with a description of the weights (type, shape, a check value), which the kernel verifies
// against the tensor's size before it reads anything.
type KQuantWeights struct {
	typ  Type
	k, n int64
	ctx  *Context
	buf  *Buffer
	t    *Tensor // i8 [KquantBytes]
}

// kquantParams is mul_mat_kquant.c's struct toy_kquant_params.
type kquantParams struct {
	Magic int32
	Type  int32
	K, N  int64
}

// kquantMagic is mul_mat_kquant.c's KQUANT_MAGIC.
const kquantMagic = 0x6b717431

// KQuantFast reports whether toy's k-quant kernel is compiled with AVX-512 VNNI in this build;
// elsewhere it is a plain loop, slower than ggml's kernels, and callers keep ggml's.
func KQuantFast() bool { return cpuops.KquantFast() == 1 }

// KQuantRepackable says why RepackKQuant cannot take w, or nil when it can: w q4_K or q6_K,
// 2-D, rows contiguous, in host memory.
func KQuantRepackable(w *Tensor) error {
	if w == nil {
		return fmt.Errorf("no weights")
	}
	if t := w.Type(); t != Q4_K && t != Q6_K {
		return fmt.Errorf("weights %s: want q4_K or q6_K", w.describe())
	}
	ne := w.Ne()
	if ne[2] != 1 || ne[3] != 1 || !w.IsContiguous() {
		return fmt.Errorf("weights %s: want a contiguous 2-D matrix", w.describe())
	}
	if cpuops.KquantBytes(int(w.Type()), ne[0], ne[1]) < 0 {
		return fmt.Errorf("weights %s: rows of whole super-blocks of 256 values", w.describe())
	}
	return nil
}

// RepackKQuant copies the q4_K or q6_K matrix w (as KQuantRepackable takes it) into a buffer of
// backend b in the layout of toy's k-quant kernel. w is left as it was (other operations, a
// row lookup of a tied embedding, may still read it). Close frees the copy, after the last
// graph that reads it has run.
func RepackKQuant(b *Backend, w *Tensor) (*KQuantWeights, error) {
	if err := KQuantRepackable(w); err != nil {
		return nil, fmt.Errorf("ggml: RepackKQuant: %w", err)
	}
	if b == nil || !b.IsCPU() {
		return nil, fmt.Errorf("ggml: RepackKQuant: %s: toy's k-quant kernel runs on the CPU backend only", w.describe())
	}
	ne := w.Ne()
	size := cpuops.KquantBytes(int(w.Type()), ne[0], ne[1])
	src, err := w.ReadBytes()
	if err != nil {
		return nil, fmt.Errorf("ggml: RepackKQuant: %s: %w", w.describe(), err)
	}
	dst := make([]byte, size)
	if cpuops.KquantRepack(int(w.Type()), unsafe.Pointer(&src[0]), ne[0], ne[1], unsafe.Pointer(&dst[0])) != 0 {
		return nil, fmt.Errorf("ggml: RepackKQuant: %s: the kernel refused the shape", w.describe())
	}
	ctx, err := NewContext(ContextOptions{MaxTensors: 1})
	if err != nil {
		return nil, err
	}
	t := ctx.NewTensor(I8, size).SetName(w.Name() + ".toy-kquant")
	if t == nil {
		err := ctx.Err()
		ctx.Close()
		return nil, err
	}
	buf, err := b.Alloc(ctx)
	if err != nil {
		ctx.Close()
		return nil, err
	}
	if err := t.SetBytes(dst); err != nil {
		buf.Close()
		ctx.Close()
		return nil, err
	}
	return &KQuantWeights{typ: w.Type(), k: ne[0], n: ne[1], ctx: ctx, buf: buf, t: t}, nil
}

// Type is the ggml type the weights had: q4_K or q6_K.
func (w *KQuantWeights) Type() Type { return w.typ }

// Ne is the shape of the weights: [k, n].
func (w *KQuantWeights) Ne() [2]int64 { return [2]int64{w.k, w.n} }

// Bytes is the size of the repacked copy.
func (w *KQuantWeights) Bytes() int64 { return w.t.Len() }

// Close frees the repacked copy. It is safe to call more than once and on nil.
func (w *KQuantWeights) Close() error {
	if w == nil || w.ctx == nil {
		return nil
	}
	w.buf.Close()
	err := w.ctx.Close()
	w.ctx, w.buf, w.t = nil, nil, nil
	return err
}

// MulMatKQuant is MulMat(w, x) for repacked k-quant weights, computed by toy's kernel
// (kernels/cpu/c/mul_mat_kquant.c) as a ggml custom operation: x f32 [k, m] (2-D, rows
// contiguous, any m), the result f32 [n, m]. The kernel quantizes x as ggml's q8_K (the scale,
// the rounding) and sums every product in integers, as ggml's own k-quant kernels do, with
// AVX-512 VNNI, reading each weight once for up to 8 columns (generation) or in tiles of 16 rows
// by 8 columns (a prompt). Only the CPU backend computes it, and autodiff cannot differentiate
// it.
func (c *Context) MulMatKQuant(w *KQuantWeights, x *Tensor) *Tensor {
	if w == nil || w.ctx == nil {
		return c.setErr("MulMatKQuant", fmt.Errorf("the repacked weights are closed"))
	}
	return c.op("MulMatKQuant", []*Tensor{w.t, x}, 1, func() error { return MulMatKQuantFits(w, x) }, func() ggmlc.Tensor {
		user := pinned(c, kquantParams{Magic: kquantMagic, Type: int32(w.typ), K: w.k, N: w.n})
		return ggmlc.Custom4D(c.c, ggmlc.TypeF32, w.n, x.Ne()[1], 1, 1, []ggmlc.Tensor{w.t.t, x.t}, 2,
			cpuops.MulMatKquantAddress(), allThreads, user)
	})
}

// MulMatKQuantFits says why MulMatKQuant cannot take w and x, or nil when it can.
func MulMatKQuantFits(w *KQuantWeights, x *Tensor) error {
	if w == nil || w.ctx == nil {
		return fmt.Errorf("the repacked weights are closed")
	}
	if err := needType(x, F32, "columns"); err != nil {
		return err
	}
	xn := x.Ne()
	if xn[2] != 1 || xn[3] != 1 {
		return fmt.Errorf("%s: want 2-D columns", x.describe())
	}
	if xn[0] != w.k {
		return fmt.Errorf("%s: columns of %d values, the weights' rows hold %d", x.describe(), xn[0], w.k)
	}
	if x.Nb()[0] != 4 {
		return fmt.Errorf("%s: want columns with contiguous elements", x.describe())
	}
	return nil
}
