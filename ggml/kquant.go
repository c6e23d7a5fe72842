package ggml

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/toyml/toy/generated/cpuops"
	"github.com/toyml/toy/generated/ggmlc"
)

// KQuantWeights is a q4_K, q5_K, q6_K, q4_0, q5_0 or q5_1 weight matrix rewritten into the layout of toy's k-quant
// kernel (kernels/cpu/c/mul_mat_kquant.c: 16 rows interleaved, scales and mins unpacked to
// bytes), which only MulMatKQuant reads. RepackKQuants makes them, in a KQuantSet.
//
// The repacked bytes are deliberately not a *Tensor: no ggml operation can be handed them, so
// none can read the layout as ggml's blocks (the compiler refuses it). They live in a tensor of
// the set's own context, which no caller sees; MulMatKQuant passes it to the kernel together
// with a description of the weights (type, shape, a check value), which the kernel verifies
// against the tensor's size before it reads anything.
type KQuantWeights struct {
	typ  Type
	k, n int64
	set  *KQuantSet
	t    *Tensor // i8 [KquantBytes]
}

// KQuantSet holds the repacked copies RepackKQuants made, in one buffer of the backend.
type KQuantSet struct {
	ctx  *Context
	buf  *Buffer
	byW  map[*Tensor]*KQuantWeights
	size int64
}

// kquantMagic is mul_mat_kquant.c's KQUANT_MAGIC.
const kquantMagic = 0x6b717431

// KQuantFast reports whether toy's k-quant kernel is compiled with AVX-512 VNNI in this build;
// elsewhere it is a plain loop, slower than ggml's kernels, and callers keep ggml's.
func KQuantFast() bool { return cpuops.KquantFast() == 1 }

// KQuantRepackable says why RepackKQuants cannot take w, or nil when it can: w q4_K, q5_K, q6_K,
// q4_0, q5_0 or q5_1, 2-D, rows contiguous, of whole super-blocks of 256 values for the k-quants
// (q4_0's, q5_0's and q5_1's rows may end in a part of one).
func KQuantRepackable(w *Tensor) error {
	if w == nil {
		return fmt.Errorf("no weights")
	}
	if err := KQuantRepackableShape(w.Type(), w.Ne()); err != nil {
		return fmt.Errorf("weights %s: %w", w.describe(), err)
	}
	if !w.IsContiguous() {
		return fmt.Errorf("weights %s: want a contiguous 2-D matrix", w.describe())
	}
	return nil
}

// KQuantType says whether RepackKQuants takes weights of type t: q4_K, q5_K, q6_K, q4_0, q5_0
// or q5_1.
func KQuantType(t Type) bool {
	switch t {
	case Q4_K, Q5_K, Q6_K, Q4_0, Q5_0, Q5_1:
		return true
	}
	return false
}

// KQuantRepackableShape is KQuantRepackable's rule on a type and shape alone, for a file's tensor
// before it is loaded (GGUFTensor.Type, GGUFTensor.Ne).
func KQuantRepackableShape(t Type, ne [4]int64) error {
	if !KQuantType(t) {
		return fmt.Errorf("want q4_K, q5_K, q6_K, q4_0, q5_0 or q5_1")
	}
	if ne[2] != 1 || ne[3] != 1 {
		return fmt.Errorf("want a contiguous 2-D matrix")
	}
	if cpuops.KquantBytes(int(t), ne[0], ne[1]) < 0 {
		return fmt.Errorf("rows of whole super-blocks of 256 values")
	}
	return nil
}

// RepackKQuants copies each of the q4_K, q5_K, q6_K, q4_0, q5_0 or q5_1 matrices ws (each as KQuantRepackable takes
// it, in host memory) into one buffer of backend b (advised for huge pages, as MapGGUF's read
// weights are: a generation step streams them) in the layout of toy's k-quant kernel. The
// matrices are left as they were (other operations, a row lookup of a tied embedding, may still
// read them). Those that from, where not nil, maps from the file (MapOptions.FileBacked) are
// read from the file a job at a time (MappedGGUF.ReadAt: never faulted into the process through
// the mapping, a fault per 64 KiB); the caller releases those nothing else reads
// (MappedGGUF.Release), so that they cost no memory beside their copies. Close frees the
// copies, after the last graph that reads them has run.
func RepackKQuants(b *Backend, ws []*Tensor, from *MappedGGUF) (*KQuantSet, error) {
	if b == nil || !b.IsCPU() {
		return nil, fmt.Errorf("ggml: RepackKQuants: toy's k-quant kernel runs on the CPU backend only")
	}
	if len(ws) == 0 {
		return nil, fmt.Errorf("ggml: RepackKQuants: no weights")
	}
	for _, w := range ws {
		if err := KQuantRepackable(w); err != nil {
			return nil, fmt.Errorf("ggml: RepackKQuants: %w", err)
		}
		if w.t.Data() == nil || !ggmlc.BackendBufferIsHost(w.t.Buffer()) {
			return nil, fmt.Errorf("ggml: RepackKQuants: %s: not in host memory", w.describe())
		}
	}
	ctx, err := NewContext(ContextOptions{MaxTensors: len(ws)})
	if err != nil {
		return nil, err
	}
	s := &KQuantSet{ctx: ctx, byW: make(map[*Tensor]*KQuantWeights, len(ws))}
	var order []*Tensor // ws without repeats
	for _, w := range ws {
		if s.byW[w] != nil {
			continue
		}
		ne := w.Ne()
		size := cpuops.KquantBytes(int(w.Type()), ne[0], ne[1])
		t := ctx.NewTensor(I8, size).SetName(w.Name() + ".toy-kquant")
		if t == nil {
			err := ctx.Err()
			ctx.Close()
			return nil, err
		}
		s.byW[w] = &KQuantWeights{typ: w.Type(), k: ne[0], n: ne[1], set: s, t: t}
		s.size += size
		order = append(order, w)
	}
	if s.buf, err = b.Alloc(ctx); err != nil {
		ctx.Close()
		return nil, err
	}
	s.buf.AdviseHugePages()
	if err := repackRows(order, s.byW, repackJobBytes, from); err != nil {
		s.Close()
		return nil, fmt.Errorf("ggml: RepackKQuants: %w", err)
	}
	return s, nil
}

