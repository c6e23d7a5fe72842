// Package mpi runs toy's data-parallel training across processes and machines on MPI: it is
// the idiomatic layer over generated/mpi, which binds Open MPI's libmpi from specs/mpi and
// opens it with dlopen. A process that mpirun did not start (or started alone) never loads
// the library: Launched says whether to, and toy then runs as it always does.
//
// A World is this process's place in the job: its rank and the number of ranks, and the
// collectives training needs (allreduce of float32 sums, in place and in buckets, broadcast,
// barrier), each guarded by a timeout after which the process reports which collective stalled
// and exits, so that a stopped or lost rank ends the job instead of hanging it. Abort ends
// every rank at once. In a cuda build, a DeviceWorld adds NCCL's allreduce on device memory,
// one GPU per rank (PinGPU).
//
// MPI is initialized with MPI_THREAD_SERIALIZED: Go moves goroutines between OS threads, and a
// World serializes its calls with a mutex.
package mpi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/toyml/toy/generated/mpi"
)

// Error is a failed MPI call.
type Error struct {
	// Op is the call, e.g. "MPI_Allreduce".
	Op string
	// Code is the error class MPI returned.
	Code mpi.Result
	// Text is MPI's description of Code.
	Text string
}

func (e *Error) Error() string { return fmt.Sprintf("mpi: %s: %s (%s)", e.Op, e.Text, e.Code) }

// ErrorString is MPI's description of an error code ("" when MPI cannot describe it).
func ErrorString(code mpi.Result) string {
	if !mpi.Loaded() {
		return ""
	}
	buf := make([]byte, mpi.LimitErrorString)
	var n int
	if mpi.ErrorString(code, buf, &n) != mpi.ResultSuccess || n <= 0 || n > len(buf) {
		return ""
	}
	return string(buf[:n])
}

// check turns an MPI result into an error.
func check(r mpi.Result, op string) error {
	if r == mpi.ResultSuccess {
		return nil
	}
	text := ErrorString(r)
	if text == "" {
		text = "unknown error"
	}
	return &Error{Op: op, Code: r, Text: text}
}

// Launched reports how many processes the launcher started for this job, read from the
// environment Open MPI's mpirun gives each process (OMPI_COMM_WORLD_SIZE); 1 when it did not
// start this one. It loads nothing. A launcher of another MPI (MPICH's, whose ABI toy does not
// bind) is an error.
func Launched() (int, error) {
	if v := os.Getenv("OMPI_COMM_WORLD_SIZE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("mpi: OMPI_COMM_WORLD_SIZE=%q is not a number of processes", v)
		}
		return n, nil
	}
	if v := os.Getenv("PMI_SIZE"); v != "" && v != "1" {
		return 0, fmt.Errorf("mpi: this process was started by an MPI launcher that is not Open MPI's (PMI_SIZE=%s): toy binds Open MPI (libmpi.so.40); start it with Open MPI's mpirun", v)
	}
	return 1, nil
}

// Options configure Init.
type Options struct {
	// StartTimeout bounds MPI's initialization: a rank that cannot reach the others (a wrong
	// host, a blocked port) reports it and exits instead of waiting forever.
	StartTimeout time.Duration
	// Timeout bounds every collective: if the other ranks have not joined one after this
	// long (one of them has stopped, or a machine is gone), the process says which collective
	// stalled and exits, which makes mpirun end the job.
	Timeout time.Duration
	// Log receives the timeout reports (os.Stderr when nil).
	Log io.Writer
	// BucketBytes is the size of the parts AllReduceSum reduces a buffer in (0: one call per
	// 2³⁰ elements, MPI's limit).
	BucketBytes int
}

// DefaultOptions wait 2 minutes for the job to start and 10 minutes for a collective (a
// training step, on the slowest rank, must finish within that), and reduce in parts of
// DefaultBucketBytes.
func DefaultOptions() Options {
	return Options{StartTimeout: 2 * time.Minute, Timeout: 10 * time.Minute, BucketBytes: DefaultBucketBytes}
}

// World is this process's place in the job: MPI_COMM_WORLD with its rank and size.
type World struct {
	mu        sync.Mutex
	rank      int
	size      int
	opts      Options
	finalized bool
	library   string
}

// exit ends the process after a timeout; tests replace it.
var exit = os.Exit

