package speculative

import (
	"encoding/json"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

var updateDFlashFixture = flag.Bool("update-dflash-fixture", false,
	"rewrite testdata/dflash-*: a target, a drafter Save wrote for it and the block logits its graph gives")

// The fixture of TestDFlashSavedFileLoads: a small qwen3 target (f16; neox RoPE, QK norms, heads
// wider than d/H) and a drafter for it, as toy wrote them when the drafter still had its own
// forward pass, with the logits that pass gave for two blocks.
const (
	dflashFixtureTarget  = "testdata/dflash-target.gguf"
	dflashFixtureDrafter = "testdata/dflash-drafter.gguf"
	dflashFixtureBlocks  = "testdata/dflash-blocks.json"
)

// dflashFixtureBlock is one block of the fixture: its anchor and position, its context rows,
// and the logits [Gamma][Vocab] the drafter's uncached graph gave for it.
type dflashFixtureBlock struct {
	Anchor int32       `json:"anchor"`
	Pos    int         `json:"pos"`
	Ctx    [][]float32 `json:"ctx"`
	Logits [][]float32 `json:"logits"`
}

// writeDFlashFixture writes the fixture's target and drafter, and the blocks' logits as the
// drafter computes them now.
func writeDFlashFixture(t *testing.T) {
	a := transformertest.TinyArch("qwen3")
	a.DModel, a.NHeads, a.NKVHeads, a.DFF, a.NLayers = 32, 2, 1, 16, 3
	require.NoError(t, os.MkdirAll("testdata", 0o755))
	_, err := transformer.WriteRandomGGUFValues(dflashFixtureTarget, a, ggml.F16, 17, 1, false)
	require.NoError(t, err)
	m := decodingtest.OpenTiny(t, dflashFixtureTarget, decoding.ModelOptions{})
	cfg := DFlashConfig{Gamma: 4, Window: 6, MaskToken: 5, TargetLayers: []int{0, 1}, Layers: 2}
	df, err := NewDFlash(m, cfg, 19)
	require.NoError(t, err)
	defer df.Close()
	require.NoError(t, df.Save(dflashFixtureDrafter))
	g, err := df.buildInference(1, cfg.Window)
	require.NoError(t, err)
	defer g.close()
	rng := rand.New(rand.NewPCG(23, 29))
	var blocks []dflashFixtureBlock
	for _, n := range []int{4, 9} { // fewer context rows than the window, and more
		blk := dflashFixtureBlock{Anchor: int32(rng.IntN(a.Vocab)), Pos: n, Ctx: randomRows(rng, n, cfg.features(&m.Arch))}
		require.NoError(t, g.in.set(df, []dflashBlock{{Anchor: blk.Anchor, Pos: blk.Pos, Ctx: blk.Ctx}}))
		require.NoError(t, m.Backend().Compute(g.graph))
		out, err := g.logits.F32()
		require.NoError(t, err)
		for k := range cfg.Gamma {
			blk.Logits = append(blk.Logits, out[k*a.Vocab:(k+1)*a.Vocab])
		}
		blocks = append(blocks, blk)
	}
	b, err := json.Marshal(blocks)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dflashFixtureBlocks, b, 0o644))
}

// TestDFlashSavedFileLoads: a drafter file written by an earlier toy (testdata, with its target)
// opens for that target and gives, uncached and cached, the block logits that toy's graph gave
// and the float64 reference's. Rewrite the fixture with -update-dflash-fixture.
func TestDFlashSavedFileLoads(t *testing.T) {
	if *updateDFlashFixture {
		writeDFlashFixture(t)
	}
	m := decodingtest.OpenTiny(t, dflashFixtureTarget, decoding.ModelOptions{})
	df, err := OpenDFlash(dflashFixtureDrafter, m)
	require.NoError(t, err)
	defer df.Close()
	cfg := df.Cfg
	assert.Equal(t, DFlashConfig{Gamma: 4, Window: 6, MaskToken: 5, TargetLayers: []int{0, 1}, Layers: 2}, cfg)
	raw, err := os.ReadFile(dflashFixtureBlocks)
	require.NoError(t, err)
	var blocks []dflashFixtureBlock
	require.NoError(t, json.Unmarshal(raw, &blocks))
	require.Len(t, blocks, 2)
	w := drafterWeights(t, df, decodingtest.LoadedWeights(t, m))
	g, err := df.buildInference(1, cfg.Window)
	require.NoError(t, err)
	defer g.close()
	slot, err := df.NewSlot(m.Arch.Context)
	require.NoError(t, err)
	defer slot.Close()
	rule, err := NewSpecSampler(sample.NewSampler(sample.GreedyParams()), 0)
	require.NoError(t, err)
	V := m.Arch.Vocab
	for _, blk := range blocks {
		require.NoError(t, g.in.set(df, []dflashBlock{{Anchor: blk.Anchor, Pos: blk.Pos, Ctx: blk.Ctx}}))
		require.NoError(t, m.Backend().Compute(g.graph))
		got, err := g.logits.F32()
		require.NoError(t, err)
		// The cached drafter, fed the same rows (hist's tokens before the anchor are not read).
		slot.Restart(0)
		slot.Keep(blk.Ctx)
		hist := append(make([]int32, blk.Pos), blk.Anchor)
		_, err = slot.Propose(rule, hist, cfg.Gamma-1)
		require.NoError(t, err)
		cached := slot.d.logits
		ref := drafterRef(m.Arch, w, cfg, blk.Anchor, blk.Pos, blk.Ctx)
		worst, worstCached, worstRef := 0.0, 0.0, 0.0
		for k, row := range blk.Logits {
			require.Len(t, row, V)
			for v, x := range row {
				worst = math.Max(worst, math.Abs(float64(got[k*V+v]-x)))
				worstCached = math.Max(worstCached, math.Abs(float64(cached[k*V+v]-x)))
				worstRef = math.Max(worstRef, math.Abs(float64(x)-ref[k][v]))
			}
		}
		t.Logf("context %d: max abs difference %.2g (uncached), %.2g (cached); the file's logits against the reference %.2g", blk.Pos, worst, worstCached, worstRef)
		assert.Less(t, worst, 1e-4, "context %d: uncached against the earlier toy's", blk.Pos)
		assert.Less(t, worstCached, 1e-4, "context %d: cached against the earlier toy's", blk.Pos)
		assert.Less(t, worstRef, 1e-4, "context %d: the earlier toy's against the reference", blk.Pos)
	}
}
