package ggml

import (
	"fmt"
	"unsafe"

	"github.com/toyml/toy/generated/ggmlc"
)

// Tensor is a tensor of a Context: an input, a weight, a view or the result of an op. A nil
// *Tensor is the invalid tensor that failed ops return; see Context.Err.
type Tensor struct {
	ctx *Context
	t   ggmlc.Tensor
}

// wrap turns a result of the bindings into a Tensor of this context.
func (c *Context) wrap(t ggmlc.Tensor) *Tensor {
	if t.IsNil() {
		return nil
	}
	return &Tensor{ctx: c, t: t}
}

// setErr records the first error and returns the invalid tensor ops hand back.
func (c *Context) setErr(op string, err error) *Tensor {
	if c.err == nil {
		c.err = fmt.Errorf("ggml: %s: %w", op, err)
	}
	return nil
}

// NewTensor makes a tensor of type typ and shape ne (1 to 4 dimensions, ne[0] innermost).
func (c *Context) NewTensor(typ Type, ne ...int64) *Tensor {
	if err := checkShape(typ, ne); err != nil {
		return c.setErr("NewTensor", err)
	}
	if err := c.room(1); err != nil {
		return c.setErr("NewTensor", err)
	}
	return c.wrap(ggmlc.NewTensor(c.c, typ, len(ne), ne))
}

// maxElements bounds a tensor's element count so sizes never overflow.
const maxElements = int64(1) << 50

func checkShape(typ Type, ne []int64) error {
	if !ValidType(typ) {
		return fmt.Errorf("invalid type %v", typ)
	}
	if len(ne) < 1 || len(ne) > 4 {
		return fmt.Errorf("a tensor has 1 to 4 dimensions, not %d", len(ne))
	}
	n := int64(1)
	for i, d := range ne {
		if d <= 0 {
			return fmt.Errorf("dimension %d is %d; dimensions are positive (shape %v)", i, d, ne)
		}
		if n > maxElements/d {
			return fmt.Errorf("shape %v has too many elements", ne)
		}
		n *= d
	}
	if ne[0]%int64(BlockSize(typ)) != 0 {
		return fmt.Errorf("a %s row holds a multiple of %d elements; shape %v", TypeName(typ), BlockSize(typ), ne)
	}
	return nil
}

// Tensors lists the tensors of the context in creation order.
func (c *Context) Tensors() []*Tensor {
	var ts []*Tensor
	if c.c.IsNil() {
		return nil
	}
	for t := ggmlc.GetFirstTensor(c.c); !t.IsNil(); t = ggmlc.GetNextTensor(c.c, t) {
		ts = append(ts, c.wrap(t))
	}
	return ts
}

// Lookup finds a tensor of the context by name, or returns nil.
func (c *Context) Lookup(name string) *Tensor {
	if c.c.IsNil() {
		return nil
	}
	return c.wrap(ggmlc.GetTensor(c.c, name))
}

// MaxNameLen is the longest tensor name ggml stores (GGML_MAX_NAME less the NUL).
const MaxNameLen = 63

// Raw is the underlying binding handle, for code that drives ggmlc directly.
func (t *Tensor) Raw() ggmlc.Tensor { return t.t }

// TensorID identifies a ggml tensor: the Tensors that wrap one ggml tensor (Graph.Node and
// Tensor.Src make new wrappers) have the same ID. It is comparable, for use as a map key.
type TensorID struct{ t ggmlc.Tensor }

// ID is the tensor's identity.
func (t *Tensor) ID() TensorID { return TensorID{t.t} }

// IsLeaf reports whether no op computes the tensor (an input, a weight, a param).
func (t *Tensor) IsLeaf() bool { return t.t.Op() == ggmlc.OpNone }

// OpName is ggml's name of the op that computes the tensor: "NONE" for a leaf, "MUL_MAT",
// "OUT_PROD", "CPY", ...
func (t *Tensor) OpName() string { return ggmlc.OpName(t.t.Op()) }

// OpLabel names the op that computes t, with the unary or GLU function where it has one:
// "MUL_MAT", "UNARY(SILU)", "GLU(SWIGLU)", "NONE" for a leaf.
func (t *Tensor) OpLabel() string {
	op := ggmlc.OpName(t.t.Op())
	switch t.t.Op() {
	case ggmlc.OpUnary:
		op += "(" + ggmlc.UnaryOpName(ggmlc.GetUnaryOp(t.t)) + ")"
	case ggmlc.OpGlu:
		op += "(" + ggmlc.GluOpName(ggmlc.GetGluOp(t.t)) + ")"
	}
	return op
}