// repackJobBytes is about how many bytes of weights one job of repackRows repacks: small
// enough that the largest matrix (a tied head, a quarter of a 1B model) spreads over every
// processor, large enough that a job costs far more than handing it over.
const repackJobBytes = 4 << 20

// repackRows repacks the matrices ws into their copies' tensors, in jobs of about jobBytes of
// whole groups of 16 rows (the kernel's groups, each independent of the others) shared by as
// many goroutines as there are processors (a cgo call leaves its P, so they run side by side
// even under GOMAXPROCS 1; a 1B model's 0.8 GB took 5 s on one thread, 0.5 s on two matrix by
// matrix, when one thread was left with the head), each job's rows read from the file into the
// goroutine's own buffer where from maps the matrix from the file.
func repackRows(ws []*Tensor, byW map[*Tensor]*KQuantWeights, jobBytes int64, from *MappedGGUF) error {
	type job struct {
		w          *Tensor
		rows, nrow int64 // rows [rows, rows+nrow)
	}
	var jobs []job
	var largest int64
	for _, w := range ws {
		ne, rowBytes := w.Ne(), int64(w.Nb()[1])
		rowsPerJob := max(1, jobBytes/rowBytes/16) * 16
		largest = max(largest, min(rowsPerJob, ne[1])*rowBytes)
		for r := int64(0); r < ne[1]; r += rowsPerJob {
			jobs = append(jobs, job{w: w, rows: r, nrow: min(rowsPerJob, ne[1]-r)})
		}
	}
	var (
		next   atomic.Int64
		failed atomic.Pointer[error]
		wg     sync.WaitGroup
	)
	for range min(runtime.NumCPU(), len(jobs)) {
		wg.Go(func() {
			var scratch []byte // the rows of a job read from the file
			for i := next.Add(1) - 1; i < int64(len(jobs)) && failed.Load() == nil; i = next.Add(1) - 1 {
				j := jobs[i]
				ne, typ, rowBytes := j.w.Ne(), int(j.w.Type()), int64(j.w.Nb()[1])
				src := unsafe.Add(j.w.t.Data(), j.rows*rowBytes)
				if from.FileBacked(j.w) {
					if scratch == nil {
						scratch = make([]byte, largest)
					}
					p := scratch[:j.nrow*rowBytes]
					if err := from.ReadAt(j.w, p, j.rows*rowBytes); err != nil {
						failed.Store(&err)
						return
					}
					src = unsafe.Pointer(&p[0])
				}
				// Group g of 16 rows is at g·(k/256)·chunk in the copy: the bytes of the rows
				// before it, repacked.
				dst := unsafe.Add(byW[j.w].t.t.Data(), cpuops.KquantBytes(typ, ne[0], 16)*(j.rows/16))
				if cpuops.KquantRepack(typ, src, ne[0], j.nrow, dst) != 0 {
					err := fmt.Errorf("%s: the kernel refused the shape", j.w.describe())
					failed.Store(&err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	return nil
}

// Weights is w's repacked copy, or nil where the set has none.
func (s *KQuantSet) Weights(w *Tensor) *KQuantWeights {
	if s == nil || s.ctx == nil {
		return nil
	}
	return s.byW[w]
}

// Bytes is the size of the set's copies.
func (s *KQuantSet) Bytes() int64 { return s.size }

// Close frees the copies. It is safe to call more than once and on nil.
func (s *KQuantSet) Close() error {
	if s == nil || s.ctx == nil {
		return nil
	}
	s.buf.Close()
	err := s.ctx.Close()
	s.ctx, s.buf, s.byW = nil, nil, nil
	return err
}

// Type is the ggml type the weights had: q4_K, q5_K, q6_K, q4_0, q5_0 or q5_1.
func (w *KQuantWeights) Type() Type { return w.typ }

// Ne is the shape of the weights: [k, n].
func (w *KQuantWeights) Ne() [2]int64 { return [2]int64{w.k, w.n} }

// closed reports whether w's set was closed.
func (w *KQuantWeights) closed() bool { return w == nil || w.set == nil || w.set.ctx == nil }

// MulMatKQuant is MulMat(w, x) for repacked k-quant weights, computed by toy's kernel
// (kernels/cpu/c/mul_mat_kquant.c) as a ggml custom operation: x f32 [k, m] (2-D, rows
// contiguous, any m), the result f32 [n, m]. The kernel quantizes x as ggml's q8_K (the scale,
// the rounding) and sums every product in integers, as ggml's own k-quant kernels do, with
// AVX-512 VNNI, reading each weight once for up to 8 columns (generation) or in tiles of 16 rows
// by 8 columns (a prompt). Only the CPU backend computes it, and autodiff cannot differentiate
// it.
func (c *Context) MulMatKQuant(w *KQuantWeights, x *Tensor) *Tensor {
	if w.closed() {
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
	if w.closed() {
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
