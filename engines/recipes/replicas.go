package recipes

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/ggml"
)

// Replicas is the data-parallel job a recipe runs in: one process per rank (an *mpi.World
// under mpirun). Every rank builds the same model, reads its share of each global batch
// (Batch/Size() sequences), and its trainer averages the gradients over the ranks before the
// same AdamW step (training.DataParallel). Rank 0 alone writes the run: the run directory, its
// data, events, checkpoints and the console output; the others read the run directory, which
// must be at the same path on every rank (a shared file system, or a copy).
type Replicas interface {
	training.GradientReducer
	// Rank is this process's rank, 0 to Size()-1.
	Rank() int
	// Size is the number of ranks.
	Size() int
	// BroadcastString returns rank root's s on every rank.
	BroadcastString(s string, root int) (string, error)
	// AllReduceMax replaces each element of buf by its maximum over the ranks.
	AllReduceMax(buf []float64) error
}

// replicated reports whether r is a job of more than one rank.
func replicated(r Replicas) bool { return r != nil && r.Size() > 1 }

// isLead reports whether this process writes the run: it trains alone, or it is rank 0.
func isLead(r Replicas) bool { return !replicated(r) || r.Rank() == 0 }

// checkShare refuses a global batch the ranks cannot share evenly.
func checkShare(r Replicas, batch int) error {
	if replicated(r) && batch%r.Size() != 0 {
		return fmt.Errorf("batch %d: a data-parallel run of %d ranks needs a batch that is a multiple of %d (each rank trains batch/%d sequences)", batch, r.Size(), r.Size(), r.Size())
	}
	return nil
}

// shareOf is rank's part of a global batch of rows.
func shareOf[T any](r Replicas, rows []T) []T {
	if !replicated(r) || rows == nil {
		return rows
	}
	n := len(rows) / r.Size()
	return rows[r.Rank()*n : (r.Rank()+1)*n]
}

// localBatch is the batch each rank trains.
func localBatch(r Replicas, batch int) int {
	if !replicated(r) {
		return batch
	}
	return batch / r.Size()
}

// describeShare says how the ranks share the batch, for the console ("" alone).
func describeShare(r Replicas, batch int) string {
	if !replicated(r) {
		return ""
	}
	return fmt.Sprintf(" (%d ranks × %d sequences)", r.Size(), batch/r.Size())
}

// startMessage is what rank 0 tells the others once it has prepared the run.
type startMessage struct {
	Err   string          `json:"err,omitempty"`
	Dir   string          `json:"dir"`
	State json.RawMessage `json:"state"`
}

// shareStart opens the run on every rank: rank 0 prepares it (creates it, or reopens it to
// resume), then the others receive its directory and rank 0's options (state, marshalled
// and unmarshalled as JSON, so a tokenizer's vocabulary or a resumed run's options reach
// them) and call follow. A failure on rank 0 is every rank's.
func shareStart(r Replicas, state any, prepare func() (*runs.Run, error), follow func(dir string) (*runs.Run, error)) (*runs.Run, error) {
	var msg startMessage
	var run *runs.Run
	if r.Rank() == 0 {
		var err error
		if run, err = prepare(); err != nil {
			msg.Err = err.Error()
		} else {
			msg.Dir = run.Dir
			if msg.State, err = json.Marshal(state); err != nil {
				msg.Err = err.Error()
			}
		}
		b, _ := json.Marshal(msg)
		if _, berr := r.BroadcastString(string(b), 0); berr != nil || err != nil {
			if run != nil {
				run.Close()
			}
			return nil, errors.Join(err, berr)
		}
		return run, nil
	}
	b, err := r.BroadcastString("", 0)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(b), &msg); err != nil {
		return nil, fmt.Errorf("rank %d: the message from rank 0: %w", r.Rank(), err)
	}
	if msg.Err != "" {
		return nil, fmt.Errorf("rank 0 could not start the run: %s", msg.Err)
	}
	if err := json.Unmarshal(msg.State, state); err != nil {
		return nil, fmt.Errorf("rank %d: the options from rank 0: %w", r.Rank(), err)
	}
	return follow(msg.Dir)
}

// checkSameStart refuses to train when the ranks' trained weights differ (different flags, a
// different base file on some machine): their fingerprints must agree.
func checkSameStart(r Replicas, weights []*ggml.Tensor) error {
	if !replicated(r) {
		return nil
	}
	h := fnv.New64a()
	for _, w := range weights {
		b, err := w.ReadBytes()
		if err != nil {
			return err
		}
		h.Write(b)
	}
	sum := h.Sum64()
	// Two float64 halves of 32 bits each are exact; max and -min agree only if all do.
	hi, lo := float64(sum>>32), float64(sum&math.MaxUint32)
	buf := []float64{hi, lo, -hi, -lo}
	if err := r.AllReduceMax(buf); err != nil {
		return err
	}
	if buf[0] != -buf[2] || buf[1] != -buf[3] {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], sum)
		return fmt.Errorf("rank %d starts from other weights than another rank (fingerprint %x): give every rank the same flags and files", r.Rank(), b)
	}
	return nil
}

// agreeToStop tells whether any rank wants to stop (Ctrl-C reaches the ranks at different
// moments): every rank then stops after the same step.
func agreeToStop(r Replicas, stop bool) (bool, error) {
	if !replicated(r) {
		return stop, nil
	}
	buf := []float64{0}
	if stop {
		buf[0] = 1
	}
	if err := r.AllReduceMax(buf); err != nil {
		return false, err
	}
	return buf[0] > 0, nil
}
