package training

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/mpi"
	"github.com/toyml/toy/mpi/mpitest"
)

// A data-parallel curve: the tiny preset trained for dpSteps steps on global batches of
// dpBatch random sequences of dpSeq tokens.
const dpBatch, dpSeq, dpSteps = 4, 16, 6

// dpCurve is what one replica (or the single reference trainer) saw and ended with.
type dpCurve struct {
	Losses  []float32
	Weights map[string][]float32
}

// trainShare trains the tiny preset as replica rank of size (a single trainer when r is nil)
// on its share of each global batch, and returns its losses and final weights. With masked,
// every sequence gets a random loss mask, so the replicas' losses cover different numbers of
// positions.
func trainShare(t *testing.T, r GradientReducer, rank, size int, masked bool) dpCurve {
	return trainShareOn(t, ggml.NewCPUBackend, r, rank, size, masked)
}

// trainShareOn is trainShare on a backend that newBackend opens with 1 thread.
func trainShareOn(t *testing.T, newBackend func(threads int) (*ggml.Backend, error), r GradientReducer, rank, size int, masked bool) dpCurve {
	c, err := config.LlamaPreset("tiny")
	require.NoError(t, err)
	c.Seed = 11
	be, err := newBackend(1)
	require.NoError(t, err)
	defer be.Close()
	m, err := New(c, be)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Init())
	share := dpBatch / size
	newTr := NewTrainer
	if masked {
		newTr = NewMaskedTrainer
	}
	tr, err := newTr(m, dpSeq, share, replicaOf(r)...)
	require.NoError(t, err)
	defer tr.Close()
	adamw := train.FromScratch()
	adamw.LR = 3e-3
	rng := rand.New(rand.NewPCG(3, 4)) // every replica draws the same global batches
	var curve dpCurve
	for step := 0; step < dpSteps; step++ {
		seqs := randomSeqs(rng, dpBatch, dpSeq, c.Vocab)
		var keep [][]bool
		if masked {
			keep = make([][]bool, dpBatch)
			for s := range keep {
				keep[s] = make([]bool, dpSeq)
				for i := range keep[s] {
					keep[s][i] = rng.IntN(3) > 0 || i == 0
				}
			}
			keep = keep[rank*share : (rank+1)*share]
		}
		decay, err := adamw.Params(step, adamw.LR, true)
		require.NoError(t, err)
		noDecay, _ := adamw.Params(step, adamw.LR, false)
		loss, err := tr.StepMasked(seqs[rank*share:(rank+1)*share], keep, decay, noDecay)
		require.NoError(t, err)
		curve.Losses = append(curve.Losses, loss)
	}
	curve.Weights = weightsOf(t, m)
	return curve
}

// replicaOf are the options of a trainer that is a replica of r's job (none when r is nil).
func replicaOf(r GradientReducer) []TrainerOption {
	if r == nil {
		return nil
	}
	return []TrainerOption{DataParallel(r)}
}

// weightsOf reads every weight of m by name.
func weightsOf(t *testing.T, m *Model) map[string][]float32 {
	ws := map[string][]float32{}
	for _, w := range m.Weights() {
		var err error
		ws[w.Name()], err = w.F32()
		require.NoError(t, err)
	}
	return ws
}

// TestDataParallelMatchesOneTrainer: two replicas of half the batch each, averaging their
// gradients with MPI, reproduce one trainer of the whole batch — the same loss at every step
// and the same final weights — with and without loss masks (whose replicas' losses cover
// different numbers of positions).
//
// Tolerances: the two runs add the same float32 terms in another order (a mean over 64 rows
// against the mean of two means of 32, the gradient sums likewise, and with masks each
// replica's gradient scaled by its kept positions and back), which differ by a few ulps
// (~1e-7 relative). The losses stay within 1e-5 relative. AdamW divides each gradient by the
// root of its second moment, so an element whose gradient nearly cancels can carry a relative
// error of its update (at most lr = 3e-3 per step) much larger than its gradient's; measured,
// the weights agree within 6e-6 after 6 steps, and the test allows 1e-4. Real faults are far
// outside: replicas training on the same shard move the weights by 3e-2, and a sum instead of a
// mean doubles the losses (AdamW itself is blind to a gradient's scale).
func TestDataParallelMatchesOneTrainer(t *testing.T) {
	out := os.Getenv("TOY_DP_TEST_OUT")
	if mpitest.Rank() >= 0 {
		if out == "" {
			t.Skip("a rank of another test")
		}
		w, err := mpi.Init(mpi.DefaultOptions())
		require.NoError(t, err)
		for _, masked := range []bool{false, true} {
			curve := trainShare(t, w, w.Rank(), w.Size(), masked)
			b, err := json.Marshal(curve)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(out, fmt.Sprintf("rank%d-masked%v.json", w.Rank(), masked)), b, 0o644))
		}
		require.NoError(t, w.Finalize())
		return
	}
	dir := t.TempDir()
	res := mpitest.Launch(t, 2, "TestDataParallelMatchesOneTrainer", 3*time.Minute, "TOY_DP_TEST_OUT="+dir)
	require.NoError(t, res.Err, res.Output)
	for _, masked := range []bool{false, true} {
		want := trainShare(t, nil, 0, 1, masked)
		assert.Less(t, want.Losses[dpSteps-1], want.Losses[0], "the curve learns")
		for rank := 0; rank < 2; rank++ {
			compareCurves(t, want, readCurve(t, dir, rank, masked, res.Output), fmt.Sprintf("masked %v, rank %d", masked, rank))
		}
	}
}

