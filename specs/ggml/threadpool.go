package ggml

import . "github.com/toyml/toy/specs/spec"

// Threadpool is a CPU thread pool (ggml-cpu.h): worker threads that persist between graph
// computations, waiting (polling, then sleeping) for the next graph. Without one, the CPU
// backend starts and joins its workers in every GraphCompute.
//
//kernelgen:handle ggml_threadpool_t = struct ggml_threadpool
type Threadpool struct{}

// ThreadpoolParams configure a Threadpool (fill them with ThreadpoolParamsDefault).
//
//kernelgen:struct struct ggml_threadpool_params
type ThreadpoolParams struct {
	// Cpumask marks the cores the threads may run on (all false: the default affinity).
	Cpumask [512]bool // GGML_MAX_N_THREADS
	// NThreads is the number of threads, the caller's included.
	NThreads Int
	// Prio is the threads' scheduling priority.
	Prio SchedPrio
	// Poll is how long an idle worker polls before it sleeps (0: sleep at once, 100: poll
	// hardest).
	Poll uint32
	// StrictCPU places each thread on its own core of Cpumask.
	StrictCPU bool //kernelgen:c strict_cpu
	// Paused starts the pool paused (ggml_threadpool_resume starts it).
	Paused bool
}

// SchedPrio is a thread scheduling priority (enum ggml_sched_priority).
//
//kernelgen:enum enum ggml_sched_priority prefix=GGML_SCHED_PRIO_
type SchedPrio int32

const (
	// SchedPrioLow is the normal policy at the lowest priority.
	SchedPrioLow SchedPrio = -1
	// SchedPrioNormal keeps the threads' inherited priority (the default).
	SchedPrioNormal SchedPrio = 0
	// SchedPrioMedium is real-time FIFO scheduling at priority 40.
	SchedPrioMedium SchedPrio = 1
	// SchedPrioHigh is FIFO at 80.
	SchedPrioHigh SchedPrio = 2
	// SchedPrioRealtime is FIFO at 90.
	SchedPrioRealtime SchedPrio = 3
)

// ThreadpoolFuncs make and free thread pools (ggml.h and ggml-cpu.h). Each binds
// ggml_threadpool_NAME as ThreadpoolNAME. (ggml-cpu.h declares ggml_threadpool_get_n_threads,
// but this ggml does not define it.)
//
//kernelgen:functions prefix=ggml_threadpool_ goprefix=Threadpool
type ThreadpoolFuncs interface {
	// ParamsDefault are the default parameters of a pool of nThreads threads.
	ParamsDefault(nThreads Int) ThreadpoolParams
	// New starts a pool; nil on failure.
	New(params *ThreadpoolParams) Threadpool
	// Free stops the pool's threads and releases it; no backend may use it afterwards.
	Free(threadpool Threadpool)
	// Pause lets the pool's workers sleep until its next graph, which resumes them, instead of
	// polling for one.
	Pause(threadpool Threadpool)
}

// CPUThreadpoolFuncs attach a pool to a CPU backend.
//
//kernelgen:functions prefix=ggml_backend_cpu_ goprefix=BackendCPU
type CPUThreadpoolFuncs interface {
	// SetThreadpool makes the CPU backend compute with threadpool (nil: its own workers,
	// started per graph); the pool's thread count then replaces the backend's.
	SetThreadpool(be Backend, threadpool Threadpool)
}
