package main

import (
	"fmt"
	"os"
	"time"

	"github.com/toyml/toy/mpi"
)

// joinJob makes this process a rank of a data-parallel job when Open MPI's mpirun started it
// with others (docs/DISTRIBUTED.md): it loads libmpi and initializes MPI. Otherwise it returns
// nil and loads nothing. TOY_MPI_TIMEOUT (a Go duration, e.g. 30m) bounds how long a rank
// waits for the others in one step (mpi.DefaultOptions otherwise).
func joinJob() (*mpi.World, error) {
	n, err := mpi.Launched()
	if err != nil || n == 1 {
		return nil, err
	}
	opts := mpi.DefaultOptions()
	if v := os.Getenv("TOY_MPI_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("TOY_MPI_TIMEOUT=%q: want a duration such as 30m", v)
		}
		opts.Timeout = d
	}
	return mpi.Init(opts)
}

// leaveJob ends this rank's part in the job: after an error it aborts every rank (so none
// waits for this one), else it finalizes MPI. A nil World (no job) leaves err as it is.
func leaveJob(w *mpi.World, command string, err error) error {
	if w == nil {
		return err
	}
	if err != nil {
		if _, interrupted := err.(*interruptedError); !interrupted {
			w.Abort(1, fmt.Errorf("toy %s: %w", command, err))
		}
	}
	if ferr := w.Finalize(); ferr != nil && err == nil {
		return ferr
	}
	return err
}