// readCurve reads what rank wrote into dir.
func readCurve(t *testing.T, dir string, rank int, masked bool, output string) dpCurve {
	b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank%d-masked%v.json", rank, masked)))
	require.NoError(t, err, output)
	var got dpCurve
	require.NoError(t, json.Unmarshal(b, &got))
	return got
}

// compareCurves checks a replica's curve against one trainer's within the tolerances
// TestDataParallelMatchesOneTrainer explains.
func compareCurves(t *testing.T, want, got dpCurve, what string) {
	require.Len(t, got.Losses, len(want.Losses))
	for i, l := range want.Losses {
		assert.InEpsilon(t, l, got.Losses[i], 1e-5, "%s, step %d", what, i)
	}
	require.Len(t, got.Weights, len(want.Weights))
	worst, where := 0.0, ""
	for name, w := range want.Weights {
		g := got.Weights[name]
		require.Len(t, g, len(w), name)
		for i := range w {
			if d := math.Abs(float64(w[i] - g[i])); d > worst {
				worst, where = d, fmt.Sprintf("%s[%d]", name, i)
			}
		}
	}
	assert.Less(t, worst, 1e-4, "%s: weights differ by %g at %s", what, worst, where)
	t.Logf("%s: largest weight difference %.2g (%s)", what, worst, where)
}

// soleReducer is the reducer of a job of one replica: the sum is the buffer itself. It counts
// the floats it was given.
type soleReducer struct{ floats int }

func (r *soleReducer) AllReduceSum(buf []float32) error {
	r.floats += len(buf)
	return nil
}

// TestDataParallelComputesInPlace: a replica's backward pass writes every gradient straight
// into the buffer the reducer sums (no copy between them), and one replica alone trains as a
// trainer without the option does, masked or not.
func TestDataParallelComputesInPlace(t *testing.T) {
	if mpitest.Rank() >= 0 {
		t.Skip("a rank of another test")
	}
	for _, masked := range []bool{false, true} {
		want := trainShare(t, nil, 0, 1, masked)
		r := &soleReducer{}
		got := trainShare(t, r, 0, 1, masked)
		for i, l := range want.Losses {
			assert.InEpsilon(t, l, got.Losses[i], 1e-6, "masked %v, step %d", masked, i)
		}
		for name, w := range want.Weights {
			assert.InDeltaSlice(t, w, got.Weights[name], 1e-6, "masked %v: %s", masked, name)
		}
		assert.Greater(t, r.floats, 0)
	}

	c, err := config.LlamaPreset("tiny")
	require.NoError(t, err)
	be, err := ggml.NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	m, err := New(c, be)
	require.NoError(t, err)
	defer m.Close()
	tr, err := NewTrainer(m, dpSeq, 2, DataParallel(&soleReducer{}))
	require.NoError(t, err)
	defer tr.Close()
	require.Len(t, tr.dp.grads, len(m.trainable().params))
	floats := 1 // the loss
	for i, g := range tr.dp.grads {
		assert.True(t, tr.dp.buf.Holds(g), "%s is computed outside the reduced buffer", g.Name())
		floats += int(tr.dp.slots[i].Len())
	}
	assert.InDelta(t, floats, len(tr.dp.host), float64(64*len(tr.dp.grads)), "the reduced buffer is the gradients and the loss, aligned")
}

