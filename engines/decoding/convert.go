package decoding

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
)

// tensorJob is one tensor of a model writeModel writes: copied from the file as it is (t nil),
// or converted (merged with its adapters, dequantized and stored as typ).
type tensorJob struct {
	info gguffile.TensorInfo
	typ  ggml.Type
	t    *ggml.Tensor // the model's tensor, for a converted one
}

// writeError is a failure to write the output (not a problem of the model).
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }

// chunkValues is about how many values a converting thread takes at a time: whole rows of
// about 256 KiB of f32, which stay in its core's cache between dequantizing and quantizing.
const chunkValues = 1 << 16

// tensorWriter streams a model's tensors to out: each copied in pieces from the file src, or
// converted chunk by chunk of rows over threads (convert), so that what is held at once is a
// converted tensor's output and a chunk of values per thread, not the model.
type tensorWriter struct {
	m          *GGUFModel
	src        *os.File
	dataOffset int64
	out        io.Writer
	threads    int
	buf        []byte // the converted tensor's data, reused from tensor to tensor
	// clamped and limit are the last converted tensor's count of values clamped to its type's
	// range (clampToType), and that range.
	clamped int
	limit   float64
}

// write writes the job's tensor.
func (w *tensorWriter) write(j tensorJob) error {
	w.clamped = 0
	if j.t == nil {
		return w.copy(j.info)
	}
	data, err := w.convert(j)
	if err != nil {
		return err
	}
	if _, err := w.out.Write(data); err != nil {
		return &writeError{err}
	}
	return nil
}

// copy copies a tensor's data from the file in pieces, refusing a NaN or an infinity in f32,
// f16 and bf16 data.
func (w *tensorWriter) copy(ti gguffile.TensorInfo) error {
	const piece = 4 << 20 // a multiple of every element size
	typ := ggml.Type(ti.Type)
	buf := make([]byte, min(ti.Size, piece))
	esize := int64(ggml.TypeSize(typ))
	for off := int64(0); off < ti.Size; off += piece {
		b := buf[:min(piece, ti.Size-off)]
		if _, err := w.src.ReadAt(b, w.dataOffset+int64(ti.Offset)+off); err != nil {
			return fmt.Errorf("%s: reading its data: %w", ti.Name, err)
		}
		if i := transformer.NonFiniteRaw(typ, b); i >= 0 {
			return fmt.Errorf("%s holds a NaN or an infinity (element %d): the model is not finite", ti.Name, off/esize+int64(i))
		}
		if _, err := w.out.Write(b); err != nil {
			return &writeError{err}
		}
	}
	return nil
}