// Context is the context the tensor belongs to.
func (t *Tensor) Context() *Context { return t.ctx }

// Name is the tensor's name ("" if unnamed).
func (t *Tensor) Name() string { return t.t.Name() }

// SetName names the tensor and returns it; a name longer than MaxNameLen bytes is an error
// recorded on the context.
func (t *Tensor) SetName(name string) *Tensor {
	if t == nil {
		return nil
	}
	if len(name) > MaxNameLen {
		return t.ctx.setErr("SetName", fmt.Errorf("name %q is %d bytes; at most %d fit", name, len(name), MaxNameLen))
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return t.ctx.setErr("SetName", fmt.Errorf("name %q contains a NUL byte", name))
		}
	}
	ggmlc.SetName(t.t, name)
	return t
}

// Type is the element type.
func (t *Tensor) Type() Type { return t.t.Type() }

// Ne is the shape in all four dimensions (unused ones are 1).
func (t *Tensor) Ne() [4]int64 { return t.t.Ne() }

// Nb is the stride in bytes of each dimension.
func (t *Tensor) Nb() [4]int { return t.t.Nb() }

// Shape is the shape without trailing dimensions of 1 (at least one dimension).
func (t *Tensor) Shape() []int64 {
	ne := t.Ne()
	n := 4
	for n > 1 && ne[n-1] == 1 {
		n--
	}
	return append([]int64(nil), ne[:n]...)
}

// Len is the number of elements.
func (t *Tensor) Len() int64 { return ggmlc.Nelements(t.t) }

// Rows is the number of rows (elements / ne[0]).
func (t *Tensor) Rows() int64 { return ggmlc.Nrows(t.t) }

// Bytes is the size of the tensor's data in bytes.
func (t *Tensor) Bytes() int { return ggmlc.Nbytes(t.t) }

// DenseRows reports whether the tensor's rows hold their elements side by side and do not
// overlap: the first stride is one element and the second at least a row. ggml's GEMM
// (llamafile_sgemm) aborts the process on a matrix whose row stride is shorter than its row,
// which a transposed view of a single row or column has (a [1, n] transposed is [n, 1] with
// both strides one element), although its first stride looks dense.
func (t *Tensor) DenseRows() bool {
	nb := t.Nb()
	if nb[0] != TypeSize(t.Type()) {
		return false
	}
	row, err := RowSize(t.Type(), t.Ne()[0])
	return err == nil && nb[1] >= row
}

// IsContiguous reports whether the elements are stored densely in order.
func (t *Tensor) IsContiguous() bool { return ggmlc.IsContiguous(t.t) }

// Op is the operation that computes the tensor (OpNone for inputs and weights).
func (t *Tensor) Op() ggmlc.Op { return t.t.Op() }

// Src is the i-th operand of the op that computes the tensor, or nil.
func (t *Tensor) Src(i int) *Tensor {
	if i < 0 || i >= len(t.t.Src()) {
		return nil
	}
	return t.ctx.wrap(t.t.Src()[i])
}

// Flag setters: an input is placed before the graph's other tensors (and is not placed over
// another input), but once its last reader has run the allocator may place a later node over
// it, so it is set again before every compute; an output is kept after compute (an input
// that must keep its values is marked as one too), a param gets a gradient, a loss is what the
// backward pass differentiates.

// SetInput marks the tensor as a graph input and returns it.
func (t *Tensor) SetInput() *Tensor {
	if t != nil {
		ggmlc.SetInput(t.t)
	}
	return t
}

// SetOutput marks the tensor as a graph output and returns it: the graph allocator never frees
// or reuses its memory. A view's source is marked too, since the allocator frees a source when
// its views' consumers are done, whatever the views' flags.
func (t *Tensor) SetOutput() *Tensor {
	if t != nil {
		ggmlc.SetOutput(t.t)
		if src := t.t.ViewSrc(); !src.IsNil() {
			ggmlc.SetOutput(src)
		}
	}
	return t
}

// SetParam marks the tensor as a trainable parameter and returns it. Only leaves (tensors no op
// computes) can be parameters.
func (t *Tensor) SetParam() *Tensor {
	if t == nil {
		return nil
	}
	if t.Op() != ggmlc.OpNone {
		return t.ctx.setErr("SetParam", fmt.Errorf("%s is computed by %s; only leaves can be parameters", t.describe(), ggmlc.OpName(t.Op())))
	}
	ggmlc.SetParam(t.t)
	return t
}

