package reference

import (
	"fmt"
)

// MaxDims is ggml's GGML_MAX_DIMS.
const MaxDims = 4

// Tensor is a dense, contiguous float64 tensor with ggml's dimension order:
// Ne[0] is the fastest-varying dimension, and element (i0,i1,i2,i3) lives at
// Data[i0 + Ne[0]*(i1 + Ne[1]*(i2 + Ne[2]*i3))]. Unused dimensions are 1.
type Tensor struct {
	Ne   [MaxDims]int
	Data []float64
}

// Float64Source is anything that yields uniform numbers in [0, 1), such as
// *rand.Rand from math/rand or math/rand/v2.
type Float64Source interface {
	Float64() float64
}

// shape turns up to four extents into a full ggml ne array (missing ones are 1).
func shape(fn string, ne []int) [MaxDims]int {
	if len(ne) > MaxDims {
		panic(fmt.Sprintf("reference.%s: %d dimensions, at most %d", fn, len(ne), MaxDims))
	}
	s := [MaxDims]int{1, 1, 1, 1}
	for i, n := range ne {
		if n < 0 {
			panic(fmt.Sprintf("reference.%s: negative extent %d in dimension %d", fn, n, i))
		}
		s[i] = n
	}
	return s
}

func nelements(ne [MaxDims]int) int { return ne[0] * ne[1] * ne[2] * ne[3] }

// New returns a zero tensor with extents ne (at most four; missing ones are 1).
// New() is a scalar.
func New(ne ...int) Tensor {
	s := shape("New", ne)
	return Tensor{Ne: s, Data: make([]float64, nelements(s))}
}

// FromData wraps data (not copied) as a tensor of extents ne. len(data) must
// equal the product of ne.
func FromData(data []float64, ne ...int) Tensor {
	s := shape("FromData", ne)
	if len(data) != nelements(s) {
		panic(fmt.Sprintf("reference.FromData: %d values for shape %v", len(data), s))
	}
	return Tensor{Ne: s, Data: data}
}

// Rand returns a tensor of extents ne filled with values uniform in [lo, hi),
// drawn from rng in storage order.
func Rand(rng Float64Source, lo, hi float64, ne ...int) Tensor {
	t := New(ne...)
	for i := range t.Data {
		t.Data[i] = lo + (hi-lo)*rng.Float64()
	}
	return t
}

// FromF32 converts float32 data (as read back from a ggml F32 tensor) into a
// tensor of extents ne.
func FromF32(data []float32, ne ...int) Tensor {
	s := shape("FromF32", ne)
	if len(data) != nelements(s) {
		panic(fmt.Sprintf("reference.FromF32: %d values for shape %v", len(data), s))
	}
	t := Tensor{Ne: s, Data: make([]float64, len(data))}
	for i, v := range data {
		t.Data[i] = float64(v)
	}
	return t
}

// ToF32 returns the data rounded to float32 (round to nearest even), in
// storage order, ready to upload into a ggml F32 tensor.
func (t Tensor) ToF32() []float32 {
	out := make([]float32, len(t.Data))
	for i, v := range t.Data {
		out[i] = float32(v)
	}
	return out
}

// Len is the number of elements (ggml_nelements).
func (t Tensor) Len() int { return nelements(t.Ne) }

// NRows is the number of rows, Ne[1]*Ne[2]*Ne[3] (ggml_nrows).
func (t Tensor) NRows() int { return t.Ne[1] * t.Ne[2] * t.Ne[3] }

// Clone returns a deep copy.
func (t Tensor) Clone() Tensor {
	return Tensor{Ne: t.Ne, Data: append([]float64(nil), t.Data...)}
}

// Index returns the storage offset of element (i0,i1,i2,i3); missing trailing
// indices are 0. It panics when an index is out of range.
func (t Tensor) Index(idx ...int) int {
	if len(idx) > MaxDims {
		panic(fmt.Sprintf("reference.Index: %d indices", len(idx)))
	}
	off, stride := 0, 1
	for d := 0; d < MaxDims; d++ {
		i := 0
		if d < len(idx) {
			i = idx[d]
		}
		if i < 0 || i >= t.Ne[d] {
			panic(fmt.Sprintf("reference.Index: index %v out of range for shape %v", idx, t.Ne))
		}
		off += i * stride
		stride *= t.Ne[d]
	}
	return off
}

func (t Tensor) at4(i0, i1, i2, i3 int) float64 {
	return t.Data[i0+t.Ne[0]*(i1+t.Ne[1]*(i2+t.Ne[2]*i3))]
}

func (t Tensor) set4(v float64, i0, i1, i2, i3 int) {
	t.Data[i0+t.Ne[0]*(i1+t.Ne[1]*(i2+t.Ne[2]*i3))] = v
}

// At returns element (i0,i1,i2,i3); missing trailing indices are 0.
func (t Tensor) At(idx ...int) float64 { return t.Data[t.Index(idx...)] }

// Set stores v at element (i0,i1,i2,i3); missing trailing indices are 0.
func (t Tensor) Set(v float64, idx ...int) { t.Data[t.Index(idx...)] = v }

// Reshape returns a tensor sharing t's data with new extents of the same
// element count (ggml_reshape on a contiguous tensor).
func (t Tensor) Reshape(ne ...int) Tensor {
	s := shape("Reshape", ne)
	if nelements(s) != t.Len() {
		panic(fmt.Sprintf("reference.Reshape: %v has %d elements, %v has %d", t.Ne, t.Len(), s, nelements(s)))
	}
	return Tensor{Ne: s, Data: t.Data}
}

// Row returns row (i1,i2,i3) as a slice sharing t's data.
func (t Tensor) Row(i1, i2, i3 int) []float64 {
	off := t.Ne[0] * (i1 + t.Ne[1]*(i2+t.Ne[2]*i3))
	return t.Data[off : off+t.Ne[0]]
}

// Map returns f applied to every element, e.g. t.Map(RoundF16) to model a
// tensor stored as F16.
func (t Tensor) Map(f func(float64) float64) Tensor {
	out := Tensor{Ne: t.Ne, Data: make([]float64, len(t.Data))}
	for i, v := range t.Data {
		out.Data[i] = f(v)
	}
	return out
}

// SameShape reports whether a and b have identical extents (ggml_are_same_shape).
func SameShape(a, b Tensor) bool { return a.Ne == b.Ne }

func (t Tensor) check(fn string) {
	if len(t.Data) != nelements(t.Ne) {
		panic(fmt.Sprintf("reference.%s: tensor with shape %v has %d values", fn, t.Ne, len(t.Data)))
	}
}

func assertf(cond bool, fn, format string, args ...any) {
	if !cond {
		panic("reference." + fn + ": " + fmt.Sprintf(format, args...))
	}
}

// cmax and cmin mirror ggml's MAX/MIN macros ((a) > (b) ? (a) : (b)), whose
// NaN behaviour differs from math.Max/math.Min.
func cmax(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}

func cmin(a, b float64) float64 {
	if a < b {
		return a
	}
	return b
}
