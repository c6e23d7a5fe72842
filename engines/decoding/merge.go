package decoding

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/fsutil"
	"github.com/toyml/toy/internal/gguffile"
)

// MergeLoRA writes to out a copy of the GGUF model at base with the adapters merged into its
// weights: each adapted weight W becomes W + Σ scale·B·A, computed in float64 from W's
// dequantized values and stored as typ (f32, f16, bf16 or a block-quantized type, with ggml's
// quantizers); every other tensor and every metadata key is copied as it is. The result runs
// wherever the base ran, without the adapters. With no adapters it converts the model instead:
// every weight matrix an adapter could update, and the token embeddings (the head, where it is
// tied to them), is stored as typ (a model toy trained in f32, for one, decodes faster in f16,
// which halves the bytes every token streams). The file is streamed, a tensor at a time, to a
// temporary name and renamed when whole (atomically).
//
// Nothing non-finite is written: a NaN or an infinity in a copied f32, f16 or bf16 tensor, or in
// a merged or converted weight (a base or an adapter that holds one), is an error naming the
// tensor. Values beyond what typ can hold are clamped (clampToType), each clamped tensor a
// warning (MergeLoRAWith's Warn).
func MergeLoRA(base string, adapters []LoRA, out string, typ ggml.Type) error {
	return MergeLoRAWith(base, adapters, out, typ, MergeOptions{})
}

// MergeOptions are the options of MergeLoRAWith.
type MergeOptions struct {
	// Warn, when set, hears what the user should know of a merge that succeeds: each tensor
	// whose values were clamped to its type's range, and each adapter trained on another base
	// (GGUFModel.Warnings).
	Warn func(string)
}

// MergeLoRAWith is MergeLoRA with options.
func MergeLoRAWith(base string, adapters []LoRA, out string, typ ggml.Type, opts MergeOptions) error {
	verb := "merge"
	if len(adapters) == 0 {
		verb = "convert"
	}
	if !ggml.ValidType(typ) || !transformer.Computable(typ) {
		return fmt.Errorf("%s %s: ggml cannot multiply weights of type %v", verb, base, ggml.TypeName(typ))
	}
	_, err := writeModel(base, out, conversion{verb: verb, adapters: adapters, warn: opts.Warn,
		types: func(m *GGUFModel, hdr *gguffile.File) ([]ggml.Type, error) {
			stored := m.Matrices() // converted: every weight matrix and the token embeddings
			if t := m.TokEmbd; t != nil {
				stored[t.Name()] = t
			}
			types := make([]ggml.Type, len(hdr.Tensors))
			for i, ti := range hdr.Tensors {
				types[i] = ggml.Type(ti.Type)
				if t := stored[ti.Name]; len(adapters) == 0 && t != nil || len(m.lora[m.mapped.Tensor(ti.Name)]) > 0 {
					types[i] = typ
				}
			}
			return types, nil
		}})
	return err
}

// conversion says how writeModel stores each tensor of a model.
type conversion struct {
	verb     string // "merge", "convert" or "export": how errors start
	adapters []LoRA
	// types gives each tensor of the model (hdr.Tensors, in order) the type it is stored in. A
	// tensor an adapter updates is merged and stored in it; any other is copied where it is
	// its own type, else converted.
	types func(m *GGUFModel, hdr *gguffile.File) ([]ggml.Type, error)
	// kvs set metadata keys over the model's (added where it has none).
	kvs []transformer.KV
	// threads quantize the rows of a tensor in parallel (0: one).
	threads int
	// warn hears what a user should know of a conversion that succeeds (nil: nothing).
	warn func(string)
	// progress hears of each tensor written (nil: nothing).
	progress func(done, total int, name string)
}

