package decoding

import (
	"fmt"
	"sort"
	"strings"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

// loadLoRA maps an adapter file and attaches its updates to the model's weights. Every adapted
// weight must be one of the model's matrices with matching shapes; otherwise nothing is attached
// and the error names the file and the tensor.
func (m *GGUFModel) loadLoRA(ad LoRA, opts ModelOptions) error {
	f, err := ggml.OpenGGUF(ad.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	meta, err := transformer.Metadata(f)
	if err != nil {
		return err
	}
	if t, _ := meta["general.type"].(string); t != "adapter" {
		return fmt.Errorf("lora %s: general.type is %q, not an adapter", ad.Path, t)
	}
	if t, _ := meta["adapter.type"].(string); t != "lora" {
		return fmt.Errorf("lora %s: adapter.type is %q, want lora", ad.Path, t)
	}
	if arch, _ := meta["general.architecture"].(string); arch != m.Arch.Name {
		return fmt.Errorf("lora %s: an adapter for %q, the model is %q", ad.Path, arch, m.Arch.Name)
	}
	var alpha float32
	if v, ok := meta["adapter.lora.alpha"]; ok {
		a, ok := v.(float32)
		if !ok {
			return fmt.Errorf("lora %s: adapter.lora.alpha is %T, want float32", ad.Path, v)
		}
		alpha = a
	}
	if !transformer.Finite(float64(alpha)) {
		return fmt.Errorf("lora %s: adapter.lora.alpha is %v: want a finite number", ad.Path, alpha)
	}
	user := ad.Scale
	if user == 0 {
		user = 1
	}
	if !transformer.Finite(float64(user)) {
		return fmt.Errorf("lora %s: scale %v: want a finite number", ad.Path, user)
	}
	matrices := m.Matrices()
	type pair struct{ a, b ggml.GGUFTensor }
	pairs := map[string]*pair{}
	for _, t := range f.Tensors() {
		base, ok := strings.CutSuffix(t.Name, ".lora_a")
		if ok {
			if pairs[base] == nil {
				pairs[base] = &pair{}
			}
			pairs[base].a = t
			continue
		}
		if base, ok = strings.CutSuffix(t.Name, ".lora_b"); ok {
			if pairs[base] == nil {
				pairs[base] = &pair{}
			}
			pairs[base].b = t
			continue
		}
		return fmt.Errorf("lora %s: tensor %q is neither a .lora_a nor a .lora_b", ad.Path, t.Name)
	}
	if len(pairs) == 0 {
		return fmt.Errorf("lora %s: the adapter has no tensors", ad.Path)
	}
	names := make([]string, 0, len(pairs))
	for n := range pairs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, base := range names {
		p := pairs[base]
		w := matrices[base]
		switch {
		case p.a.Name == "" || p.b.Name == "":
			return fmt.Errorf("lora %s: %s has only one of lora_a and lora_b", ad.Path, base)
		case w == nil:
			return fmt.Errorf("lora %s: %s is not a weight matrix of this %s model", ad.Path, base, m.Arch.Name)
		case p.a.Ne[0] != w.Ne()[0] || p.b.Ne[1] != w.Ne()[1] || p.a.Ne[1] != p.b.Ne[0] || p.a.Ne[2] != 1 || p.b.Ne[2] != 1:
			return fmt.Errorf("lora %s: %s: lora_a %v and lora_b %v do not fit the weight %v (want [in, r] and [r, out])",
				ad.Path, base, p.a.Ne[:p.a.NDims], p.b.Ne[:p.b.NDims], w.Shape())
		case !transformer.Computable(p.a.Type) || !transformer.Computable(p.b.Type):
			return fmt.Errorf("lora %s: %s: types %s/%s cannot be multiplied", ad.Path, base, ggml.TypeName(p.a.Type), ggml.TypeName(p.b.Type))
		}
	}
	for _, base := range names { // an adapter's NaN would reach every logit
		for _, t := range []ggml.GGUFTensor{pairs[base].a, pairs[base].b} {
			raw, err := f.ReadTensorData(t.Name)
			if err != nil {
				return err
			}
			if i := transformer.NonFiniteRaw(t.Type, raw); i >= 0 {
				return fmt.Errorf("lora %s: %s holds a NaN or an infinity (element %d): the adapter was trained into non-finite values", ad.Path, t.Name, i)
			}
		}
	}
	if err := m.checkAdapterBase(ad.Path, meta); err != nil {
		return err
	}
	mapped, err := ggml.MapGGUF(f, m.backend, ggml.MapOptions{Mmap: opts.Mmap})
	if err != nil {
		return err
	}
	m.adapters = append(m.adapters, mapped)
	if m.lora == nil {
		m.lora = map[*ggml.Tensor][]LoRATerm{}
	}
	for _, base := range names {
		p := pairs[base]
		scale := user
		if alpha != 0 {
			scale = user * alpha / float32(p.a.Ne[1])
		}
		w := matrices[base]
		m.lora[w] = append(m.lora[w], LoRATerm{A: mapped.Tensor(p.a.Name), B: mapped.Tensor(p.b.Name), Scale: scale})
	}
	return nil
}

// Matrices are the model's weights an adapter may update, by GGUF name (without .weight's
// suffix removed: "blk.0.attn_q.weight").
func (m *GGUFModel) Matrices() map[string]*ggml.Tensor {
	out := map[string]*ggml.Tensor{}
	add := func(t *ggml.Tensor) {
		if t != nil {
			out[t.Name()] = t
		}
	}
	add(m.Output)
	for _, l := range m.Layers {
		for _, t := range []*ggml.Tensor{l.Wq, l.Wk, l.Wv, l.Wqkv, l.Wo, l.Gate, l.Up, l.Down} {
			add(t)
		}
	}
	return out
}

// checkAdapterBase compares the base an adapter toy finetune wrote was trained on (its
// BaseFingerprintKey) with this model, and adds a warning (Warnings) when they differ: an
// adapter fits any base of the same shapes, and applied to another one it changes that model by
// updates learned for a different one. Adapters without the key (llama.cpp's, toy's older ones)
// are not checked.
func (m *GGUFModel) checkAdapterBase(path string, meta map[string]any) error {
	want, _ := meta[BaseFingerprintKey].(string)
	if want == "" || m.path == "" {
		return nil
	}
	if m.fingerprint == "" {
		fp, err := ModelFingerprint(m.path)
		if err != nil {
			return err
		}
		m.fingerprint = fp
	}
	if m.fingerprint != want {
		name, _ := meta["toy.finetune.base"].(string)
		m.Warnings = append(m.Warnings, fmt.Sprintf("the LoRA adapter %s was trained on the base %q (fingerprint %s), not on %s (fingerprint %s): its updates were learned for other weights",
			path, name, want, m.path, m.fingerprint))
	}
	return nil
}
