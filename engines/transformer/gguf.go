package transformer

import (
	"fmt"

	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// KV is one GGUF metadata key and value.
type KV = config.KV

// Metadata reads every metadata value of an open GGUF file into a map.
func Metadata(f *ggml.GGUF) (map[string]any, error) {
	values := map[string]any{}
	for _, k := range f.Keys() {
		v, err := f.Value(k)
		if err != nil {
			return nil, err
		}
		values[k] = v
	}
	return values, nil
}

// ReadTensors checks, then fills, every tensor of ts from the file, where the file's tensor is
// named prefix + the tensor's name.
func ReadTensors(f *ggml.GGUF, ts []*ggml.Tensor, prefix string) error {
	for _, t := range ts {
		info, ok := f.Tensor(prefix + t.Name())
		switch {
		case !ok:
			return fmt.Errorf("checkpoint %s: tensor %q is missing", f.Path(), prefix+t.Name())
		case info.Type != t.Type():
			return fmt.Errorf("checkpoint %s: tensor %q is %s, want %s", f.Path(), info.Name, ggml.TypeName(info.Type), ggml.TypeName(t.Type()))
		case info.Ne != t.Ne():
			return fmt.Errorf("checkpoint %s: tensor %q has shape %v, want %v", f.Path(), info.Name, info.Ne, t.Ne())
		}
	}
	for _, t := range ts {
		data, err := f.ReadTensorData(prefix + t.Name())
		if err != nil {
			return err
		}
		if err := t.SetBytes(data); err != nil {
			return err
		}
	}
	return nil
}

// Computable reports whether ggml's CPU backend multiplies (and gathers rows of) weights of
// type t: the float types and every block-quantized weight type.
func Computable(t ggml.Type) bool {
	switch t {
	case ggml.I8, ggml.I16, ggml.I32, ggml.I64, ggml.F64, ggml.Q8_1, ggml.Q8_K:
		return false
	}
	return ggml.ValidType(t)
}
