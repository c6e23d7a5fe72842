package ggml

import . "github.com/toyml/toy/specs/spec"

// Ops are ggml's core functions (ggml.h): contexts, tensor creation and inspection, the tensor
// operations that build a graph, graphs and automatic differentiation, type traits and
// quantization.
//
// Shapes are written innermost dimension first, as ggml stores them in Tensor.Ne: a matrix
// [K, M] has M rows of K elements. An operation does not compute anything: it adds a node to
// the graph and returns the (not yet computed) result tensor, made in ctx.
//
//kernelgen:functions prefix=ggml_
type Ops interface {
	// ---- contexts ----

	// Init creates a context whose arena is sized and placed by params. It returns nil when the
	// arena cannot be allocated.
	Init(params InitParams) Context
	// Reset forgets every tensor and graph in ctx, keeping its arena for reuse.
	Reset(ctx Context)
	// Free releases ctx and everything in it (but not tensor data in backend buffers).
	Free(ctx Context)
	// UsedMem is the number of arena bytes in use in ctx.
	UsedMem(ctx Const[Context]) Size
	// GetNoAlloc reports whether new tensors in ctx get no data (metadata only).
	GetNoAlloc(ctx Context) bool
	// SetNoAlloc sets whether new tensors in ctx get no data (metadata only).
	SetNoAlloc(ctx Context, noAlloc bool)
	// GetMemSize is the size of ctx's arena in bytes.
	GetMemSize(ctx Const[Context]) Size
	// GetMaxTensorSize is the size in bytes of the largest tensor in ctx.
	GetMaxTensorSize(ctx Const[Context]) Size
	// TensorOverhead is the arena bytes one tensor's metadata takes; size a NoAlloc context as
	// n*TensorOverhead().
	TensorOverhead() Size
	// GraphOverhead is the arena bytes a graph of the default size (2048 nodes, no gradients)
	// takes.
	GraphOverhead() Size
	// GraphOverheadCustom is the arena bytes a graph of size nodes takes, with room for
	// gradients when grads is true (see NewGraphCustom).
	GraphOverheadCustom(size Size, grads bool) Size

	// ---- creating, finding and naming tensors ----

	// NewTensor makes a tensor of type typ with nDims dimensions whose sizes are ne[0:nDims]
	// (innermost first).
	NewTensor(ctx Context, typ Type, nDims Int, ne Const[[]int64]) Tensor
	// NewTensor1D makes a vector of ne0 elements.
	NewTensor1D(ctx Context, typ Type, ne0 int64) Tensor
	// NewTensor2D makes a matrix of ne1 rows of ne0 elements.
	NewTensor2D(ctx Context, typ Type, ne0, ne1 int64) Tensor
	// NewTensor3D makes a 3-D tensor of shape [ne0, ne1, ne2].
	NewTensor3D(ctx Context, typ Type, ne0, ne1, ne2 int64) Tensor
	// NewTensor4D makes a 4-D tensor of shape [ne0, ne1, ne2, ne3].
	NewTensor4D(ctx Context, typ Type, ne0, ne1, ne2, ne3 int64) Tensor
	// DupTensor makes a new tensor with src's type and shape (not its data or name).
	DupTensor(ctx Context, src Const[Tensor]) Tensor
	// ViewTensor makes a view of all of src: same type, shape, strides and data.
	ViewTensor(ctx Context, src Tensor) Tensor
	// GetFirstTensor is the first tensor made in ctx, or nil; with GetNextTensor it walks all
	// tensors of a context (e.g. the weights of a GGUF file).
	GetFirstTensor(ctx Const[Context]) Tensor
	// GetNextTensor is the tensor made in ctx after t, or nil after the last.
	GetNextTensor(ctx Const[Context], t Tensor) Tensor
	// GetTensor finds the tensor of ctx with the given name, or returns nil.
	GetTensor(ctx Context, name string) Tensor
	// GetName is t's name ("" when unnamed).
	GetName(t Const[Tensor]) string
	// SetName names t (truncated to 63 bytes) and returns t.
	SetName(t Tensor, name string) Tensor
	// GetData is the address of t's data; only meaningful for host memory.
	GetData(t Const[Tensor]) Ptr
	// GetUnaryOp is the activation of an OpUnary node.
	GetUnaryOp(t Const[Tensor]) UnaryOp
	// GetGluOp is the gating of an OpGlu node.
	GetGluOp(t Const[Tensor]) GluOp
	// SetInput marks t as a graph input (TensorFlagInput): allocators place it first, apart
	// from other tensors, so it can be filled before compute.
	SetInput(t Tensor)
	// SetOutput marks t as a graph output (TensorFlagOutput): allocators never reuse its
	// memory, so it can be read after compute.
	SetOutput(t Tensor)
	// SetParam marks the leaf t as a trainable parameter (TensorFlagParam):
	// BuildBackwardExpand computes its gradient.
	SetParam(t Tensor)
	// SetLoss marks the scalar F32 t as a loss (TensorFlagLoss) that backpropagation starts
	// from.
	SetLoss(t Tensor)
	// SetZero zeroes t's data in place (host memory only) and returns t.
	SetZero(t Tensor) Tensor

	// ---- inspecting tensors ----

	// Nelements is the number of elements of t (the product of Ne).
	Nelements(t Const[Tensor]) int64
	// Nrows is the number of rows of t (Ne[1]*Ne[2]*Ne[3]).
	Nrows(t Const[Tensor]) int64
	// Nbytes is the size of t's data in bytes, strides included.
	Nbytes(t Const[Tensor]) Size
	// NbytesPad is Nbytes rounded up to ggml's memory alignment.
	NbytesPad(t Const[Tensor]) Size
	// NDims is the number of dimensions of t, ignoring trailing dimensions of size 1 (1 for a
	// scalar).
	NDims(t Const[Tensor]) Int
	// ElementSize is the size of one element (one block for quantized types) in bytes.
	ElementSize(t Const[Tensor]) Size
	// IsContiguous reports whether t's elements are stored densely in order.
	IsContiguous(t Const[Tensor]) bool
	// IsTransposed reports whether t's first two dimensions are swapped in memory.
	IsTransposed(t Const[Tensor]) bool
	// IsPermuted reports whether t's dimensions are stored out of order.
	IsPermuted(t Const[Tensor]) bool
	// IsEmpty reports whether t has no elements.
	IsEmpty(t Const[Tensor]) bool
	// IsScalar reports whether t has exactly one element.
	IsScalar(t Const[Tensor]) bool
	// IsVector reports whether t is one-dimensional.
	IsVector(t Const[Tensor]) bool
	// IsMatrix reports whether t has at most two dimensions.
	IsMatrix(t Const[Tensor]) bool
	// AreSameShape reports whether t0 and t1 have the same Ne.
	AreSameShape(t0, t1 Const[Tensor]) bool
	// AreSameStride reports whether t0 and t1 have the same Nb.
	AreSameStride(t0, t1 Const[Tensor]) bool
	// CanRepeat reports whether t0 can be broadcast (repeated) to t1's shape: each dimension of
	// t1 is a multiple of t0's.
	CanRepeat(t0, t1 Const[Tensor]) bool

	// ---- element-wise arithmetic ----

	// Dup returns a copy of a.
	Dup(ctx Context, a Tensor) Tensor
	// Add returns a+b; b is broadcast over a (each dimension of a a multiple of b's).
	Add(ctx Context, a, b Tensor) Tensor
	// AddInplace adds b to a in place and returns a view of a (not differentiable).
	AddInplace(ctx Context, a, b Tensor) Tensor
	// AddCast returns a+b with the result in type typ.
	AddCast(ctx Context, a, b Tensor, typ Type) Tensor
	// AddID adds to each row a[:, i1, i2] the row b[:, ids[i1, i2]] (ids is I32).
	AddID(ctx Context, a, b, ids Tensor) Tensor
	// Add1 returns a plus the scalar b.
	//kernelgen:c ggml_add1
	Add1(ctx Context, a, b Tensor) Tensor
	// Acc returns a copy of a with b added into the view of a given by byte strides nb1, nb2,
	// nb3 and byte offset; it can serve as a differentiable concatenation.
	Acc(ctx Context, a, b Tensor, nb1, nb2, nb3, offset Size) Tensor
	// Sub returns a-b; b must have a's shape for the backward pass to work.
	Sub(ctx Context, a, b Tensor) Tensor
	// Mul returns the element-wise product a*b; b is broadcast over a.
	Mul(ctx Context, a, b Tensor) Tensor
	// MulInplace multiplies a by b in place and returns a view of a (not differentiable).
	MulInplace(ctx Context, a, b Tensor) Tensor
	// Div returns a/b element-wise; b must have a's shape for the backward pass to work.
	Div(ctx Context, a, b Tensor) Tensor
	// Sqr returns a² element-wise.
	Sqr(ctx Context, a Tensor) Tensor
	// Sqrt returns √a element-wise.
	Sqrt(ctx Context, a Tensor) Tensor
	// Log returns the natural logarithm of a element-wise.
	Log(ctx Context, a Tensor) Tensor
	// Exp returns e^a element-wise.
	Exp(ctx Context, a Tensor) Tensor
	// Expm1 returns e^a - 1 element-wise.
	//kernelgen:c ggml_expm1
	Expm1(ctx Context, a Tensor) Tensor
	// Softplus returns log(1+e^a) element-wise.
	Softplus(ctx Context, a Tensor) Tensor
	// Sin returns sin(a) element-wise.
	Sin(ctx Context, a Tensor) Tensor
	// Cos returns cos(a) element-wise.
	Cos(ctx Context, a Tensor) Tensor
	// Abs returns |a| element-wise.
	Abs(ctx Context, a Tensor) Tensor
	// Sgn returns the sign of a (-1, 0 or 1) element-wise.
	Sgn(ctx Context, a Tensor) Tensor
	// Neg returns -a.
	Neg(ctx Context, a Tensor) Tensor
	// Step returns 1 where a > 0 and 0 elsewhere.
	Step(ctx Context, a Tensor) Tensor
	// Floor rounds a down element-wise.
	Floor(ctx Context, a Tensor) Tensor
	// Ceil rounds a up element-wise.
	Ceil(ctx Context, a Tensor) Tensor
	// Round rounds a to the nearest integer element-wise.
	Round(ctx Context, a Tensor) Tensor
	// Trunc rounds a towards zero element-wise.
	Trunc(ctx Context, a Tensor) Tensor
	// Scale returns a*s.
	Scale(ctx Context, a Tensor, s float32) Tensor
	// ScaleInplace multiplies a by s in place and returns a view of a (not differentiable).
	ScaleInplace(ctx Context, a Tensor, s float32) Tensor
	// ScaleBias returns a*s + b for scalars s and b.
	ScaleBias(ctx Context, a Tensor, s, b float32) Tensor
	// Clamp limits a to [minVal, maxVal]; the result is a view of a (in place, so it cannot be
	// differentiated).
	Clamp(ctx Context, a Tensor, minVal, maxVal float32) Tensor
	// Fill returns a tensor of a's shape with every element c.
	Fill(ctx Context, a Tensor, c float32) Tensor

	// ---- reductions ----

	// Sum returns the sum of all elements of a as a scalar.
	Sum(ctx Context, a Tensor) Tensor
	// SumRows sums each row: [n, b, c, d] → [1, b, c, d].
	SumRows(ctx Context, a Tensor) Tensor
	// Cumsum returns the running sum along each row.
	Cumsum(ctx Context, a Tensor) Tensor
	// Mean averages each row: [n, b, c, d] → [1, b, c, d]. Its backward pass is fragile;
	// Scale(SumRows(a), 1/n) is safer for training.
	Mean(ctx Context, a Tensor) Tensor
	// Argmax returns the index of the largest element of each row of the matrix a as an I32
	// vector.
	Argmax(ctx Context, a Tensor) Tensor
	// CountEqual returns the number of equal elements of a and b as an I64 scalar.
	CountEqual(ctx Context, a, b Tensor) Tensor

	// ---- activations and gated units ----

	// Unary applies the activation op element-wise.
	Unary(ctx Context, a Tensor, op UnaryOp) Tensor
	// Tanh returns tanh(a) (no backward pass on CPU).
	Tanh(ctx Context, a Tensor) Tensor
	// Elu returns the exponential linear unit of a.
	Elu(ctx Context, a Tensor) Tensor
	// Relu returns max(a, 0).
	Relu(ctx Context, a Tensor) Tensor
	// LeakyRelu returns a where a > 0 and a*negativeSlope elsewhere; inplace makes the result a
	// view of a.
	LeakyRelu(ctx Context, a Tensor, negativeSlope float32, inplace bool) Tensor
	// Sigmoid returns 1/(1+e^-a) (no backward pass).
	Sigmoid(ctx Context, a Tensor) Tensor
	// Gelu returns GELU(a), tanh approximation, table-based on CPU (no backward pass).
	Gelu(ctx Context, a Tensor) Tensor
	// GeluErf returns the exact GELU(a) = a*Φ(a) (no backward pass).
	GeluErf(ctx Context, a Tensor) Tensor
	// GeluQuick returns a*sigmoid(1.702a) (no backward pass).
	GeluQuick(ctx Context, a Tensor) Tensor
	// Silu returns a*sigmoid(a).
	Silu(ctx Context, a Tensor) Tensor
	// SiluBack returns the gradient of Silu at x=a for the output gradient b.
	SiluBack(ctx Context, a, b Tensor) Tensor
	// Hardswish returns a*relu6(a+3)/6.
	Hardswish(ctx Context, a Tensor) Tensor
	// Hardsigmoid returns relu6(a+3)/6.
	Hardsigmoid(ctx Context, a Tensor) Tensor
	// Glu applies the gated unit op to rows of a that hold [x, gate] halves (or [gate, x]
	// when swapped): [2n, r] → [n, r].
	Glu(ctx Context, a Tensor, op GluOp, swapped bool) Tensor
	// GluSplit applies the gated unit op to x=a and gate=b of the same shape.
	GluSplit(ctx Context, a, b Tensor, op GluOp) Tensor
	// Reglu returns relu(x)*gate for rows of a holding [x, gate]: [2n, r] → [n, r].
	Reglu(ctx Context, a Tensor) Tensor
	// Geglu returns gelu(x)*gate for rows of a holding [x, gate]: [2n, r] → [n, r].
	Geglu(ctx Context, a Tensor) Tensor
	// Swiglu returns silu(x)*gate for rows of a holding [x, gate]: [2n, r] → [n, r]. It has no
	// backward pass; train with SwigluSplit.
	Swiglu(ctx Context, a Tensor) Tensor
	// RegluSplit returns relu(a)*b.
	RegluSplit(ctx Context, a, b Tensor) Tensor
	// GegluSplit returns gelu(a)*b (tanh approximation).
	GegluSplit(ctx Context, a, b Tensor) Tensor
	// SwigluSplit returns silu(a)*b, LLaMA's feed-forward gate; it is differentiable.
	SwigluSplit(ctx Context, a, b Tensor) Tensor
	// GegluErfSplit returns gelu_erf(a)*b.
	GegluErfSplit(ctx Context, a, b Tensor) Tensor
	// GegluQuickSplit returns gelu_quick(a)*b.
	GegluQuickSplit(ctx Context, a, b Tensor) Tensor
	// SwigluOAI returns gpt-oss's clamped swiglu of x=a and gate=b with the given alpha and
	// clamp limit.
	SwigluOAI(ctx Context, a, b Tensor, alpha, limit float32) Tensor

	// ---- normalization ----

	// Norm normalizes each row of a to zero mean and unit variance (eps added to the
	// variance); no backward pass.
	Norm(ctx Context, a Tensor, eps float32) Tensor
	// RMSNorm divides each row of a by sqrt(mean(a²)+eps).
	RMSNorm(ctx Context, a Tensor, eps float32) Tensor
	// RMSNormBack returns the gradient of RMSNorm at x=a for the output gradient b.
	RMSNormBack(ctx Context, a, b Tensor, eps float32) Tensor
	// GroupNorm normalizes a over ne0*ne1*(ne2/nGroups) elements per group.
	GroupNorm(ctx Context, a Tensor, nGroups Int, eps float32) Tensor
	// L2Norm divides each row of a by max(‖row‖₂, eps).
	//kernelgen:c ggml_l2_norm
	L2Norm(ctx Context, a Tensor, eps float32) Tensor

	// ---- matrix products ----

	// MulMat multiplies a [K, M, …] by b [K, N, …] into an F32 [M, N, …]: element (m, n) is
	// the dot product of row m of a and row n of b (so it is b·aᵀ). a's dimensions 2 and 3 are
	// broadcast over b's. a may be quantized.
	MulMat(ctx Context, a, b Tensor) Tensor
	// MulMatSetPrec sets the accumulation precision of the MulMat node a.
	MulMatSetPrec(a Tensor, prec Prec)
	// MulMatID multiplies by experts selected per row (mixture of experts): experts is
	// [K, M, nExpert], b [K, nUsed, T], ids I32 [nUsed, T]; the result is [M, nUsed, T].
	MulMatID(ctx Context, experts, b, ids Tensor) Tensor
	// OutProd returns the outer product of a [M, N] and b [P, N]: [M, P] (the matrix
	// product a·bᵀ with the shared dimension N). No backward pass.
	OutProd(ctx Context, a, b Tensor) Tensor

	// ---- copies, casts, views and shapes ----

	// Cpy copies a into b (converting to b's type, which may be quantized) and returns a view
	// of b; the copy happens when the graph runs.
	Cpy(ctx Context, a, b Tensor) Tensor
	// Cast returns a converted to type typ (F32 to I32 truncates).
	Cast(ctx Context, a Tensor, typ Type) Tensor
	// Cont returns a contiguous copy of a (e.g. after Permute or Transpose).
	Cont(ctx Context, a Tensor) Tensor
	// MapCustom1 is a new tensor of a's type and shape (contiguous) that fun, a C kernel of the
	// type ggml_custom1_op_t, computes from a: called by each of nTasks threads (-1: all of the
	// backend's) with its index, and with userdata unchanged. Only the CPU backend runs it, and
	// autodiff cannot differentiate it.
	//kernelgen:c ggml_map_custom1
	//kernelgen:ctype fun ggml_custom1_op_t
	MapCustom1(ctx Context, a Tensor, fun Ptr, nTasks Int, userdata Ptr) Tensor
	// Custom4D is a new contiguous tensor of type typ and shape [ne0, ne1, ne2, ne3] that fun,
	// a C kernel of the type ggml_custom_op_t, computes from its sources: args, the first nArgs
	// of which become the result's Src. fun is called by each of nTasks threads (-1: all of the
	// backend's) with its index, and with userdata unchanged. Only the CPU backend runs it, and
	// autodiff cannot differentiate it.
	//kernelgen:c ggml_custom_4d
	//kernelgen:ctype fun ggml_custom_op_t
	Custom4D(ctx Context, typ Type, ne0, ne1, ne2, ne3 int64, args []Tensor, nArgs Int, fun Ptr, nTasks Int, userdata Ptr) Tensor
	// CustomInplace is a view of a that fun, a C kernel of the type ggml_custom_op_t, writes in
	// place when the graph runs: a becomes the result's Src[0] and args, the first nArgs of
	// them, its Src[1…]. fun is called by each of nTasks threads (-1: all of the backend's)
	// with its index, and with userdata unchanged. Only the CPU backend runs it, and autodiff
	// cannot differentiate it.
	//kernelgen:c ggml_custom_inplace
	//kernelgen:ctype fun ggml_custom_op_t
	CustomInplace(ctx Context, a Tensor, args []Tensor, nArgs Int, fun Ptr, nTasks Int, userdata Ptr) Tensor
	// Cont1D returns a contiguous copy of a reshaped to [ne0].
	Cont1D(ctx Context, a Tensor, ne0 int64) Tensor
	// Cont2D returns a contiguous copy of a reshaped to [ne0, ne1].
	Cont2D(ctx Context, a Tensor, ne0, ne1 int64) Tensor
	// Cont3D returns a contiguous copy of a reshaped to [ne0, ne1, ne2].
	Cont3D(ctx Context, a Tensor, ne0, ne1, ne2 int64) Tensor
	// Cont4D returns a contiguous copy of a reshaped to [ne0, ne1, ne2, ne3].
	Cont4D(ctx Context, a Tensor, ne0, ne1, ne2, ne3 int64) Tensor
	// Reshape returns a view of the contiguous a with b's shape.
	Reshape(ctx Context, a, b Tensor) Tensor
	// Reshape1D returns a view of the contiguous a with shape [ne0].
	Reshape1D(ctx Context, a Tensor, ne0 int64) Tensor
	// Reshape2D returns a view of the contiguous a with shape [ne0, ne1].
	Reshape2D(ctx Context, a Tensor, ne0, ne1 int64) Tensor
	// Reshape3D returns a view of the contiguous a with shape [ne0, ne1, ne2].
	Reshape3D(ctx Context, a Tensor, ne0, ne1, ne2 int64) Tensor
	// Reshape4D returns a view of the contiguous a with shape [ne0, ne1, ne2, ne3].
	Reshape4D(ctx Context, a Tensor, ne0, ne1, ne2, ne3 int64) Tensor
	// View1D returns a view of ne0 elements of a starting offset bytes in.
	View1D(ctx Context, a Tensor, ne0 int64, offset Size) Tensor
	// View2D returns a view of a with shape [ne0, ne1], row stride nb1 bytes, starting offset
	// bytes in.
	View2D(ctx Context, a Tensor, ne0, ne1 int64, nb1, offset Size) Tensor
	// View3D returns a view of a with shape [ne0, ne1, ne2] and byte strides nb1, nb2, starting
	// offset bytes in.
	View3D(ctx Context, a Tensor, ne0, ne1, ne2 int64, nb1, nb2, offset Size) Tensor
	// View4D returns a view of a with shape [ne0, ne1, ne2, ne3] and byte strides nb1, nb2,
	// nb3, starting offset bytes in.
	View4D(ctx Context, a Tensor, ne0, ne1, ne2, ne3 int64, nb1, nb2, nb3, offset Size) Tensor
	// Permute returns a view of a whose dimension i moves to position axis_i (ggml's
	// convention: Permute(a, 0, 2, 1, 3) swaps dimensions 1 and 2).
	Permute(ctx Context, a Tensor, axis0, axis1, axis2, axis3 Int) Tensor
	// Transpose returns a view of a with its first two dimensions swapped (Permute(a, 1, 0, 2,
	// 3)).
	Transpose(ctx Context, a Tensor) Tensor
	// Set returns a copy of a with b written into the view of a given by byte strides nb1,
	// nb2, nb3 and byte offset.
	Set(ctx Context, a, b Tensor, nb1, nb2, nb3, offset Size) Tensor
	// Set1D returns a copy of a with the vector b written at byte offset.
	Set1D(ctx Context, a, b Tensor, offset Size) Tensor
	// Set2D returns a copy of a with the matrix b written with row stride nb1 at byte offset.
	Set2D(ctx Context, a, b Tensor, nb1, offset Size) Tensor
	// Concat joins a and b along dimension dim (0..3); the other dimensions must match. No
	// backward pass (Acc into a zero tensor is the differentiable alternative).
	Concat(ctx Context, a, b Tensor, dim Int) Tensor
	// Repeat tiles a to b's shape (each of b's dimensions a multiple of a's); if a already has
	// that shape and is not a parameter it returns a.
	Repeat(ctx Context, a, b Tensor) Tensor
	// Repeat4D tiles a to shape [ne0, ne1, ne2, ne3].
	Repeat4D(ctx Context, a Tensor, ne0, ne1, ne2, ne3 int64) Tensor
	// RepeatBack sums the repetitions in a into b's shape (the gradient of Repeat).
	RepeatBack(ctx Context, a, b Tensor) Tensor
	// Pad appends p_i zeros to the end of each dimension i.
	Pad(ctx Context, a Tensor, p0, p1, p2, p3 Int) Tensor
	// PadExt pads each dimension i with lp_i zeros in front and rp_i zeros behind.
	PadExt(ctx Context, a Tensor, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3 Int) Tensor
	// PadReflect1D pads the first dimension by reflection: p0 elements in front, p1 behind.
	PadReflect1D(ctx Context, a Tensor, p0, p1 Int) Tensor
	// Roll rotates a by shift_i positions along each dimension i, wrapping around.
	Roll(ctx Context, a Tensor, shift0, shift1, shift2, shift3 Int) Tensor
	// Tri returns the square matrix a with everything outside the triangle typ set to zero.
	Tri(ctx Context, a Tensor, typ TriType) Tensor
	// Diag returns the diagonal matrix [n, n] of the vector a [n].
	Diag(ctx Context, a Tensor) Tensor

	// ---- indexing ----

	// GetRows gathers rows of a by the I32 indices b: a [E, R, A, B], b [n, A, B] → [E, n, A,
	// B] (the embedding lookup). Quantized a is dequantized to F32.
	GetRows(ctx Context, a, b Tensor) Tensor
	// GetRowsBack scatters the gradient a of a GetRows result back into c's shape, by the
	// indices b.
	GetRowsBack(ctx Context, a, b, c Tensor) Tensor
	// SetRows writes the rows of b into the destination a at the I64 (or I32) row indices c,
	// converting to a's type (which may be quantized), and returns a view of a: a [E, R, A, B],
	// b [E, n, A, B], c [n, A', B'] broadcast over a's dimensions 2 and 3. Overlapping rows are
	// undefined. Used to write key/value caches.
	SetRows(ctx Context, a, b, c Tensor) Tensor
	// Argsort returns, per row of a, the I32 indices that sort the row in order.
	Argsort(ctx Context, a Tensor, order SortOrder) Tensor
	// ArgsortTopK returns, per row of a, the I32 indices of its k largest elements, largest
	// first (Argsort plus a view).
	ArgsortTopK(ctx Context, a Tensor, k Int) Tensor
	// TopK returns, per row of a, the I32 indices of its k largest elements, in no particular
	// order.
	//kernelgen:optional
	TopK(ctx Context, a Tensor, k Int) Tensor
	// Arange returns the F32 vector start, start+step, … below stop.
	Arange(ctx Context, start, stop, step float32) Tensor

	// ---- attention ----

	// DiagMaskInf sets to -inf every element whose column (index in dimension 0) exceeds its
	// row (index in dimension 1) plus nPast: the causal mask applied before SoftMax.
	DiagMaskInf(ctx Context, a Tensor, nPast Int) Tensor
	// DiagMaskZero sets to 0 every element whose column exceeds its row plus nPast.
	DiagMaskZero(ctx Context, a Tensor, nPast Int) Tensor
	// SoftMax returns the softmax of each row of a.
	SoftMax(ctx Context, a Tensor) Tensor
	// SoftMaxExt returns softmax(a*scale + mask) per row, the mask scaled by the ALiBi slope
	// when maxBias > 0 (use 0 otherwise; the CPU backward pass needs 0). a is [n, r, h, b];
	// mask (F16 or F32, or nil) is [n, r', h', b'] with r' ≥ r, broadcast over dimensions 2
	// and 3.
	SoftMaxExt(ctx Context, a, mask Tensor, scale, maxBias float32) Tensor
	// SoftMaxAddSinks adds attention-sink logits sinks (one per head) to the SoftMaxExt node a.
	SoftMaxAddSinks(a, sinks Tensor)
	// SoftMaxExtBack returns the gradient of SoftMaxExt for the output gradient a and the
	// softmax output b.
	SoftMaxExtBack(ctx Context, a, b Tensor, scale, maxBias float32) Tensor
	// Rope applies rotary position embedding to a [d, T, H, B] at the I32 positions b [T],
	// rotating the first nDims dimensions of each head with the default frequency base 10000.
	Rope(ctx Context, a, b Tensor, nDims Int, mode RopeMode) Tensor
	// RopeExt applies rotary position embedding to a [d, T, H, B] at the I32 positions b [T],
	// rotating the first nDims dimensions of each head. c holds optional per-dimension
	// frequency factors (nil for none). freqBase is θ (e.g. 10000), freqScale the linear
	// position scale (1 for none); nCtxOrig, extFactor, attnFactor, betaFast and betaSlow are
	// the YaRN settings (0, 0, 1, 32, 1 disable it).
	RopeExt(ctx Context, a, b, c Tensor, nDims Int, mode RopeMode, nCtxOrig Int,
		freqBase, freqScale, extFactor, attnFactor, betaFast, betaSlow float32) Tensor
	// RopeExtBack returns the gradient of RopeExt for the output gradient a, with the same
	// positions, factors and settings.
	RopeExtBack(ctx Context, a, b, c Tensor, nDims Int, mode RopeMode, nCtxOrig Int,
		freqBase, freqScale, extFactor, attnFactor, betaFast, betaSlow float32) Tensor
	// FlashAttnExt is fused attention softmax(q·kᵀ*scale + mask)·v, with an optional logit
	// soft cap (0 for none) and ALiBi (maxBias 0 for none). q is [dk, T, H, B], k [dk, S,
	// Hkv, B], v [dv, S, Hkv, B] (not transposed), mask F16 [S, T', …] or nil, with H a
	// multiple of Hkv; the result is permuted: [dv, H, T, B]. No backward pass.
	FlashAttnExt(ctx Context, q, k, v, mask Tensor, scale, maxBias, logitSoftcap float32) Tensor
	// FlashAttnExtSetPrec sets the accumulation precision of the FlashAttnExt node a.
	FlashAttnExtSetPrec(a Tensor, prec Prec)
	// FlashAttnExtGetPrec is the accumulation precision of the FlashAttnExt node a.
	FlashAttnExtGetPrec(a Const[Tensor]) Prec
	// FlashAttnExtAddSinks adds attention-sink logits sinks (one per head) to the FlashAttnExt
	// node a.
	FlashAttnExtAddSinks(a, sinks Tensor)

	// ---- convolution and pooling ----

	// Im2col unfolds the patches of b under the kernel a into rows (strides s, padding p,
	// dilation d; is2D for 2-D, else 1-D), in type dstType; MulMat with the kernel then gives
	// a convolution.
	//kernelgen:c ggml_im2col
	Im2col(ctx Context, a, b Tensor, s0, s1, p0, p1, d0, d1 Int, is2D bool, dstType Type) Tensor
	// Conv1D convolves b [L, Cin, N] with the kernel a [K, Cin, Cout] (stride s0, padding p0,
	// dilation d0), via Im2col and MulMat.
	Conv1D(ctx Context, a, b Tensor, s0, p0, d0 Int) Tensor
	// ConvTranspose1D is the transposed 1-D convolution of b by the kernel a.
	ConvTranspose1D(ctx Context, a, b Tensor, s0, p0, d0 Int) Tensor
	// Conv2D convolves b [W, H, Cin, N] with the kernel a [KW, KH, Cin, Cout] (strides s,
	// padding p, dilation d per dimension) into [W', H', Cout, N], via Im2col and MulMat; it is
	// differentiable in the kernel.
	Conv2D(ctx Context, a, b Tensor, s0, s1, p0, p1, d0, d1 Int) Tensor
	// Conv2DDw is the depthwise 2-D convolution of b by the kernel a, via Im2col and MulMat.
	Conv2DDw(ctx Context, a, b Tensor, s0, s1, p0, p1, d0, d1 Int) Tensor
	// Pool1D pools windows of k0 elements (stride s0, padding p0) along dimension 0.
	Pool1D(ctx Context, a Tensor, op PoolOp, k0, s0, p0 Int) Tensor
	// Pool2D pools k0×k1 windows (strides s0, s1, padding p0, p1) over the first two
	// dimensions.
	Pool2D(ctx Context, a Tensor, op PoolOp, k0, k1, s0, s1 Int, p0, p1 float32) Tensor
	// Upscale multiplies the first two dimensions of a by scaleFactor, resampling with mode.
	Upscale(ctx Context, a Tensor, scaleFactor Int, mode ScaleMode) Tensor
	// Interpolate resamples a to shape [ne0, ne1, ne2, ne3]; mode is a ScaleMode, optionally
	// or'ed with GGML_SCALE_FLAG_* bits.
	Interpolate(ctx Context, a Tensor, ne0, ne1, ne2, ne3 int64, mode uint32) Tensor
	// TimestepEmbedding returns the sinusoidal embedding [dim, N] of the timesteps [N].
	TimestepEmbedding(ctx Context, timesteps Tensor, dim, maxPeriod Int) Tensor

	// ---- loss and optimizers ----

	// CrossEntropyLoss returns the scalar mean over rows of -Σ b·log_softmax(a), for logits a
	// [V, N] and label probabilities b [V, N] (each row of b must sum to 1). F32 only.
	CrossEntropyLoss(ctx Context, a, b Tensor) Tensor
	// CrossEntropyLossBack returns the gradient of CrossEntropyLoss for logits a, labels b and
	// the loss gradient c.
	CrossEntropyLossBack(ctx Context, a, b, c Tensor) Tensor
	// OptStepAdamW applies one AdamW step to the parameter a in place and returns a view of a:
	// grad, m and v have a's shape, and params is an F32 tensor of exactly 7 values [alpha
	// (learning rate), beta1, beta2, eps, wd (decoupled weight decay), 1/(1-beta1^t),
	// 1/(1-beta2^t)]. F32 only.
	//kernelgen:c ggml_opt_step_adamw
	OptStepAdamW(ctx Context, a, grad, m, v, params Tensor) Tensor
	// OptStepSGD applies one SGD step w = w*(1-alpha*wd) - alpha*grad to a in place and
	// returns a view of a; params is an F32 tensor [alpha, wd]. F32 only.
	OptStepSGD(ctx Context, a, grad, params Tensor) Tensor

	// ---- graphs and automatic differentiation ----

	// NewGraph makes a graph of the default size (2048 nodes) without gradients.
	NewGraph(ctx Context) Graph
	// NewGraphCustom makes a graph with room for size nodes; grads makes room for gradients,
	// which BuildBackwardExpand needs.
	NewGraphCustom(ctx Context, size Size, grads bool) Graph
	// GraphDup copies g into ctx; forceGrads makes room for gradients even if g has none.
	GraphDup(ctx Context, g Graph, forceGrads bool) Graph
	// GraphCpy copies the nodes of src into dst, which must be large enough.
	GraphCpy(src, dst Graph)
	// BuildForwardExpand adds t and every node it depends on to g, in execution order.
	BuildForwardExpand(g Graph, t Tensor)
	// BuildBackwardExpand appends to g the nodes that compute the gradient of the loss (the
	// tensors marked SetLoss) with respect to every parameter (SetParam), making gradient
	// tensors in ctx. gradAccs, indexed by forward node index (may be nil), supplies
	// persistent accumulators for the gradients, e.g. a scalar F32 holding 1 for the loss.
	BuildBackwardExpand(ctx Context, g Graph, gradAccs []Tensor)
	// GraphReset zeroes g's gradient accumulators and the AdamW moments of its optimizer
	// nodes, and sets the loss gradient to 1; call it once after allocating, not every step.
	GraphReset(g Graph)
	// GraphClear removes all nodes and leaves from g.
	GraphClear(g Graph)
	// GraphSize is the number of nodes g has room for.
	GraphSize(g Graph) Int
	// GraphNode is node i of g in execution order; i < 0 counts from the end (-1 is the last).
	GraphNode(g Graph, i Int) Tensor
	// GraphNNodes is the number of nodes in g.
	GraphNNodes(g Graph) Int
	// GraphAddNode appends t to g's nodes as is.
	GraphAddNode(g Graph, t Tensor)
	// GraphGetTensor finds the node or leaf of g with the given name, or returns nil.
	GraphGetTensor(g Const[Graph], name string) Tensor
	// GraphGetGrad is the gradient of node in g after BuildBackwardExpand, or nil.
	GraphGetGrad(g Const[Graph], node Const[Tensor]) Tensor
	// GraphGetGradAcc is the gradient accumulator of node in g, or nil.
	GraphGetGradAcc(g Const[Graph], node Const[Tensor]) Tensor
	// GraphPrint logs g's nodes and leaves.
	GraphPrint(g Const[Graph])
	// GraphDumpDot writes the graph gb (highlighting gf's nodes, gf may be nil) to filename in
	// Graphviz dot format.
	GraphDumpDot(gb, gf Const[Graph], filename string)

	// ---- types, names and versions ----

	// TypeSize is the size in bytes of one block of typ (one element for unquantized types).
	TypeSize(typ Type) Size
	// BlckSize is the number of elements in one block of typ (1 for unquantized types).
	BlckSize(typ Type) int64
	// RowSize is the size in bytes of a row of ne elements of typ (ne a multiple of BlckSize).
	RowSize(typ Type, ne int64) Size
	// IsQuantized reports whether typ is a block-quantized type.
	IsQuantized(typ Type) bool
	// TypeName is ggml's short name for typ ("f32", "q4_K", ...).
	TypeName(typ Type) string
	// OpName is the name of op ("ADD", "MUL_MAT", ...).
	OpName(op Op) string
	// OpSymbol is the symbol of op ("+", "X", ...) or its name.
	OpSymbol(op Op) string
	// OpDesc describes t's operation: the activation name for OpUnary and OpGlu nodes, else the
	// op name.
	OpDesc(t Const[Tensor]) string
	// UnaryOpName is the name of op ("GELU", ...).
	UnaryOpName(op UnaryOp) string
	// GluOpName is the name of op ("SWIGLU", ...).
	GluOpName(op GluOp) string
	// StatusToString describes status.
	StatusToString(status Status) string
	// Version is the ggml version string.
	Version() string
	// Commit is the ggml commit the library was built from.
	Commit() string
	// ValidateRowData checks that nbytes of data of type typ hold no NaN or infinity (and valid
	// block scales); it logs and returns false otherwise.
	ValidateRowData(typ Type, data Const[Ptr], nbytes Size) bool
	// TimeInit initializes ggml's clock; call it once before TimeMs or TimeUs.
	TimeInit()
	// TimeMs is a monotonic time in milliseconds.
	TimeMs() int64
	// TimeUs is a monotonic time in microseconds.
	TimeUs() int64

	// ---- conversion and quantization ----

	// Fp16ToFp32 converts one half-precision value (its bits) to float32.
	//kernelgen:c ggml_fp16_to_fp32
	Fp16ToFp32(x uint16) float32
	// Fp32ToFp16 converts x to half precision (its bits).
	//kernelgen:c ggml_fp32_to_fp16
	Fp32ToFp16(x float32) uint16
	// Fp16ToFp32Row converts n half-precision values (their bits) in x to float32 in y.
	//kernelgen:c ggml_fp16_to_fp32_row
	Fp16ToFp32Row(x Const[[]uint16], y []float32, n int64)
	// Fp32ToFp16Row converts n float32 values in x to half precision (their bits) in y.
	//kernelgen:c ggml_fp32_to_fp16_row
	Fp32ToFp16Row(x Const[[]float32], y []uint16, n int64)
	// QuantizeInit prepares the lookup tables for quantizing to typ; QuantizeChunk calls it
	// itself. Safe for concurrent use.
	QuantizeInit(typ Type)
	// QuantizeFree releases the tables QuantizeInit made.
	QuantizeFree()
	// QuantizeRequiresImatrix reports whether typ can only be quantized with an importance
	// matrix.
	QuantizeRequiresImatrix(typ Type) bool
	// QuantizeChunk quantizes nrows rows of nPerRow float32 values, starting at element start
	// of src (a multiple of nPerRow), into dst in type typ, and returns the bytes written
	// (nrows*RowSize(typ, nPerRow)), written at the matching row offset of dst. imatrix holds
	// nPerRow importance weights, or nil. Safe for concurrent use on disjoint rows.
	QuantizeChunk(typ Type, src Const[[]float32], dst Ptr, start, nrows, nPerRow int64,
		imatrix Const[[]float32]) Size
}
