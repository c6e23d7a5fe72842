package transformer

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
)

// SmolLM2Architecture is the shape of SmolLM2-135M (arch llama, tied output, GQA 9/3, the
// training engine's "smollm2-135m" preset).
func SmolLM2Architecture() Architecture {
	c, err := config.LlamaPreset("smollm2-135m")
	if err != nil {
		panic(err) // a generated preset
	}
	return ArchitectureFromConfig(c)
}

// WriteRandomGGUF writes a checkpoint of architecture a, with llama.cpp's keys and tensor
// names, whose weights are seeded random numbers: matrices N(0, 1/fan-in) (MoE routers 4×
// that), norms near 1, biases small. Matrices whose rows split into blocks of weightType are
// stored as that type (f32, f16, bf16, q8_0, q4_0, k-quants, ...); a k-quant's other matrices
// take the fallback llama.cpp's quantizer gives them (q4_K → q5_0, q5_K → q5_1, q6_K → q8_0,
// q2_K and q3_K → iq4_nl), and what still does not split stays f32, as does the router of a
// mixture of experts (as llama.cpp's quantizer leaves it); norms and biases are f32. extra are
// more metadata (a tokenizer's keys, say). For benchmarks and tests.
//
// A large block-quantized matrix (usePool) is made of blocks drawn at random from a pool of
// quantizedPoolBlocks blocks that ggml's quantizer made of random values of the matrix's
// spread (one pool per type and spread): quantizing every value of a 1.7B-parameter model
// took minutes, drawing its blocks takes seconds. Smaller ones are quantized value by value.
func WriteRandomGGUF(path string, a Architecture, weightType ggml.Type, seed uint64, extra ...KV) error {
	_, err := WriteRandomGGUFValues(path, a, weightType, seed, 1, false, extra...)
	return err
}

// kQuantFallback is the 32-element block type llama.cpp's quantizer stores a matrix in when
// its rows do not split into a k-quant's 256-element super-blocks (SmolLM2-135M's 576-wide
// rows, say): a "q4_K" file of such a model holds q5_0 there.
var kQuantFallback = map[ggml.Type]ggml.Type{
	ggml.Q2_K: ggml.IQ4_NL, ggml.Q3_K: ggml.IQ4_NL, ggml.Q4_K: ggml.Q5_0, ggml.Q5_K: ggml.Q5_1, ggml.Q6_K: ggml.Q8_0,
}

// rowType is the type a matrix with rows of n elements is stored in when the file's weight
// type is typ: typ, else its k-quant fallback, else f32, whichever first splits the rows into
// whole blocks.
func rowType(typ ggml.Type, n int64) ggml.Type {
	for _, t := range []ggml.Type{typ, kQuantFallback[typ]} {
		if t != 0 && n%int64(ggml.BlockSize(t)) == 0 {
			return t
		}
	}
	return ggml.F32
}

// WriteRandomGGUFValues writes the file; with keep it also returns every tensor's values before
// conversion to the file's type. scale multiplies the standard deviation of every random
// matrix (and the spread of norms and biases).
func WriteRandomGGUFValues(path string, a Architecture, weightType ggml.Type, seed uint64, scale float64, keep bool, extra ...KV) (map[string][]float32, error) {
	if err := a.validate(path); err != nil {
		return nil, err
	}
	if f, ok := Family(a.Name); !ok || !decodes(f) {
		return nil, fmt.Errorf("gguf %s: unknown architecture %q", path, a.Name)
	}
	if !ggml.ValidType(weightType) {
		return nil, fmt.Errorf("gguf %s: invalid weight type %v", path, weightType)
	}
	var w gguffile.Writer
	kvs := append([]KV{{Key: "general.architecture", Value: a.Name}, {Key: "general.name", Value: "toy random " + a.Name}}, a.Metadata()...)
	kvs = append(kvs, extra...)
	for _, kv := range kvs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return nil, fmt.Errorf("gguf %s: %w", path, err)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x72616e64))
	var kept map[string][]float32
	if keep {
		kept = map[string][]float32{}
	}
	pools := map[quantizedPoolKey]*quantizedPool{}
	for _, s := range a.TensorSpecs() {
		n := int64(1)
		for _, d := range s.Ne {
			n *= d
		}
		name := s.Name
		typ := ggml.F32
		if s.Role.multiplied() && len(s.Ne) >= 2 && !strings.HasSuffix(name, "ffn_gate_inp.weight") {
			typ = rowType(weightType, s.Ne[0])
		}
		if usePool(typ, s.Ne[0], n) {
			key := quantizedPoolKey{typ, randomStd(a, s, scale)}
			pool := pools[key]
			if pool == nil {
				var err error
				if pool, err = newQuantizedPool(rng, key); err != nil {
					return nil, fmt.Errorf("gguf %s: tensor %q: %w", path, name, err)
				}
				pools[key] = pool
			}
			data, vals := pool.draw(rng, n, keep)
			if err := w.AddTensor(name, uint32(typ), s.Ne, data); err != nil {
				return nil, fmt.Errorf("gguf %s: %w", path, err)
			}
			if keep {
				kept[name] = vals
			}
			continue
		}
		vals := make([]float32, n)
		switch s.Role {
		case RoleRopeFreqs:
			for i := range vals {
				vals[i] = float32(1 + 3*rng.Float64())
			}
		case RoleNorm:
			for i := range vals {
				vals[i] = float32(1 + 0.2*scale*rng.NormFloat64())
			}
		case RoleBias:
			for i := range vals {
				vals[i] = float32(0.2 * scale * rng.NormFloat64())
			}
		default:
			std := randomStd(a, s, scale)
			for i := range vals {
				vals[i] = float32(std * rng.NormFloat64())
			}
		}
		var data []byte
		if typ == ggml.F32 {
			data = make([]byte, 4*len(vals))
			for i, v := range vals {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
			}
		} else {
			var err error
			if data, err = ggml.Quantize(typ, vals, int(s.Ne[0])); err != nil {
				return nil, fmt.Errorf("gguf %s: tensor %q: %w", path, name, err)
			}
		}
		if err := w.AddTensor(name, uint32(typ), s.Ne, data); err != nil {
			return nil, fmt.Errorf("gguf %s: %w", path, err)
		}
		if keep {
			kept[name] = vals
		}
	}
	if err := w.WriteFile(path); err != nil {
		return nil, err
	}
	return kept, nil
}

