package speculative

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
	"github.com/toyml/toy/internal/sysmem"
)

// headerSeeds writes the small valid files the loaders read: a random model of every variant
// OpenModel decodes, and training checkpoints of llama, gpt2 and vit (Load's).
func headerSeeds(t testing.TB) []string {
	var paths []string
	for _, v := range transformertest.AllVariants {
		paths = append(paths, transformertest.WriteTiny(t, transformertest.TinyArch(v), ggml.F32, 3))
	}
	be, err := ggml.NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	c := config.DefaultLlama()
	c.Vocab, c.DModel, c.DFF, c.NHeads, c.NKVHeads, c.NLayers, c.Context = 11, 8, 12, 4, 2, 2, 8
	g := config.DefaultGpt2()
	g.Vocab, g.DModel, g.DFF, g.NHeads, g.NLayers, g.Context = 11, 8, 12, 4, 2, 8
	for _, ck := range []struct {
		name string
		mk   func() (*training.Model, error)
	}{
		{"llama", func() (*training.Model, error) { return training.New(c, be) }},
		{"gpt2", func() (*training.Model, error) { return training.NewGPT2(g, be) }},
		{"vit", func() (*training.Model, error) { return training.NewViT(transformertest.TinyViT(), be) }},
	} {
		m, err := ck.mk()
		require.NoError(t, err)
		require.NoError(t, m.Init())
		p := filepath.Join(t.TempDir(), "checkpoint-"+ck.name+".gguf")
		require.NoError(t, m.Save(p, nil))
		m.Close()
		paths = append(paths, p)
	}
	return paths
}

// countKeys are the suffixes (after "<arch>.") of every metadata key holding a count or a size
// that a loader reads: the llama family's, gpt2's and vit's.
var countKeys = []string{
	"block_count", "context_length", "embedding_length", "feed_forward_length", "vocab_size",
	"attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
	"attention.sliding_window", "rope.dimension_count", "rope.scaling.original_context_length",
	"expert_count", "expert_used_count", "expert_feed_forward_length", "expert_shared_feed_forward_length",
	"image_size", "patch_size", "channels", "class_count",
}

// edit is one change to a seed file: a metadata value set (or added), a tensor's dimension
// changed (its data resized, zero-filled where it grows), a tensor dropped, and the header's
// tensor count lowered afterwards.
type edit struct {
	key      string // a key to set to value; "" for none
	value    uint64
	tensor   int // index of the tensor whose dimension dim becomes ne; -1 for none
	dim      int
	ne       int64
	drop     int // index of a tensor to leave out; -1 for none
	shortBy  int // how much to lower the header's tensor count by
	maxBytes int // the largest tensor data an edit may make
}

// apply writes the seed at src with the edit made and returns the new file's path.
func (e edit) apply(t testing.TB, src string) string {
	raw, err := os.ReadFile(src)
	require.NoError(t, err)
	f, err := gguffile.ReadFile(src)
	require.NoError(t, err)
	var w gguffile.Writer
	var value any = e.value
	if e.value <= math.MaxUint32 {
		value = uint32(e.value)
	}
	set := false
	for _, kv := range f.KVs {
		if kv.Key == e.key {
			kv.Value, set = value, true
		}
		require.NoError(t, w.AddKV(kv.Key, kv.Value))
	}
	if e.key != "" && !set {
		require.NoError(t, w.AddKV(e.key, value))
	}
	for i, ti := range f.Tensors {
		if i == e.drop {
			continue
		}
		data := raw[f.DataOffset+int64(ti.Offset) : f.DataOffset+int64(ti.Offset)+ti.Size]
		ne := ti.Shape()
		if i == e.tensor {
			ne[e.dim%len(ne)] = e.ne
			if size, ok := shapeBytes(ti.Type, ne); ok && size <= int64(e.maxBytes) {
				grown := make([]byte, size)
				copy(grown, data)
				data = grown
			} else {
				ne = ti.Shape()
			}
		}
		if err := w.AddTensor(ti.Name, ti.Type, ne, data); err != nil {
			ne = ti.Shape() // a shape the writer refuses (a zero in an outer dimension)
			require.NoError(t, w.AddTensor(ti.Name, ti.Type, ne, raw[f.DataOffset+int64(ti.Offset):f.DataOffset+int64(ti.Offset)+ti.Size]))
		}
	}
	var buf bytes.Buffer
	_, err = w.WriteTo(&buf)
	require.NoError(t, err)
	out := buf.Bytes()
	if n := binary.LittleEndian.Uint64(out[8:]); e.shortBy > 0 && uint64(e.shortBy) <= n {
		binary.LittleEndian.PutUint64(out[8:], n-uint64(e.shortBy))
	}
	p := filepath.Join(t.TempDir(), "edited-"+filepath.Base(src))
	require.NoError(t, os.WriteFile(p, out, 0o644))
	return p
}