// Init loads Open MPI, initializes it (thread level SERIALIZED or better) and makes failed
// calls return errors rather than abort. It may be called once per process.
func Init(opts Options) (*World, error) {
	if err := mpi.Load(); err != nil {
		return nil, fmt.Errorf("%w (install Open MPI: Debian's openmpi-bin and libopenmpi3, or put its libmpi.so.40 on LD_LIBRARY_PATH)", err)
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	w := &World{opts: opts}
	var initialized int
	if err := check(mpi.Initialized(&initialized), "MPI_Initialized"); err != nil {
		return nil, err
	}
	if initialized != 0 {
		return nil, errors.New("mpi: MPI is already initialized in this process")
	}
	var provided mpi.ThreadLevel
	if err := w.guard("MPI_Init_thread", opts.StartTimeout, func() error {
		return check(mpi.InitThread(nil, nil, mpi.ThreadLevelSerialized, &provided), "MPI_Init_thread")
	}); err != nil {
		return nil, err
	}
	if provided < mpi.ThreadLevelSerialized {
		mpi.Finalize()
		return nil, fmt.Errorf("mpi: the library provides thread level %s; toy needs %s", provided, mpi.ThreadLevelSerialized)
	}
	world := mpi.CommWorld()
	if err := check(mpi.CommSetErrhandler(world, mpi.ErrorsReturn()), "MPI_Comm_set_errhandler"); err != nil {
		return nil, err
	}
	if err := check(mpi.CommRank(world, &w.rank), "MPI_Comm_rank"); err != nil {
		return nil, err
	}
	if err := check(mpi.CommSize(world, &w.size), "MPI_Comm_size"); err != nil {
		return nil, err
	}
	buf := make([]byte, mpi.LimitLibraryVersionString)
	var n int
	if mpi.GetLibraryVersion(buf, &n) == mpi.ResultSuccess && n > 0 && n <= len(buf) {
		w.library = firstLine(string(buf[:n]))
	}
	return w, nil
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' || r == ',' {
			return s[:i]
		}
	}
	return s
}

// Rank is this process's rank, 0 to Size()-1.
func (w *World) Rank() int { return w.rank }

// Size is the number of processes in the job.
func (w *World) Size() int { return w.size }

// Library names the MPI library, e.g. "Open MPI v4.1.4".
func (w *World) Library() string { return w.library }

// guard runs call, and if it has not returned after timeout, reports op and ends the process:
// a C call cannot be cancelled, and a rank stuck in a collective holds up every other.
func (w *World) guard(op string, timeout time.Duration, call func() error) error {
	if timeout <= 0 {
		return call()
	}
	t := time.AfterFunc(timeout, func() {
		fmt.Fprintf(w.opts.Log, "toy: rank %d: %s did not complete in %s: another rank has stopped or cannot be reached; ending the job\n", w.rank, op, timeout)
		exit(3)
	})
	defer t.Stop()
	return call()
}

// collective runs one MPI collective under the World's lock and timeout.
func (w *World) collective(op string, call func() mpi.Result) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finalized {
		return fmt.Errorf("mpi: %s after Finalize", op)
	}
	return w.guard(op, w.opts.Timeout, func() error { return check(call(), op) })
}

// maxCount is the most elements one call moves: MPI counts are C ints.
const maxCount = 1 << 30

// DefaultBucketBytes is the size of the parts AllReduceSum reduces a buffer in. One
// MPI_Allreduce of a whole 540 MB gradient ran at 0.35 GB/s on two ranks of one machine (Open
// MPI 4.1, shared memory), calls of 2 to 32 MB at 2 to 3.2 GB/s (docs/PERFORMANCE.md): the
// library's own pipelining loses to cache-sized parts: 512 KiB to 2 MiB ran alike here, 4 MiB
// 2.7× slower. Each part also costs a collective's latency on a network, about 2(N−1)
// messages, so the largest of the fast ones; a cluster wants larger (docs/PERFORMANCE.md).
const DefaultBucketBytes = 2 << 20

// ClusterBucketBytes is the part size for a job that spans machines: each part costs about
// 2(N−1) network latencies, which at 64 ranks over TCP would add 1.6 s a step to a 540 MB
// gradient in 2 MiB parts and 0.11 s in 32 MiB ones (docs/PERFORMANCE.md's projection; not
// measured on a real network).
const ClusterBucketBytes = 32 << 20