// SetLoss marks the tensor as the loss and returns it; it must be an F32 scalar.
func (t *Tensor) SetLoss() *Tensor {
	if t == nil {
		return nil
	}
	if t.Type() != F32 || t.Len() != 1 {
		return t.ctx.setErr("SetLoss", fmt.Errorf("the loss must be an f32 scalar, not %s", t.describe()))
	}
	ggmlc.SetLoss(t.t)
	return t
}

// IsParam reports whether the tensor is marked as a parameter.
func (t *Tensor) IsParam() bool { return t.t.Flags()&int32(ggmlc.TensorFlagParam) != 0 }

// describe names a tensor in error messages: `"name" f32 [4 3]`.
func (t *Tensor) describe() string {
	if t == nil {
		return "<invalid tensor>"
	}
	name := ""
	if n := t.Name(); n != "" {
		name = fmt.Sprintf("%q ", n)
	}
	return fmt.Sprintf("%s%s %v", name, TypeName(t.Type()), t.Shape())
}

// String describes the tensor: name, type and shape.
func (t *Tensor) String() string { return t.describe() }

// describeNode names a graph node in errors: `MUL_MAT "name" f32 [4 3]`, `UNARY(GELU) ...`.
func describeNode(t ggmlc.Tensor) string {
	return (&Tensor{t: t}).OpLabel() + " " + describeRaw(t)
}

func describeRaw(t ggmlc.Tensor) string { return (&Tensor{t: t}).describe() }

// HasMemory reports whether the tensor's data has been placed in a buffer.
func (t *Tensor) HasMemory() bool {
	return t != nil && !t.t.Buffer().IsNil() && t.t.Data() != nil
}

// DeviceAddress is the address of the tensor's data in a device's memory (a CUDA device pointer
// in a cuda build), for a kernel that reads the tensor in place. It is an error when the tensor
// has no memory yet, is not contiguous, or lies in host memory (every tensor of the CPU backend).
// The address stays valid while the tensor's buffer lives and, for a graph's tensors, until the
// graph is allocated again.
func (t *Tensor) DeviceAddress() (uintptr, error) {
	if err := t.checkIO("DeviceAddress", 0, 0); err != nil {
		return 0, err
	}
	if ggmlc.BackendBufferIsHost(t.t.Buffer()) {
		return 0, fmt.Errorf("ggml: DeviceAddress: %s is in host memory (%s)", t.describe(), ggmlc.BackendBufferName(t.t.Buffer()))
	}
	return uintptr(t.t.Data()), nil
}

// ShareMemory gives t the memory of m, which a backend buffer holds: t must have none yet, be
// no view, and have m's type and shape. A graph node placed so is computed straight into m's
// memory, where the graph allocator leaves it (as an output of a graph, say, that another
// graph or the caller reads without a copy). It is an error when t cannot be placed.
func (t *Tensor) ShareMemory(m *Tensor) error {
	switch {
	case t == nil || m == nil:
		return fmt.Errorf("ggml: ShareMemory: invalid tensor")
	case t.ctx.c.IsNil() || m.ctx.c.IsNil():
		return fmt.Errorf("ggml: ShareMemory: %w", ErrClosed)
	case t.HasMemory() || !t.t.Buffer().IsNil():
		return fmt.Errorf("ggml: ShareMemory: %s already has memory", t.describe())
	case !t.t.ViewSrc().IsNil():
		return fmt.Errorf("ggml: ShareMemory: %s is a view", t.describe())
	case !m.HasMemory():
		return fmt.Errorf("ggml: ShareMemory: %s has no memory", m.describe())
	case t.Type() != m.Type() || t.t.Ne() != m.t.Ne() || t.t.Nb() != m.t.Nb():
		return fmt.Errorf("ggml: ShareMemory: %s and %s differ in type or layout", t.describe(), m.describe())
	}
	if st := ggmlc.BackendTensorAlloc(m.t.Buffer(), t.t, m.t.Data()); st != ggmlc.StatusSuccess {
		return fmt.Errorf("ggml: ShareMemory: %s: %s", t.describe(), st)
	}
	return nil
}

// checkIO validates a copy of n bytes at byte offset off into or out of the tensor.
func (t *Tensor) checkIO(op string, off, n int) error {
	if t == nil {
		return fmt.Errorf("ggml: %s: invalid tensor", op)
	}
	if t.ctx.c.IsNil() {
		return fmt.Errorf("ggml: %s: %w", op, ErrClosed)
	}
	if !t.HasMemory() {
		return fmt.Errorf("ggml: %s: %s has no memory yet (allocate its context on a backend, or allocate its graph)", op, t.describe())
	}
	if !t.IsContiguous() {
		return fmt.Errorf("ggml: %s: %s is not contiguous", op, t.describe())
	}
	if off < 0 || n < 0 || off+n > t.Bytes() {
		return fmt.Errorf("ggml: %s: bytes [%d, %d) are outside %s (%d bytes)", op, off, off+n, t.describe(), t.Bytes())
	}
	return nil
}

