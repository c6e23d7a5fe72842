package transformer

import (
	"fmt"
	"math"
	"strings"

	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// DetectArchitecture reads the architecture of an open GGUF file from its metadata and
// tensors. An unknown architecture or inconsistent metadata is an error naming the file.
func DetectArchitecture(f *ggml.GGUF) (Architecture, error) {
	values, err := Metadata(f)
	if err != nil {
		return Architecture{}, err
	}
	return DetectArchitectureMeta(f, values)
}

// DetectArchitectureMeta is DetectArchitecture with the file's metadata already read.
func DetectArchitectureMeta(f *ggml.GGUF, values map[string]any) (Architecture, error) {
	name, err := f.String("general.architecture")
	if err != nil {
		return Architecture{}, fmt.Errorf("gguf %s: no general.architecture: %w", f.Path(), err)
	}
	tr, ok := Family(name)
	if !ok || !decodes(tr) {
		return Architecture{}, fmt.Errorf("gguf %s: unknown architecture %q (supported: %s)", f.Path(), name, strings.Join(SupportedArchitectures(), ", "))
	}
	a, _, err := readArchitecture(f, values, name, tr, nil)
	return a, err
}

// Metadata is the architecture as the "<arch>.*" GGUF keys DetectArchitecture reads back
// (the tensors carry the rest: vocabulary, tied output, biases, QK norms), written through
// the same specs.
func (a *Architecture) Metadata() []KV {
	c := ConfigFromArch(a)
	x := config.Family{KeyLength: a.HeadDimK, ValueLength: a.HeadDimV, RopeDims: a.RopeDims,
		SlidingWindow: a.SlidingWindow, AttnSoftcap: a.AttnSoftcap, FinalSoftcap: a.FinalSoftcap,
		Experts: a.NExperts, ExpertsUsed: a.NExpertsUsed, ExpertFFN: a.ExpertFFN, SharedExpertFFN: a.SharedExpertFFN}
	if def := float32(1 / math.Sqrt(float64(a.HeadDimK))); a.QueryScale > 0 && math.Abs(float64(a.QueryScale-def)) > 1e-7 {
		x.QueryPreAttnScalar = float32(1 / (float64(a.QueryScale) * float64(a.QueryScale)))
	}
	if a.Norm == NormLayer {
		x.LayerNormEps = a.NormEps
	}
	if a.Input == InputPatches {
		x.ImageSize, x.PatchSize, x.Channels, x.ClassCount = a.ImageSize, a.PatchSize, a.Channels, a.Vocab
	}
	var kvs []KV
	for _, kv := range append(c.ToGGUF(a.Name), x.ToGGUF(a.Name)...) {
		key := strings.TrimPrefix(kv.Key, a.Name+".")
		switch {
		case strings.HasPrefix(kv.Key, "toy."): // the training options of a checkpoint
		case a.Norm != NormRMS && key == "attention.layer_norm_rms_epsilon":
		case a.Positions != PosRoPE && strings.HasPrefix(key, "rope."):
		case a.Input == InputPatches && impliedByImage[key]:
		default:
			kvs = append(kvs, kv)
		}
	}
	return kvs
}