// BucketBytesFor is the part size for a job of world ranks of which local run on this
// machine: DefaultBucketBytes when they all do (shared memory), ClusterBucketBytes otherwise.
func BucketBytesFor(local, world int) int {
	if local > 0 && local < world {
		return ClusterBucketBytes
	}
	return DefaultBucketBytes
}

// LocalSize is the number of ranks mpirun started on this machine (Open MPI's
// OMPI_COMM_WORLD_LOCAL_SIZE; 0 when it did not say).
func LocalSize() int {
	n, _ := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
	return n
}

// AllReduceSum replaces buf, on every rank, by the element-wise sum of every rank's buf, in
// place (MPI_IN_PLACE: no second buffer), in parts of Options.BucketBytes. Every rank must
// call it with a buffer of the same length.
func (w *World) AllReduceSum(buf []float32) error {
	return w.allReduceInPlace(unsafe.Pointer(unsafe.SliceData(buf)), len(buf), 4, mpi.Float(), mpi.OpSum())
}

// AllReduceMax replaces each element of buf by its maximum over the ranks, in place.
func (w *World) AllReduceMax(buf []float64) error {
	return w.allReduceInPlace(unsafe.Pointer(unsafe.SliceData(buf)), len(buf), 8, mpi.Double(), mpi.OpMax())
}

// allReduceInPlace reduces n elements of size bytes at p with op, one MPI_Allreduce per bucket.
func (w *World) allReduceInPlace(p unsafe.Pointer, n, size int, typ mpi.Datatype, op mpi.Op) error {
	step := min(maxCount, max(1, w.opts.BucketBytes/size))
	if w.opts.BucketBytes <= 0 {
		step = maxCount
	}
	for off := 0; off < n; off += step {
		count := min(step, n-off)
		part := unsafe.Add(p, off*size)
		err := w.collective("MPI_Allreduce", func() mpi.Result {
			return mpi.Allreduce(mpi.InPlace(), part, count, typ, op, mpi.CommWorld())
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Broadcast copies buf from rank root to every other rank's buf (of the same length).
func (w *World) Broadcast(buf []byte, root int) error {
	if root < 0 || root >= w.size {
		return fmt.Errorf("mpi: broadcast from rank %d of %d", root, w.size)
	}
	for off := 0; off < len(buf); off += maxCount {
		n := min(maxCount, len(buf)-off)
		err := w.collective("MPI_Bcast", func() mpi.Result {
			return mpi.Bcast(unsafe.Pointer(&buf[off]), n, mpi.Byte(), root, mpi.CommWorld())
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// BroadcastFloat32 is Broadcast for float32 values.
func (w *World) BroadcastFloat32(buf []float32, root int) error {
	if len(buf) == 0 {
		return w.Broadcast(nil, root)
	}
	return w.Broadcast(unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 4*len(buf)), root)
}

// BroadcastString sends s from rank root to every rank and returns it there.
func (w *World) BroadcastString(s string, root int) (string, error) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
	if err := w.Broadcast(n[:], root); err != nil {
		return "", err
	}
	buf := make([]byte, binary.LittleEndian.Uint64(n[:]))
	copy(buf, s)
	if err := w.Broadcast(buf, root); err != nil {
		return "", err
	}
	return string(buf), nil
}

// Barrier returns when every rank has called it.
func (w *World) Barrier() error {
	return w.collective("MPI_Barrier", func() mpi.Result { return mpi.Barrier(mpi.CommWorld()) })
}

// Abort ends every rank of the job with exit status code (where the launcher passes it on),
// after printing why. It does not return.
func (w *World) Abort(code int, why error) {
	fmt.Fprintf(w.opts.Log, "toy: rank %d of %d: %v; aborting the job\n", w.rank, w.size, why)
	// Not under w.mu: the lock may be held by a collective that will never complete.
	mpi.Abort(mpi.CommWorld(), code)
	exit(code) // MPI_Abort should not return
}

// Finalize ends MPI in this process; every rank calls it before exiting. It waits (within the
// collective timeout) for the others.
func (w *World) Finalize() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finalized {
		return nil
	}
	w.finalized = true
	return w.guard("MPI_Finalize", w.opts.Timeout, func() error { return check(mpi.Finalize(), "MPI_Finalize") })
}