// memJob is a data-parallel job of n replicas in one process (goroutines): each reduce waits
// for all n and gives each the sum, added in replica order.
type memJob struct {
	mu    sync.Mutex
	cond  *sync.Cond
	n     int
	bufs  [][]float32
	round int
}

func newMemJob(n int) *memJob {
	j := &memJob{n: n}
	j.cond = sync.NewCond(&j.mu)
	return j
}

// replica is the reducer of replica r.
func (j *memJob) replica(r int) GradientReducer { return memReplica{j, r} }

type memReplica struct {
	j *memJob
	r int
}

func (m memReplica) AllReduceSum(buf []float32) error {
	j := m.j
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.bufs == nil {
		j.bufs = make([][]float32, j.n)
	}
	j.bufs[m.r] = buf
	round := j.round
	for _, b := range j.bufs {
		if b == nil {
			for j.round == round {
				j.cond.Wait()
			}
			return nil
		}
	}
	sum := make([]float32, len(buf))
	for _, b := range j.bufs {
		if len(b) != len(sum) {
			return fmt.Errorf("replicas reduce %d and %d values", len(b), len(sum))
		}
		for i, v := range b {
			sum[i] += v
		}
	}
	for _, b := range j.bufs {
		copy(b, sum)
	}
	j.bufs = nil
	j.round++
	j.cond.Broadcast()
	return nil
}

// TestDataParallelViT: two replicas of a tiny ViT, each stepping half of every batch of
// images with StepImages and averaging through an in-process job, reproduce one classifier
// trainer of the whole batch (losses and final weights, within the tolerances of
// TestDataParallelMatchesOneTrainer).
func TestDataParallelViT(t *testing.T) {
	if mpitest.Rank() >= 0 {
		t.Skip("a rank of another test")
	}
	const B, steps = 6, 5
	c := transformertest.TinyViT()
	c.InitScale = 0.3
	rng := rand.New(rand.NewPCG(5, 6))
	var batches []*train.ClassificationBatch
	var halves [][2]*train.ClassificationBatch
	for i := 0; i < steps; i++ {
		_, px, labels := randomImages(rng, B, transformer.PixelsPerImage(c), c.Classes)
		b, err := train.NewClassificationBatch(px, labels, transformer.PixelsPerImage(c), c.Classes)
		require.NoError(t, err)
		batches = append(batches, b)
		var h [2]*train.ClassificationBatch
		for r := range h {
			h[r], err = train.NewClassificationBatch(px[r*B/2:(r+1)*B/2], labels[r*B/2:(r+1)*B/2], transformer.PixelsPerImage(c), c.Classes)
			require.NoError(t, err)
		}
		halves = append(halves, h)
	}
	run := func(batch int, r GradientReducer, data func(step int) *train.ClassificationBatch) dpCurve {
		be, err := ggml.NewCPUBackend(1)
		require.NoError(t, err)
		defer be.Close()
		m, err := NewViT(c, be)
		require.NoError(t, err)
		defer m.Close()
		require.NoError(t, m.Init())
		tr, err := NewClassifierTrainer(m, batch, replicaOf(r)...)
		require.NoError(t, err)
		defer tr.Close()
		adamw := train.FromScratch()
		// The keys' bias has no gradient but rounding (softmax ignores a shift of every
		// key), which AdamW turns into steps of up to lr in either direction: the rate keeps
		// them within the tolerance.
		adamw.LR = 1e-3
		var curve dpCurve
		for i := 0; i < steps; i++ {
			p, err := adamw.Params(i, adamw.LR, true)
			require.NoError(t, err)
			loss, _, err := tr.StepImages(data(i), p, p)
			require.NoError(t, err)
			curve.Losses = append(curve.Losses, loss)
		}
		curve.Weights = weightsOf(t, m)
		return curve
	}
	want := run(B, nil, func(i int) *train.ClassificationBatch { return batches[i] })
	job := newMemJob(2)
	var got [2]dpCurve
	var wg sync.WaitGroup
	for r := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[r] = run(B/2, job.replica(r), func(i int) *train.ClassificationBatch { return halves[i][r] })
		}()
	}
	wg.Wait()
	for r := range got {
		compareCurves(t, want, got[r], fmt.Sprintf("replica %d", r))
	}
	assert.NotEqual(t, want.Weights, run(B/2, nil, func(i int) *train.ClassificationBatch { return halves[i][0] }).Weights,
		"half the batch alone trains otherwise")
}