// randomStd is the standard deviation of the random values of matrix s.
func randomStd(a Architecture, s TensorSpec, scale float64) float64 {
	switch {
	case s.Role == roleEmbedding:
		return scale / float64(a.EmbedScale)
	case strings.HasSuffix(s.Name, "ffn_gate_inp.weight"):
		return 4 * scale / math.Sqrt(float64(s.Ne[0])) // decisive routing: top-k rarely hangs on a near tie
	}
	return scale / math.Sqrt(float64(s.Ne[0]))
}

// quantizedPoolBlocks is how many quantized random blocks a pool holds.
const quantizedPoolBlocks = 4096

// usePool reports whether a matrix of n values of type typ in rows of rowLen is drawn from a
// pool: it is block-quantized, larger than the pool (or quantizing it is cheaper), and its
// rows hold at least 4 blocks, so that two of them are equal with a chance of at most
// rows²/2 · 4096⁻⁴, 2·10⁻⁶ for a vocabulary of 100,000.
func usePool(typ ggml.Type, rowLen, n int64) bool {
	if !ggml.IsQuantized(typ) {
		return false
	}
	bs := int64(ggml.BlockSize(typ))
	return rowLen/bs >= 4 && n/bs > quantizedPoolBlocks
}

type quantizedPoolKey struct {
	typ ggml.Type
	std float64
}

// quantizedPool is quantizedPoolBlocks blocks of a type, quantized from N(0, std²) values, and
// those values.
type quantizedPool struct {
	blockBytes, blockSize int
	data                  []byte
	vals                  []float32
}

func newQuantizedPool(rng *rand.Rand, key quantizedPoolKey) (*quantizedPool, error) {
	bs := ggml.BlockSize(key.typ)
	vals := make([]float32, quantizedPoolBlocks*bs)
	for i := range vals {
		vals[i] = float32(key.std * rng.NormFloat64())
	}
	data, err := ggml.Quantize(key.typ, vals, bs)
	if err != nil {
		return nil, err
	}
	return &quantizedPool{blockBytes: len(data) / quantizedPoolBlocks, blockSize: bs, data: data, vals: vals}, nil
}

// draw is n values' worth of blocks drawn at random, and with keep the values they were
// quantized from.
func (p *quantizedPool) draw(rng *rand.Rand, n int64, keep bool) ([]byte, []float32) {
	blocks := int(n) / p.blockSize
	data := make([]byte, blocks*p.blockBytes)
	var vals []float32
	if keep {
		vals = make([]float32, 0, n)
	}
	for b := range blocks {
		i := rng.IntN(quantizedPoolBlocks)
		copy(data[b*p.blockBytes:], p.data[i*p.blockBytes:(i+1)*p.blockBytes])
		if keep {
			vals = append(vals, p.vals[i*p.blockSize:(i+1)*p.blockSize]...)
		}
	}
	return data, vals
}