// shapeBytes is the data size of a tensor of type typ and shape ne.
func shapeBytes(typ uint32, ne []int64) (int64, bool) {
	if len(ne) == 0 || ne[0] < 0 {
		return 0, false
	}
	n, ok := gguffile.RowSize(typ, ne[0])
	for _, d := range ne[1:] {
		if d < 1 || n > math.MaxInt32/d {
			return 0, false
		}
		n *= d
	}
	return n, ok
}

// heapLimit bounds the Go memory one load of a seed-sized file may allocate: far below what any
// header count of the issue asked for (gigabytes), far above what loading takes (a few MiB).
const heapLimit = 256 << 20

// loadBounded opens path with every loader that reads a model's header — OpenModel (generate,
// serve, export) with a short decode, and Load (training checkpoints) — and checks that each
// returns a model or an error, never panics, and allocates no more than the file justifies.
// It returns the errors.
func loadBounded(t testing.TB, path string) (openErr, loadErr error) {
	fi, err := os.Stat(path)
	require.NoError(t, err)
	alloc := goHeap(func() {
		var m *decoding.GGUFModel
		if m, openErr = decoding.OpenModel(path, decoding.ModelOptions{Threads: 1}); openErr == nil {
			assert.LessOrEqual(t, m.WeightBytes(), fi.Size(), "weights larger than the file")
			if d, err := decoding.NewDecoder(m, decoding.DecoderOptions{MaxContext: 8, Threads: 1}); err == nil {
				_, _ = d.Prompt([]int32{0, 1}) // an error (non-finite logits from zeroed weights) is fine
				d.Close()
			}
			m.Close()
		}
		be, err := ggml.NewCPUBackend(1)
		require.NoError(t, err)
		defer be.Close()
		var cm *training.Model
		if cm, _, loadErr = training.Load(path, be); loadErr == nil {
			assert.LessOrEqual(t, 4*cm.Params(), fi.Size(), "f32 weights larger than the file")
			cm.Close()
		}
	})
	assert.Less(t, alloc, uint64(heapLimit+16*fi.Size()), "Go allocations of loading %s", path)
	return openErr, loadErr
}

// archOf is a seed file's general.architecture.
func archOf(t testing.TB, path string) string {
	f, err := gguffile.ReadFile(path)
	require.NoError(t, err)
	for _, kv := range f.KVs {
		if kv.Key == "general.architecture" {
			return kv.Value.(string)
		}
	}
	t.Fatalf("%s: no general.architecture", path)
	return ""
}

// TestHeaderCounts sets every count key of every architecture's seed (present or not) to
// values from 0 to 2⁶²: each load returns a model or an error, within the memory the file
// justifies; counts far beyond the file's tensors are refused by name.
func TestHeaderCounts(t *testing.T) {
	values := []uint64{0, 1, 3, 1 << 20, math.MaxInt32, math.MaxUint32, 1 << 62}
	for _, seed := range headerSeeds(t) {
		arch := archOf(t, seed)
		name := strings.TrimSuffix(filepath.Base(seed), ".gguf")
		t.Run(name, func(t *testing.T) {
			for _, key := range countKeys {
				for _, v := range values {
					e := edit{key: arch + "." + key, value: v, tensor: -1, drop: -1}
					openErr, loadErr := loadBounded(t, e.apply(t, seed))
					if key == "block_count" && v >= 1<<20 {
						// Far more blocks than the file's tensors: refused by the loader that
						// reads the seed, before the tensor table is made — by the file's
						// tensor count, or above 2³¹−1 as out of range (the decoder), or by
						// the training spec's bound (checkpoints).
						err, want := openErr, "block_count"
						if strings.HasPrefix(name, "checkpoint-") {
							err, want = loadErr, "n_layers"
						} else if v > math.MaxInt32 {
							want = "out of range"
						}
						assert.ErrorContains(t, err, want, "%s = %d", key, v)
					}
				}
			}
		})
	}
}

