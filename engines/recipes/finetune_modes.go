package recipes

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

// learner is what a fine-tuning run trains: LoRA adapters on the frozen base, or a Model (an
// f32 copy of the base, or a new model warm-started from it).
type learner struct {
	f         *Finetune
	trainable training.Trainable
	adapter   *training.Adapter // LoRA
	model     *training.Model   // full fine-tune and warm start
	carried   []transformer.KV  // metadata of the base the model's checkpoints keep
	donor     string            // the base's file name
}

// tensors are what the learner trains (the adapters, or the model's weights).
func (ln *learner) tensors() []*ggml.Tensor {
	if ln.adapter != nil {
		return ln.adapter.Tensors()
	}
	return ln.model.Weights()
}

// newLearner makes the run's learner on the base m: fresh at step 0, else from the checkpoint
// the run resumes.
func (f *Finetune) newLearner(m *decoding.GGUFModel, be *ggml.Backend, startStep int) (*learner, error) {
	ln := &learner{f: f, donor: filepath.Base(f.Base)}
	var err error
	switch f.mode() {
	case ModeLoRA:
		if ln.adapter, err = training.NewAdapter(m, f.loraOptions()); err != nil {
			return nil, err
		}
		ln.trainable = ln.adapter
		if startStep == 0 {
			err = ln.adapter.Init()
		} else {
			err = ln.adapter.Load(f.ckpt.Path(adapterFile))
		}
		if err != nil {
			ln.adapter.Close()
			return nil, err
		}
		return ln, nil
	case ModeFull:
		ln.carried = carriedMeta(m.Meta, "general.", "tokenizer.")
		if startStep == 0 {
			ln.model, err = training.FromGGUF(m, be)
		} else { // the checkpoint is f32: its copy is exact
			var ck *decoding.GGUFModel
			if ck, err = decoding.OpenModel(f.ckpt.Path(modelFile), decoding.ModelOptions{Backend: be}); err == nil {
				ln.model, err = training.FromGGUF(ck, be)
				ck.Close()
			}
		}
	case ModeWarmStart:
		ln.carried = append(carriedMeta(m.Meta, "tokenizer."), transformer.KV{Key: "general.name", Value: "toy warm start from " + ln.donor})
		if startStep == 0 {
			if ln.model, err = training.New(*f.NewModel, be); err == nil {
				if err = ln.model.Init(); err == nil {
					err = ln.model.WarmStart(m)
				}
				if err != nil {
					ln.model.Close()
					ln.model = nil
				}
			}
		} else {
			ln.model, _, err = training.Load(f.ckpt.Path(modelFile), be)
		}
	}
	if err != nil {
		return nil, err
	}
	if f.FreezeEmbeddings {
		ln.model.FreezeEmbeddings()
	}
	ln.trainable = ln.model
	return ln, nil
}

// carriedMeta are the base's metadata keys under the prefixes, sorted, but those a model
// checkpoint writes itself (its architecture and file type) or that describe the base's
// storage (quantization, alignment).
func carriedMeta(meta map[string]any, prefixes ...string) []transformer.KV {
	var keys []string
	for k := range meta {
		switch k {
		case "general.architecture", "general.file_type", "general.quantization_version", "general.alignment":
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				keys = append(keys, k)
				break
			}
		}
	}
	slices.Sort(keys)
	kvs := make([]transformer.KV, len(keys))
	for i, k := range keys {
		kvs[i] = transformer.KV{Key: k, Value: meta[k]}
	}
	return kvs
}

func (ln *learner) close() {
	if ln.adapter != nil {
		ln.adapter.Close()
	}
	if ln.model != nil {
		ln.model.Close()
	}
}

// kvs is the metadata a checkpoint adds to the run's own.
func (ln *learner) kvs() []transformer.KV { return ln.carried }

func (ln *learner) save(path string, kvs []transformer.KV) error {
	if ln.adapter != nil {
		return ln.adapter.Save(path, kvs)
	}
	return ln.model.Save(path, kvs)
}

// describe is the console's line about what the run trains.
func (ln *learner) describe(base BaseModel) string {
	frozen := ""
	switch {
	case ln.f.FreezeEmbeddings:
		frozen = ", token embeddings frozen"
	case ln.f.FreezeEmbeddingsSteps > 0:
		frozen = fmt.Sprintf(", token embeddings frozen for the first %d steps", ln.f.FreezeEmbeddingsSteps)
	}
	switch ln.f.mode() {
	case ModeLoRA:
		o := ln.adapter.Options()
		recompute := ""
		if o.Recompute > 0 {
			recompute = fmt.Sprintf("; the first %d blocks recomputed in the backward pass", o.Recompute)
		}
		if o.RecomputeAttention {
			recompute += "; attention probabilities recomputed in the backward pass"
		}
		if o.KeepTransposed {
			recompute += "; transposed weights kept"
		}
		return fmt.Sprintf("base: %s (%s, %s, %.1fM parameters, frozen); LoRA rank %d alpha %g on %s: %.2fM trainable parameters%s",
			ln.f.Base, base.Architecture, base.Type, float64(base.Params)/1e6, o.Rank, o.Alpha, strings.Join(o.Targets, ","), float64(ln.adapter.Params())/1e6, recompute)
	case ModeFull:
		return fmt.Sprintf("full fine-tune of %s (%s, %s, as f32): %.1fM parameters, every weight trained%s",
			ln.f.Base, base.Architecture, base.Type, float64(ln.model.Params())/1e6, frozen)
	}
	c := &ln.model.Arch
	return fmt.Sprintf("warm start: a new model (%d layers, d_model %d, %d heads), %.2fM parameters, with the %d-token vocabulary, tokenizer and token embeddings of %s%s",
		c.NLayers, c.DModel, c.NHeads, float64(ln.model.Params())/1e6, c.Vocab, ln.f.Base, frozen)
}
