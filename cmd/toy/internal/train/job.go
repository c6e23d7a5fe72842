package train

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/recipes"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/mpi"
)

// job is this process's part in a data-parallel job.
type job struct {
	world *mpi.World
	// replicas are what the recipes average gradients with: the World, or in a cuda build the
	// World with NCCL on this rank's GPU.
	replicas recipes.Replicas
	// release frees what replicas hold beyond the World (nil when nothing).
	release func() error
}

// joinJob makes this process a rank of a data-parallel job when Open MPI's mpirun started it
// with others (docs/DISTRIBUTED.md): it loads libmpi and initializes MPI. Otherwise it returns
// nil and loads nothing. TOY_MPI_TIMEOUT (a Go duration, e.g. 30m) bounds how long a rank
// waits for the others in one step, and TOY_MPI_BUCKET_KIB sets the size of the parts MPI
// reduces the gradients in (otherwise 2 MiB when every rank runs on this machine, 32 MiB when
// the job spans machines: mpi.BucketBytesFor). In a cuda build each rank
// takes one GPU of its machine, by its local rank (mpi.PinGPU), and reduces on it with NCCL.
func joinJob() (*job, error) {
	n, err := mpi.Launched()
	if err != nil || n == 1 {
		return nil, err
	}
	opts := mpi.DefaultOptions()
	opts.BucketBytes = mpi.BucketBytesFor(mpi.LocalSize(), n)
	if v := os.Getenv("TOY_MPI_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("TOY_MPI_TIMEOUT=%q: want a duration such as 30m", v)
		}
		opts.Timeout = d
	}
	if v := os.Getenv("TOY_MPI_BUCKET_KIB"); v != "" {
		kib, err := strconv.Atoi(v)
		if err != nil || kib <= 0 {
			return nil, fmt.Errorf("TOY_MPI_BUCKET_KIB=%q: want a positive number of KiB, e.g. 32768", v)
		}
		opts.BucketBytes = kib << 10
	}
	gpu := ""
	if ggml.BackendKind == "cuda" { // before anything starts CUDA
		if gpu, err = mpi.PinGPU(); err != nil {
			return nil, err
		}
	}
	w, err := mpi.Init(opts)
	if err != nil {
		return nil, err
	}
	j := &job{world: w, replicas: w}
	if gpu != "" {
		if j.replicas, j.release, err = onDevices(w); err != nil {
			err = fmt.Errorf("rank %d, on GPU %s (%s): %w", w.Rank(), gpu, mpi.VisibleDevices, err)
			w.Abort(1, err)
			return nil, err
		}
	}
	return j, nil
}

// leaveJob ends this rank's part in the job: after an error it aborts every rank (so none
// waits for this one), else it finalizes MPI. A nil job leaves err as it is.
func leaveJob(j *job, command string, err error) error {
	if j == nil {
		return err
	}
	if err != nil {
		if _, interrupted := err.(*cli.InterruptedError); !interrupted {
			j.world.Abort(1, fmt.Errorf("toy %s: %w", command, err))
		}
	}
	if j.release != nil {
		if rerr := j.release(); rerr != nil && err == nil {
			err = rerr
		}
	}
	if ferr := j.world.Finalize(); ferr != nil && err == nil {
		return ferr
	}
	return err
}