// writeModel writes to out the model at base converted as c says, and reports the type each
// tensor got. The file is streamed under a hidden temporary name in out's directory: the
// header first (every tensor's size follows from its type), then each tensor's data as it is
// produced, copied or converted a tensor at a time (tensorWriter); it is synced, decoded once
// and only then renamed to out, and removed on any failure. Nothing non-finite is written
// (transformer.NonFiniteRaw for copied data, clampToType's check for converted values) and
// values beyond a type's range are clamped to it (clampToType), each such tensor a warning.
func writeModel(base, out string, c conversion) (_ []ggml.Type, err error) {
	warn := func(string) {}
	if c.warn != nil {
		warn = c.warn
	}
	verb := c.verb
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s %s: %s is a directory; name the file to write", verb, base, out)
	}
	cpu, err := ggml.NewCPUBackend(0)
	if err != nil {
		return nil, err
	}
	defer cpu.Close()
	m, err := OpenModel(base, ModelOptions{Backend: cpu, LoRA: c.adapters, Mmap: true, GGMLKernels: true}) // read, never multiplied: nothing to repack
	if err != nil {
		return nil, err
	}
	defer m.Close()
	for _, w := range m.Warnings {
		warn(w)
	}
	hdr, err := gguffile.ReadFile(base)
	if err != nil {
		return nil, err
	}
	types, err := c.types(m, hdr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", verb, base, err)
	}
	var w gguffile.Writer
	set := map[string]any{}
	for _, kv := range c.kvs {
		set[kv.Key] = kv.Value
	}
	for _, kv := range hdr.KVs {
		v, ok := set[kv.Key]
		if !ok {
			v = kv.Value
		}
		delete(set, kv.Key)
		if err := w.AddKV(kv.Key, v); err != nil {
			return nil, fmt.Errorf("%s %s: %w", verb, base, err)
		}
	}
	for _, kv := range c.kvs {
		if _, ok := set[kv.Key]; ok {
			if err := w.AddKV(kv.Key, kv.Value); err != nil {
				return nil, fmt.Errorf("%s %s: %w", verb, base, err)
			}
		}
	}
	// Every tensor's fate and type is settled, and checked, before the file is created.
	jobs := make([]tensorJob, len(hdr.Tensors))
	for i, ti := range hdr.Tensors {
		t := m.mapped.Tensor(ti.Name)
		j := tensorJob{info: ti, typ: types[i], t: t}
		if t == nil || j.typ == ggml.Type(ti.Type) && len(m.lora[t]) == 0 {
			j.typ, j.t = ggml.Type(ti.Type), nil // copied
		} else if in := int(ti.Ne[0]); in%ggml.BlockSize(j.typ) != 0 {
			return nil, fmt.Errorf("%s %s: %s has rows of %d, not a multiple of %s's block of %d", verb, base, ti.Name, in, ggml.TypeName(j.typ), ggml.BlockSize(j.typ))
		}
		types[i] = j.typ
		if err := w.AddTensorInfo(ti.Name, uint32(j.typ), ti.Shape()); err != nil {
			return nil, fmt.Errorf("%s %s: %w", verb, base, err)
		}
		jobs[i] = j
	}
	src, err := os.Open(base)
	if err != nil {
		return nil, err
	}
	defer src.Close()

	// Streamed under a hidden name and decoded once before it takes out's: finite weights can
	// still overflow the activations (a huge adapter scale), which generate refuses.
	dir, name := filepath.Split(out)
	if dir == "" {
		dir = "."
	}
	f, err := fsutil.CreateTemp(dir, "."+name+".unchecked*")
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", verb, base, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	dw, err := w.Stream(bw)
	if err != nil {
		return nil, fmt.Errorf("%s %s: writing %s: %w", verb, base, out, err)
	}
	tw := &tensorWriter{m: m, src: src, dataOffset: hdr.DataOffset, out: dw, threads: max(1, c.threads)}
	for i, j := range jobs {
		if err := tw.write(j); err != nil {
			var werr *writeError
			if errors.As(err, &werr) {
				return nil, fmt.Errorf("%s %s: writing %s: %w", verb, base, out, werr.err)
			}
			return nil, fmt.Errorf("%s %s: %w", verb, base, err)
		}
		if tw.clamped > 0 {
			warn(fmt.Sprintf("%s: %d values beyond ±%g, the largest %s holds, were clamped to it", j.info.Name, tw.clamped, tw.limit, ggml.TypeName(j.typ)))
		}
		if c.progress != nil {
			c.progress(i+1, len(jobs), j.info.Name)
		}
	}
	if err := dw.Close(); err != nil {
		return nil, fmt.Errorf("%s %s: writing %s: %w", verb, base, out, err)
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("%s %s: writing %s: %w", verb, base, out, err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("%s %s: writing %s: %w", verb, base, out, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("%s %s: writing %s: %w", verb, base, out, err)
	}
	if _, err := os.Stat(tmp); err != nil { // its directory was removed while it was written
		return nil, fmt.Errorf("%s %s: writing %s: %w", verb, base, out, err)
	}
	if err := checkDecodes(tmp, cpu); err != nil {
		return nil, fmt.Errorf("%s %s: the result does not decode, so it is not written: %w", verb, base, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, fmt.Errorf("%s %s: %w", verb, base, err)
	}
	return types, nil
}

// checkDecodes computes the logits of one token (the model's BOS, or 0) under the model at
// path, which NewDecoder's step refuses when they are not finite. The model is memory-mapped:
// its pages are the ones just written, not a second copy of them.
func checkDecodes(path string, be *ggml.Backend) error {
	m, err := OpenModel(path, ModelOptions{Backend: be, Mmap: true})
	if err != nil {
		return err
	}
	defer m.Close()
	d, err := NewDecoder(m, DecoderOptions{MaxContext: min(8, m.Arch.Context)})
	if err != nil {
		return err
	}
	defer d.Close()
	tok := int32(0)
	if id, ok := m.Meta["tokenizer.ggml.bos_token_id"].(uint32); ok && int(id) < m.Arch.Vocab {
		tok = int32(id)
	}
	_, err = d.Logits([]int32{tok})
	return err
}
