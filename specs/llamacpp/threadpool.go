package llamacpp

import . "github.com/toyml/toy/specs/spec"

// The oracle computes with a persistent ggml thread pool, as llama-bench does, so that a
// side-by-side benchmark compares toy's pooled backend with a pooled llama.cpp. These repeat
// the pool's part of specs/ggml (handles of one bound package cannot cross into another).

// Threadpool is a ggml CPU thread pool whose workers persist between graphs.
//
//kernelgen:handle ggml_threadpool_t = struct ggml_threadpool
type Threadpool struct{}

// ThreadpoolParams configure a Threadpool (from ThreadpoolParamsDefault).
//
//kernelgen:struct struct ggml_threadpool_params
type ThreadpoolParams struct {
	// Cpumask marks the cores the threads may run on (all false: the default affinity).
	Cpumask [512]bool // GGML_MAX_N_THREADS
	// NThreads is the number of threads, the caller's included.
	NThreads Int
	// Prio is the threads' scheduling priority.
	Prio SchedPrio
	// Poll is how long an idle worker polls before it sleeps (0 to 100).
	Poll uint32
	// StrictCPU places each thread on its own core of Cpumask.
	StrictCPU bool //kernelgen:c strict_cpu
	// Paused starts the pool paused.
	Paused bool
}

// SchedPrio is a thread scheduling priority (enum ggml_sched_priority).
//
//kernelgen:enum enum ggml_sched_priority prefix=GGML_SCHED_PRIO_
type SchedPrio int32

const (
	// SchedPrioNormal keeps the threads' inherited priority.
	SchedPrioNormal SchedPrio = 0
)

// ThreadpoolFuncs make and free ggml thread pools. Each binds ggml_threadpool_NAME as
// ThreadpoolNAME.
//
//kernelgen:functions prefix=ggml_threadpool_ goprefix=Threadpool
type ThreadpoolFuncs interface {
	// ParamsDefault are the default parameters of a pool of nThreads threads.
	ParamsDefault(nThreads Int) ThreadpoolParams
	// New starts a pool; nil on failure.
	New(params *ThreadpoolParams) Threadpool
	// Free stops the pool's threads and releases it; no context may use it afterwards.
	Free(threadpool Threadpool)
	// Pause lets the pool's workers sleep until its next graph, which resumes them, instead of
	// polling for one.
	Pause(threadpool Threadpool)
}

// ThreadpoolAPI attaches pools to a context.
//
//kernelgen:functions prefix=llama_
type ThreadpoolAPI interface {
	// AttachThreadpool makes ctx compute single tokens with threadpool and batches with
	// threadpoolBatch (nil: threadpool).
	AttachThreadpool(ctx Context, threadpool, threadpoolBatch Threadpool)
	// DetachThreadpool makes ctx start its workers per graph again.
	DetachThreadpool(ctx Context)
}