// TestBlockCountRefusedByTensorCount: the case, a model whose block_count is 2³¹−1,
// is refused by the file's tensor count, naming the first tensor the file lacks and both
// counts, with no allocation of its size.
func TestBlockCountRefusedByTensorCount(t *testing.T) {
	good := transformertest.WriteTiny(t, transformertest.TinyArch("smollm2"), ggml.F32, 3)
	for _, v := range []uint64{math.MaxInt32, 10_000_000, 3} {
		openErr, _ := loadBounded(t, edit{key: "llama.block_count", value: v, tensor: -1, drop: -1}.apply(t, good))
		require.Error(t, openErr)
		assert.Regexp(t, `llama: tensor "blk\.2\.attn_norm\.weight" is missing \(block_count \d+ asks for \d+ tensors, \d+ a block; the file holds \d+\)`, openErr.Error())
	}
	// A training checkpoint within the spec's bounds (1,024 blocks) but beyond its tensors.
	var ck string
	for _, p := range headerSeeds(t) {
		if strings.HasSuffix(p, "checkpoint-llama.gguf") {
			ck = p
		}
	}
	_, loadErr := loadBounded(t, edit{key: "llama.block_count", value: 1024, tensor: -1, drop: -1}.apply(t, ck))
	assert.ErrorContains(t, loadErr, "block_count 1024 asks for")
}

// TestMissingTensor: a tensor left out of the file, or out of the header's tensor count (which
// would shift every tensor's data), is refused with the tensor's name.
func TestMissingTensor(t *testing.T) {
	for _, seed := range headerSeeds(t) {
		f, err := gguffile.ReadFile(seed)
		require.NoError(t, err)
		n := len(f.Tensors)
		last := f.Tensors[n-1].Name
		openErr, loadErr := loadBounded(t, edit{tensor: -1, drop: -1, shortBy: 1}.apply(t, seed))
		assert.ErrorContains(t, openErr, `tensor "`+last+`" follows them`, seed)
		assert.ErrorContains(t, loadErr, `tensor "`+last+`" follows them`, seed)

		mid := f.Tensors[n/2].Name
		openErr, loadErr = loadBounded(t, edit{tensor: -1, drop: n / 2}.apply(t, seed))
		err = openErr
		if strings.Contains(seed, "checkpoint-") {
			err = loadErr
		}
		assert.ErrorContains(t, err, `tensor "`+mid+`" is missing`, seed)
	}
}

// TestTrainedContextBeyondMemory: a context_length that sizes no tensor (RoPE models) is
// accepted, but a decoder that takes it as its default context refuses a KV cache larger than
// the machine's memory before allocating it.
func TestTrainedContextBeyondMemory(t *testing.T) {
	if sysmem.Total() <= 0 {
		t.Skip("the machine's memory is not known here")
	}
	good := transformertest.WriteTiny(t, transformertest.TinyArch("qwen2"), ggml.F32, 3)
	m := decodingtest.OpenTiny(t, edit{key: "qwen2.context_length", value: math.MaxInt32, tensor: -1, drop: -1}.apply(t, good), decoding.ModelOptions{})
	assert.Equal(t, math.MaxInt32, m.Arch.Context)
	_, err := decoding.NewDecoder(m, decoding.DecoderOptions{FlashAttention: true})
	assert.ErrorContains(t, err, "a KV cache of 2147483647 positions")
	assert.ErrorContains(t, err, "GiB of memory: use a smaller context")
	_, err = decoding.NewBatchDecoder(m, decoding.BatchDecoderOptions{Slots: 2, FlashAttention: true}) // the trained context a slot
	assert.Error(t, err)
	d := decodingtest.NewDecoder(t, m, decoding.DecoderOptions{MaxContext: 16})
	_, err = d.Prompt([]int32{1, 2, 3})
	assert.NoError(t, err)
}

