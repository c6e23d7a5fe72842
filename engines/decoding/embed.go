package decoding

import (
	"fmt"
	"unsafe"

	"github.com/toyml/toy/ggml"
)

// supports reports whether the model's backend can compute the op that build makes in a
// scratch context (its operands need no memory): the decoder asks before it builds graphs that
// a GPU backend would refuse.
func (m *GGUFModel) supports(build func(ctx *ggml.Context) *ggml.Tensor) (bool, error) {
	ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: 4})
	if err != nil {
		return false, err
	}
	defer ctx.Close()
	probe := build(ctx)
	if probe == nil {
		return false, ctx.Err()
	}
	return m.backend.Supports(probe), nil
}

// prepareEmbeddings chooses the table the decoder gathers token embeddings from: token_embd
// itself where the backend can gather rows of its type, else (or with force) an f16 copy made
// once on the CPU and placed on the backend. ggml's CUDA backend cannot gather k-quant rows,
// the usual type of token_embd in quantized checkpoints; its matrix products, which a tied
// output uses, take them. The copy costs 2 bytes per embedding value on the device.
func (m *GGUFModel) prepareEmbeddings(force bool) error {
	m.EmbLookup = m.TokEmbd
	ok, err := m.supports(func(ctx *ggml.Context) *ggml.Tensor {
		return ctx.GetRows(m.TokEmbd, ctx.NewTensor(ggml.I32, 1))
	})
	if err != nil {
		return fmt.Errorf("gguf %s: token_embd.weight: %w", m.path, err)
	}
	if ok && !force {
		return nil
	}
	bits, err := DequantizeOnCPU(m.TokEmbd, ggml.F16)
	if err != nil {
		return fmt.Errorf("gguf %s: converting token_embd.weight (%s) to f16 for the %s backend: %w", m.path, ggml.TypeName(m.TokEmbd.Type()), m.backend.Name(), err)
	}
	ne := m.TokEmbd.Ne()
	if m.embCtx, err = ggml.NewContext(ggml.ContextOptions{MaxTensors: 1}); err != nil {
		return err
	}
	t := m.embCtx.NewTensor(ggml.F16, ne[0], ne[1]).SetName("token_embd.f16")
	if err := m.embCtx.Err(); err != nil {
		return err
	}
	if m.embBuf, err = m.backend.Alloc(m.embCtx); err != nil {
		return fmt.Errorf("gguf %s: an f16 copy of token_embd.weight: %w", m.path, err)
	}
	if err := t.SetBytes(bits); err != nil {
		return err
	}
	m.EmbLookup = t
	return nil
}

// DequantizeOnCPU converts a weight of any type and shape to f32, or with to = F16 on to f16,
// with ggml's CPU conversions, returning the raw data: to f32 directly through ggml's type
// traits (ggml.Dequantize) where ggml has one for the weight's type, otherwise (and to f16)
// through a graph (GetRows of every row, then a cast), which computes the same values.
func DequantizeOnCPU(w *ggml.Tensor, to ggml.Type) ([]byte, error) {
	raw, err := w.ReadBytes()
	if err != nil {
		return nil, err
	}
	if to == ggml.F32 && ggml.CanDequantize(w.Type()) && w.IsContiguous() {
		out := make([]byte, 4*w.Len())
		if len(out) == 0 {
			return out, nil
		}
		err := ggml.Dequantize(w.Type(), raw, unsafe.Slice((*float32)(unsafe.Pointer(&out[0])), w.Len()))
		return out, err
	}
	return dequantizeGraph(w, raw, to)
}

// dequantizeGraph is DequantizeOnCPU through a graph on the CPU backend, of raw, w's data.
func dequantizeGraph(w *ggml.Tensor, raw []byte, to ggml.Type) ([]byte, error) {
	ne0, rows := w.Ne()[0], w.Rows()
	cpu, err := ggml.NewCPUBackend(0)
	if err != nil {
		return nil, err
	}
	defer cpu.Close()
	in, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: 2})
	if err != nil {
		return nil, err
	}
	defer in.Close()
	src, idx := in.NewTensor(w.Type(), ne0, rows), in.NewTensor(ggml.I32, rows)
	if err := in.Err(); err != nil {
		return nil, err
	}
	buf, err := cpu.Alloc(in)
	if err != nil {
		return nil, err
	}
	defer buf.Close()
	ids := make([]int32, rows)
	for i := range ids {
		ids[i] = int32(i)
	}
	if err := src.SetBytes(raw); err != nil {
		return nil, err
	}
	if err := idx.SetI32(ids); err != nil {
		return nil, err
	}
	gc, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: 4, Graphs: 1, GraphSize: 4})
	if err != nil {
		return nil, err
	}
	defer gc.Close()
	out := gc.GetRows(src, idx)
	if to != ggml.F32 {
		out = gc.Cast(out, to)
	}
	g, err := gc.NewGraph(4, false)
	if err != nil {
		return nil, err
	}
	if err := g.Expand(out); err != nil {
		return nil, err
	}
	al, err := cpu.NewAllocator()
	if err != nil {
		return nil, err
	}
	defer al.Close()
	if err := al.Alloc(g); err != nil {
		return nil, err
	}
	if err := cpu.Compute(g); err != nil {
		return nil, err
	}
	return out.ReadBytes()
}
