package speculative

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer/transformertest"
)

// TestDFlashNonFiniteStops: DFlash training stops (NonFiniteError) as the model trainers do
// (TestNonFiniteStops): a learning rate of 1e30 fails within its steps.
func TestDFlashNonFiniteStops(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 3))
	var nf *training.NonFiniteError
	target := dflashTarget(t, 8)
	var prompts [][]int32
	for range 4 {
		prompts = append(prompts, transformertest.RandomTokens(rng, 3, target.Arch.Vocab))
	}
	corpus, err := TargetText(context.Background(), target, prompts, 45, sample.GreedyParams(), decoding.DecoderOptions{}, nil)
	require.NoError(t, err)
	cfg := DFlashConfig{Gamma: 4, Window: 16, MaskToken: 0, TargetLayers: []int{0, 1}, Layers: 1}
	a := train.FromScratch()
	a.WeightDecay = 0
	_, err = TrainDFlash(target, cfg, corpus, DFlashTrainOptions{Steps: 10, Sequences: 2, SeqLen: 48, Anchors: 4, AdamW: a, LR: 1e30, Seed: 3})
	require.ErrorAs(t, err, &nf)
	assert.ErrorContains(t, err, "step ")
}
