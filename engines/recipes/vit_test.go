package recipes

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/llama"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/ggml"
)

// TestViTLearnsShapes trains a tiny ViT on generated shapes (squares, crosses, circles) and
// checks it reaches ≥ 90 % held-out accuracy, that the run bundle records accuracy, and that
// the checkpoint loads back and classifies as the run measured.
func TestViTLearnsShapes(t *testing.T) {
	v := DefaultViT()
	v.Model.ImageSize, v.Model.PatchSize, v.Model.Channels = 16, 4, 1
	v.Model.DModel, v.Model.NHeads, v.Model.DFF, v.Model.NLayers, v.Model.Classes = 32, 2, 64, 2, 3
	v.Shapes, v.Held, v.Steps, v.Batch, v.LR, v.Warmup, v.EvalEvery, v.Threads = 600, 120, 500, 32, 3e-3, 20, 250, 1
	v.Dir = t.TempDir()
	var out bytes.Buffer
	v.Out = &out
	res, err := v.Run(context.Background())
	require.NoError(t, err)
	t.Logf("%s", out.String())
	assert.GreaterOrEqual(t, res.Accuracy, 0.9, "held-out accuracy")

	events, err := runs.ReadEvents(res.RunDir + "/events.jsonl")
	require.NoError(t, err)
	var evals int
	for _, e := range events {
		if ev, ok := e.Data.(runs.Eval); ok {
			require.NotNil(t, ev.Accuracy)
			evals++
		}
	}
	assert.Equal(t, 2, evals)

	be, err := ggml.NewCPUBackend(2)
	require.NoError(t, err)
	defer be.Close()
	m, values, err := llama.Load(res.Checkpoint, be)
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, []string{"square", "cross", "circle"}, values[ClassNamesKey])
	assert.Equal(t, v.Model, *m.ViT)
	all, err := v.LoadImages()
	require.NoError(t, err)
	_, held, err := all.Split(v.Held, v.Seed)
	require.NoError(t, err)
	ev, err := llama.NewClassifierEvaluator(m, 8)
	require.NoError(t, err)
	defer ev.Close()
	_, acc, err := heldOut(ev, held)
	require.NoError(t, err)
	assert.InDelta(t, res.Accuracy, acc, 1e-9, "the checkpoint classifies as the run measured")
}