// convert produces the job's tensor in its type: rows in chunks over the threads, each chunk
// dequantized (ggml.Dequantize, from the file; or the merged values, for a tensor the
// adapters update), checked, clamped and quantized into its place (ggml.QuantizeInto). Rows
// are quantized each on its own, so the bytes are those of quantizing the whole tensor.
func (w *tensorWriter) convert(j tensorJob) ([]byte, error) {
	ti, own := j.info, ggml.Type(j.info.Type)
	in, rows := int(ti.Ne[0]), int(ti.Elements()/max(1, ti.Ne[0]))
	rowBytes, err := ggml.RowSize(j.typ, int64(in))
	if err != nil {
		return nil, err
	}
	ownRow, err := ggml.RowSize(own, int64(in))
	if err != nil {
		return nil, err
	}
	if cap(w.buf) < rows*rowBytes {
		w.buf = make([]byte, rows*rowBytes)
	}
	data := w.buf[:rows*rowBytes]
	var merged []float32 // the whole tensor's values, where adapters update it or ggml has no direct conversion
	adapted := len(w.m.lora[j.t]) > 0
	if adapted || !ggml.CanDequantize(own) {
		if merged, err = w.m.merged(j.t); err != nil {
			return nil, fmt.Errorf("%s: %w", ti.Name, err)
		}
	}
	per := max(1, chunkValues/max(1, in))
	chunks := (rows + per - 1) / per
	threads := max(1, min(w.threads, chunks))
	var next atomic.Int64
	var mu sync.Mutex
	bad, badValue, clamped := -1, float32(0), 0
	errs := make([]error, threads)
	var wg sync.WaitGroup
	for k := range threads {
		wg.Go(func() {
			vals := make([]float32, per*in)
			var raw []byte
			if merged == nil {
				raw = make([]byte, per*ownRow)
			}
			for {
				c := int(next.Add(1)) - 1
				if c >= chunks {
					return
				}
				lo, hi := c*per, min(rows, (c+1)*per)
				v := vals[:(hi-lo)*in]
				if merged != nil {
					copy(v, merged[lo*in:hi*in])
				} else {
					r := raw[:(hi-lo)*ownRow]
					if _, err := w.src.ReadAt(r, w.dataOffset+int64(ti.Offset)+int64(lo*ownRow)); err != nil {
						errs[k] = fmt.Errorf("%s: reading its data: %w", ti.Name, err)
						return
					}
					if err := ggml.Dequantize(own, r, v); err != nil {
						errs[k] = fmt.Errorf("%s: %w", ti.Name, err)
						return
					}
				}
				i, n, limit := clampToType(v, j.typ)
				if i >= 0 {
					mu.Lock()
					if at := lo*in + i; bad < 0 || at < bad {
						bad, badValue = at, v[i]
					}
					mu.Unlock()
					continue
				}
				mu.Lock()
				clamped, w.limit = clamped+n, limit
				mu.Unlock()
				dst := data[lo*rowBytes : hi*rowBytes]
				if j.typ == ggml.F32 {
					if len(v) > 0 {
						copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)))
					}
				} else if err := ggml.QuantizeInto(j.typ, v, in, dst); err != nil {
					errs[k] = fmt.Errorf("%s: %w", ti.Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if bad >= 0 {
		what := "the base"
		if adapted {
			what = "the base or an adapter (with its scale)"
		}
		return nil, fmt.Errorf("%s is %v at element %d: %s holds values that are not finite", ti.Name, badValue, bad, what)
	}
	w.clamped = clamped
	return data, nil
}

// clampToType limits values to the largest magnitude type typ holds and returns how many it
// changed and that limit: ±65504 (the largest f16) for f16 and for the block-quantized types, whose
// scales (and minimums) are f16, so a block of larger values would get an infinite scale; the
// largest bf16 for bf16; nothing for f32. A converted weight beyond it would be infinite. In the
// same pass it looks for a NaN or an infinity: bad is the index of the first (-1: none), where
// it stops, the values then being of no use.
func clampToType(values []float32, typ ggml.Type) (bad, n int, limit float64) {
	var lim float32
	switch typ {
	case ggml.F32:
		return NonFinite(values), 0, math.MaxFloat32
	case ggml.BF16:
		lim = math.Float32frombits(0x7f7f0000) // 3.3895e38
	default:
		lim = 65504
	}
	for i, v := range values {
		switch {
		case v-v != 0:
			return i, n, float64(lim)
		case v > lim:
			values[i], n = lim, n+1
		case v < -lim:
			values[i], n = -lim, n+1
		}
	}
	return -1, n, float64(lim)
}

// merged is weight t [in, out] with its LoRA updates added: W + Σ scale·B·A.
func (m *GGUFModel) merged(t *ggml.Tensor) ([]float32, error) {
	values := func(x *ggml.Tensor) ([]float32, error) {
		raw, err := DequantizeOnCPU(x, ggml.F32)
		if err != nil {
			return nil, err
		}
		v := make([]float32, len(raw)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return v, nil
	}
	w, err := values(t)
	if err != nil || len(m.lora[t]) == 0 {
		return w, err
	}
	in, out := int(t.Ne()[0]), int(t.Ne()[1])
	delta := make([]float64, len(w))
	for _, l := range m.lora[t] {
		a, err := values(l.A) // [in, r]: a[r·in + i]
		if err != nil {
			return nil, err
		}
		b, err := values(l.B) // [r, out]: b[o·r + k]
		if err != nil {
			return nil, err
		}
		r := len(a) / in
		for o := 0; o < out; o++ {
			for k := 0; k < r; k++ {
				c := float64(l.Scale) * float64(b[o*r+k])
				row, ak := delta[o*in:(o+1)*in], a[k*in:(k+1)*in]
				for i := range row {
					row[i] += c * float64(ak[i])
				}
			}
		}
	}
	for i := range w {
		w[i] = float32(float64(w[i]) + delta[i])
	}
	return w, nil
}