// FuzzModelHeader mutates the header of small valid models and checkpoints — a count key set
// (or added) to any value, a tensor's dimension changed, a tensor dropped, the tensor count
// lowered — and loads the result with every loader: a model or an error, never a panic, a C
// abort or an allocation beyond what the file justifies. Its seed corpus runs under go test.
func FuzzModelHeader(f *testing.F) {
	seeds := headerSeeds(f)
	for i := range seeds {
		f.Add(uint8(i), uint8(0), uint64(math.MaxInt32), uint16(0xffff), uint8(0), uint32(0), uint16(0xffff), uint8(0))
		f.Add(uint8(i), uint8(1), uint64(1<<40), uint16(0xffff), uint8(0), uint32(0), uint16(0xffff), uint8(1))
		f.Add(uint8(i), uint8(2), uint64(4), uint16(1), uint8(1), uint32(16), uint16(3), uint8(0))
	}
	f.Add(uint8(0), uint8(13), uint64(3), uint16(5), uint8(0), uint32(7), uint16(0xffff), uint8(2))
	f.Fuzz(func(t *testing.T, seed, key uint8, value uint64, tensor uint16, dim uint8, ne uint32, drop uint16, short uint8) {
		src := seeds[int(seed)%len(seeds)]
		e := edit{value: value, tensor: int(tensor), dim: int(dim), ne: int64(ne), drop: int(drop),
			shortBy: int(short % 4), maxBytes: 1 << 20}
		if int(key) < len(countKeys) {
			e.key = archOf(t, src) + "." + countKeys[key]
		}
		loadBounded(t, e.apply(t, src))
	})
}

// TestDFlashHeaderCounts: a DFlash drafter whose block count its tensors cannot hold, whose
// block size exceeds the target's context, or whose window asks for a cache beyond the
// machine's memory is refused, naming the key, before anything of that size is allocated.
func TestDFlashHeaderCounts(t *testing.T) {
	m := dflashTarget(t, 5)
	df, err := NewDFlash(m, DFlashConfig{Gamma: 4, Window: 6, MaskToken: 3, TargetLayers: []int{0, 1}, Layers: 2}, 1)
	require.NoError(t, err)
	good := filepath.Join(t.TempDir(), "drafter.gguf")
	require.NoError(t, df.Save(good))
	df.Close()
	open := func(key string, v uint64) error {
		var err error
		alloc := goHeap(func() {
			var d *DFlash
			if d, err = OpenDFlash(edit{key: key, value: v, tensor: -1, drop: -1}.apply(t, good), m); err == nil {
				d.Close()
			}
		})
		assert.Less(t, alloc, uint64(heapLimit), "%s = %d", key, v)
		return err
	}
	for _, v := range []uint64{1 << 20, math.MaxInt32, math.MaxUint32} {
		assert.ErrorContains(t, open("dflash.block_count", v), "dflash.block_count", "block_count %d", v)
	}
	assert.ErrorContains(t, open("dflash.block_size", math.MaxUint32), "want at most")
	assert.ErrorContains(t, open("dflash.block_count", 3), "dflash.block_count 3 asks for 30 tensors, but the file holds 21")
	require.NoError(t, open("dflash.block_count", 2))
	if sysmem.Total() > 0 {
		// The window sizes the drafter's cache, made when a decoding starts.
		d, err := OpenDFlash(edit{key: "dflash.window_size", value: math.MaxUint32, tensor: -1, drop: -1}.apply(t, good), m)
		require.NoError(t, err)
		defer d.Close()
		td := decodingtest.NewDecoder(t, m, decoding.DecoderOptions{})
		sp, err := NewDFlashSpeculative(td, d, 0, sample.NewSampler(sample.GreedyParams()))
		if err == nil {
			defer sp.Close()
			err = sp.Prompt([]int32{1, 2, 3})
		}
		assert.ErrorContains(t, err, "GiB of memory: use a smaller window")
	}
}

// goHeap is the Go memory allocated while f runs.
func goHeap(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