func (t *Tensor) write(p unsafe.Pointer, off, n int) {
	if n == 0 {
		return
	}
	ggmlc.BackendTensorSet(t.t, p, off, n)
}

func (t *Tensor) read(p unsafe.Pointer, off, n int) {
	if n == 0 {
		return
	}
	ggmlc.BackendTensorGet(t.t, p, off, n)
}

// SetBytes copies raw data (in the tensor's own type's layout) into the tensor.
func (t *Tensor) SetBytes(data []byte) error {
	if err := t.checkIO("SetBytes", 0, len(data)); err != nil {
		return err
	}
	if len(data) != t.Bytes() {
		return fmt.Errorf("ggml: SetBytes: %d bytes for %s, which holds %d", len(data), t.describe(), t.Bytes())
	}
	if len(data) > 0 {
		t.write(unsafe.Pointer(&data[0]), 0, len(data))
	}
	return nil
}

// ReadBytes copies the tensor's raw data out.
func (t *Tensor) ReadBytes() ([]byte, error) {
	if err := t.checkIO("ReadBytes", 0, 0); err != nil {
		return nil, err
	}
	out := make([]byte, t.Bytes())
	if len(out) > 0 {
		t.read(unsafe.Pointer(&out[0]), 0, len(out))
	}
	return out, nil
}

// SetF32 copies values into an F32 tensor; len(values) must equal its element count.
func (t *Tensor) SetF32(values []float32) error { return setTyped(t, "SetF32", F32, values) }

// F32 copies an F32 tensor's values out.
func (t *Tensor) F32() ([]float32, error) { return getTyped[float32](t, "F32", F32) }

// SetI32 copies values into an I32 tensor; len(values) must equal its element count.
func (t *Tensor) SetI32(values []int32) error { return setTyped(t, "SetI32", I32, values) }

// I32 copies an I32 tensor's values out.
func (t *Tensor) I32() ([]int32, error) { return getTyped[int32](t, "I32", I32) }

// SetF16 copies IEEE half-precision bit patterns into an F16 tensor.
func (t *Tensor) SetF16(bits []uint16) error { return setTyped(t, "SetF16", F16, bits) }

func setTyped[E float32 | int32 | uint16](t *Tensor, op string, typ Type, values []E) error {
	if t == nil {
		return fmt.Errorf("ggml: %s: invalid tensor", op)
	}
	if t.Type() != typ {
		return fmt.Errorf("ggml: %s: %s is not %s", op, t.describe(), TypeName(typ))
	}
	if int64(len(values)) != t.Len() {
		return fmt.Errorf("ggml: %s: %d values for %s, which holds %d", op, len(values), t.describe(), t.Len())
	}
	n := len(values) * int(unsafe.Sizeof(values[0]))
	if err := t.checkIO(op, 0, n); err != nil {
		return err
	}
	if n > 0 {
		t.write(unsafe.Pointer(&values[0]), 0, n)
	}
	return nil
}

func getTyped[E float32 | int32 | uint16](t *Tensor, op string, typ Type) ([]E, error) {
	if t == nil {
		return nil, fmt.Errorf("ggml: %s: invalid tensor", op)
	}
	out := make([]E, t.Len())
	if err := readTyped(t, op, typ, out); err != nil {
		return nil, err
	}
	return out, nil
}

// ReadF32 copies an F32 tensor's values into dst, whose length must be its element count: F32
// without the allocation, for a caller that reuses its buffer every step.
func (t *Tensor) ReadF32(dst []float32) error { return readTyped(t, "ReadF32", F32, dst) }

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

func readTyped[E float32 | int32 | uint16](t *Tensor, op string, typ Type, dst []E) error {
	if t == nil {
		return fmt.Errorf("ggml: %s: invalid tensor", op)
	}
	if t.Type() != typ {
		return fmt.Errorf("ggml: %s: %s is not %s", op, t.describe(), TypeName(typ))
	}
	if int64(len(dst)) != t.Len() {
		return fmt.Errorf("ggml: %s: room for %d values from %s, which holds %d", op, len(dst), t.describe(), t.Len())
	}
	n := len(dst) * int(unsafe.Sizeof(E(0)))
	if err := t.checkIO(op, 0, n); err != nil {
		return err
	}
	if n > 0 {
		t.read(unsafe.Pointer(&dst[0]), 0, n)
	}
	return nil
}
