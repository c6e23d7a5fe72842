package llama

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
)

// MergeLoRA writes to out a copy of the GGUF model at base with the adapters merged into its
// weights: each adapted weight W becomes W + Σ scale·B·A, computed in float64 from W's
// dequantized values and stored as typ (f32, f16, bf16 or a block-quantized type, with ggml's
// quantizers); every other tensor and every metadata key is copied as it is. The result runs
// wherever the base ran, without the adapters. With no adapters it converts the model instead:
// every weight matrix an adapter could update, and the token embeddings (the head, where it is
// tied to them), is stored as typ (a model toy trained in f32, for one, decodes faster in f16,
// which halves the bytes every token streams). The file is held in memory while it is written
// (atomically).
func MergeLoRA(base string, adapters []LoRA, out string, typ ggml.Type) error {
	verb := "merge"
	if len(adapters) == 0 {
		verb = "convert"
	}
	if !ggml.ValidType(typ) || !computable(typ) {
		return fmt.Errorf("%s %s: ggml cannot multiply weights of type %v", verb, base, ggml.TypeName(typ))
	}
	cpu, err := ggml.NewCPUBackend(0)
	if err != nil {
		return err
	}
	defer cpu.Close()
	m, err := OpenModel(base, ModelOptions{Backend: cpu, LoRA: adapters})
	if err != nil {
		return err
	}
	defer m.Close()
	hdr, err := gguffile.ReadFile(base)
	if err != nil {
		return err
	}
	var w gguffile.Writer
	for _, kv := range hdr.KVs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return fmt.Errorf("%s %s: %w", verb, base, err)
		}
	}
	adapted := map[string]*ggml.Tensor{} // the weights stored as typ, by name
	if len(adapters) == 0 {
		adapted = m.matrices()
		if t := m.tokEmbd; t != nil {
			adapted[t.Name()] = t
		}
	}
	for t := range m.lora {
		adapted[t.Name()] = t
	}
	src, err := ggml.OpenGGUF(base)
	if err != nil {
		return err
	}
	defer src.Close()
	for _, ti := range hdr.Tensors {
		t := adapted[ti.Name]
		if t == nil {
			data, err := src.ReadTensorData(ti.Name)
			if err != nil {
				return err
			}
			if err := w.AddTensor(ti.Name, ti.Type, ti.Shape(), data); err != nil {
				return fmt.Errorf("%s %s: %w", verb, base, err)
			}
			continue
		}
		merged, err := m.merged(t)
		if err != nil {
			return fmt.Errorf("%s %s: %s: %w", verb, base, ti.Name, err)
		}
		in := int(ti.Ne[0])
		if in%ggml.BlockSize(typ) != 0 {
			return fmt.Errorf("%s %s: %s has rows of %d, not a multiple of %s's block of %d", verb, base, ti.Name, in, ggml.TypeName(typ), ggml.BlockSize(typ))
		}
		var data []byte
		if typ == ggml.F32 {
			data = make([]byte, 4*len(merged))
			for i, v := range merged {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
			}
		} else if data, err = ggml.Quantize(typ, merged, in); err != nil {
			return fmt.Errorf("%s %s: %s: %w", verb, base, ti.Name, err)
		}
		if err := w.AddTensor(ti.Name, uint32(typ), ti.Shape(), data); err != nil {
			return fmt.Errorf("%s %s: %w", verb, base, err)
		}
	}
	return w.WriteFile(out)
}

// merged is weight t [in, out] with its LoRA updates added: W + Σ scale·B·A.
func (m *GGUFModel) merged(t *ggml.Tensor) ([]float32, error) {
	values := func(x *ggml.Tensor) ([]float32, error) {
		raw, err := dequantizeOnCPU(x, ggml.F32)
		if err != nil {
			return nil, err
		}
		v := make([]float32, len(raw)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return v, nil
	}
	w, err := values(t)
	if err != nil {
		return nil, err
	}
	in, out := int(t.Ne()[0]), int(t.Ne()[1])
	delta := make([]float64, len(w))
	for _, l := range m.lora[t] {
		a, err := values(l.a) // [in, r]: a[r·in + i]
		if err != nil {
			return nil, err
		}
		b, err := values(l.b) // [r, out]: b[o·r + k]
		if err != nil {
			return nil, err
		}
		r := len(a) / in
		for o := 0; o < out; o++ {
			for k := 0; k < r; k++ {
				c := float64(l.scale) * float64(b[o*r+k])
				row, ak := delta[o*in:(o+1)*in], a[k*in:(k+1)*in]
				for i := range row {
					row[i] += c * float64(ak[i])
				}
			}
		}
	}
	for i := range w {
		w[i] = float32(float64(w[i]) + delta[i])
	}
	return w, nil
}
