package recipes

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
)

// Finetune adapts a GGUF model in one of three modes (Mode):
//   - LoRA (the default) trains adapters on the frozen base (training.NewAdapter): the base stays
//     in its own type, as loaded, and only the adapters and their AdamW state are trained;
//     the result is an adapter GGUF.
//   - Full trains every weight of an f32 copy of the base (training.FromGGUF), but the token
//     embeddings with FreezeEmbeddings; the result is a GGUF model with the base's
//     architecture keys, tokenizer and general.* metadata.
//   - Warm start trains a new model of shape NewModel from scratch but for its vocabulary,
//     tokenizer and token embeddings, which come from the base (the donor, training.Model.WarmStart).
//
// The data is plain text (a file or a directory, as Scratch reads it) or chat conversations in
// JSONL (a .jsonl file or a directory of them, data.ReadChat), rendered through the model's chat template with the
// loss on the assistant's replies only. The zero value is not usable: start from
// DefaultFinetune. Its JSON is the config{} of the run's run_start.
type Finetune struct {
	// Mode is ModeLoRA ("" in runs made before there were modes), ModeFull or ModeWarmStart.
	Mode string `json:"mode,omitempty"`
	// FreezeEmbeddings keeps the token embeddings (and a tied output projection) fixed in the
	// full and warm-start modes.
	FreezeEmbeddings bool `json:"freeze_embeddings,omitempty"`
	// FreezeEmbeddingsSteps holds the token embeddings fixed for the first steps only, in the
	// full and warm-start modes (training.Trainer.HoldEmbeddings: their AdamW moments follow the
	// gradients meanwhile); then they train with the rest.
	FreezeEmbeddingsSteps int `json:"freeze_embeddings_steps,omitempty"`
	// Recompute is how many of the first blocks LoRA recomputes in the backward pass instead
	// of keeping their activations (training.LoRAOptions.Recompute): less memory, one more
	// forward pass of those blocks a step.
	Recompute int `json:"recompute,omitempty"`
	// RecomputeAttention makes LoRA recompute the attention probabilities of the other blocks
	// in the backward pass instead of keeping them (training.LoRAOptions.RecomputeAttention):
	// T·T·heads floats a sequence and block less, one more product of queries and keys and
	// softmax a block and step.
	RecomputeAttention bool `json:"recompute_attention,omitempty"`
	// KeepTransposed makes LoRA on a block-quantized base keep a transposed f32 copy of each
	// frozen weight for the backward pass (training.LoRAOptions.KeepTransposed): 4 bytes a
	// parameter, for the dequantizing transposes of every step.
	KeepTransposed bool `json:"keep_transposed,omitempty"`
	// NewModel is the shape of a warm-started model; its vocabulary is the donor's (the
	// recipe sets it) and its Seed seeds the initial weights.
	NewModel *config.Llama `json:"new_model,omitempty"`
	// Base is the GGUF model to adapt (the donor of a warm start); its tokenizer is the run's.
	Base string `json:"base"`
	// Data is a text file, a directory of text files, or a chat file (.jsonl) or a directory
	// of them.
	Data string `json:"data"`
	// Template names a built-in chat template for chat data (see chatfmt.TemplateByName);
	// "": the base's own tokenizer.chat_template, rendered as Jinja.
	Template string `json:"template"`
	// MaxTextBytes caps how much text is read (0: all).
	MaxTextBytes int64 `json:"max_text_bytes"`
	// LoRA are the adapters' settings.
	LoRA LoRAConfig `json:"lora"`
	// Training (steps, batch, schedule, seed, evaluations, checkpoints, runs directory),
	// Sequences (SeqLen: a chat conversation is one sequence, padded, and a longer one is cut,
	// and counted; EvalBatches) and Compute (Threads) are the option groups declared in
	// specs/engines; their fields' JSON keys are config{}'s. Training.Seed seeds the order of
	// the training batches (LoRA.Seed seeds the initial A matrices).
	config.Training
	config.Sequences
	config.Compute
	AdamW       train.AdamW `json:"adamw"`
	Resume      string      `json:"resume"`
	ResumeSteps int         `json:"resume_steps"`
	Out         io.Writer   `json:"-"`
	Interactive bool        `json:"-"`
	// ResumeKeep names options (JSON keys, from ResumableOptions) whose values in this
	// Finetune replace the run's own when resuming.
	ResumeKeep []string `json:"-"`
	// Replicas, when set, make this process one rank of a data-parallel run (see Replicas):
	// Batch is the global batch, shared among the ranks; every rank reads Base and Data.
	Replicas Replicas `json:"-"`
	// KernelGate audits the lookups of toy's CPU operations the run's graphs make and says
	// which resolved (nil: the build's table's own).
	KernelGate KernelGate `json:"-"`

	ckpt        *runs.Checkpoint
	started     bool
	madeRunsDir bool
	// baseFingerprint is decoding.ModelFingerprint of the base, recorded in every adapter so that
	// one applied to another base is noticed.
	baseFingerprint string
}

// LoRAConfig are the adapters' settings (training.LoRAOptions).
type LoRAConfig struct {
	Rank    int      `json:"rank"`
	Alpha   float32  `json:"alpha"`
	Targets []string `json:"targets"`
	Seed    uint64   `json:"seed"`
}

// BaseModel is the run_start's model{} of a fine-tuning run: the base it adapts.
type BaseModel struct {
	Path         string `json:"path"`
	SHA256       string `json:"sha256"`
	Architecture string `json:"architecture"`
	Type         string `json:"type"`
	Params       int64  `json:"params"`
}

// The modes of Finetune.
const (
	ModeLoRA      = "lora"
	ModeFull      = "full"
	ModeWarmStart = "warm-start"
)

// DefaultFullFinetune is a full fine-tune: the lower learning rate (5e-5, decaying to 5e-6)
// and small weight decay (0.01) usual for training every weight of a trained model.
func DefaultFullFinetune() Finetune {
	f := DefaultFinetune()
	f.Mode = ModeFull
	f.Training, _ = config.TrainingPreset("finetune-full")
	f.AdamW.LR, f.AdamW.WeightDecay = f.LR, 0.01
	return f
}

// DefaultWarmStart is a warm start of the demo shape, with DefaultScratch's schedule and
// optimizer: the new weights are trained as from scratch.
func DefaultWarmStart() Finetune {
	s := DefaultScratch()
	f := DefaultFinetune()
	m := s.Model
	f.Mode, f.NewModel = ModeWarmStart, &m
	f.LR, f.MinLR, f.Warmup, f.AdamW = s.LR, s.MinLR, s.Warmup, s.AdamW
	return f
}

// mode is Mode, ModeLoRA when empty.
func (f *Finetune) mode() string {
	if f.Mode == "" {
		return ModeLoRA
	}
	return f.Mode
}

// DefaultFinetune is LoRA rank 16, alpha 32 on the query and value projections, with
// train.LoRA()'s AdamW settings and the finetune presets of the option groups (specs/engines).
func DefaultFinetune() Finetune {
	t, _ := config.TrainingPreset("finetune")
	q, _ := config.SequencesPreset("finetune")
	return Finetune{
		LoRA:     LoRAConfig{Rank: 16, Alpha: 32, Targets: []string{"q", "v"}, Seed: 1},
		Training: t, Sequences: q, Compute: config.DefaultCompute(), AdamW: train.LoRA(),
	}
}

const (
	adapterFile                    = "adapter.gguf"
	trainMaskFile, heldOutMaskFile = "train.mask", "heldout.mask"
	// heldOutEvery holds out every heldOutEvery-th conversation of chat data.
	heldOutEvery = 20
)

// IsChat reports whether the data is chat conversations: a .jsonl file or a directory of them
// (data.IsChatData, whose error it returns for a directory that mixes them with other files).
func (f *Finetune) IsChat() (bool, error) { return data.IsChatData(f.Data) }

func (f *Finetune) loraOptions() training.LoRAOptions {
	return training.LoRAOptions{Rank: f.LoRA.Rank, Alpha: f.LoRA.Alpha, Targets: f.LoRA.Targets, Seed: f.LoRA.Seed, Recompute: f.Recompute,
		RecomputeAttention: f.RecomputeAttention, KeepTransposed: f.KeepTransposed}
}

// Validate checks the options that do not need the base model.
func (f *Finetune) Validate() error {
	var errs []error
	if f.Base == "" {
		errs = append(errs, fmt.Errorf("no base model (-m)"))
	}
	if f.Data == "" {
		errs = append(errs, fmt.Errorf("no data (-data)"))
	}
	if f.MaxTextBytes < 0 {
		errs = append(errs, fmt.Errorf("max text bytes %d: want 0 (all the text) or more", f.MaxTextBytes))
	}
	if f.Steps < 1 || f.Batch < 1 || f.SeqLen < 1 {
		errs = append(errs, fmt.Errorf("steps %d, batch %d, sequence length %d: want at least 1 each", f.Steps, f.Batch, f.SeqLen))
	} else if err := checkShare(f.Replicas, f.Batch); err != nil {
		errs = append(errs, err)
	}
	switch f.mode() {
	case ModeLoRA:
		if f.LoRA.Rank < 1 || !(f.LoRA.Alpha > 0) || math.IsInf(float64(f.LoRA.Alpha), 0) {
			errs = append(errs, fmt.Errorf("lora rank %d, alpha %g: want a rank of at least 1 and a positive finite alpha", f.LoRA.Rank, f.LoRA.Alpha))
		}
		if f.FreezeEmbeddings || f.FreezeEmbeddingsSteps != 0 {
			errs = append(errs, fmt.Errorf("freezing the embeddings is for the full and warm-start modes (LoRA trains no embeddings)"))
		}
		if f.Recompute < 0 {
			errs = append(errs, fmt.Errorf("recompute %d blocks: want at least 0", f.Recompute))
		}
		if f.Recompute > 0 && replicated(f.Replicas) {
			errs = append(errs, fmt.Errorf("recomputing blocks is not data-parallel (each recomputed block steps its adapters before the ranks average their gradients): run without -recompute under mpirun"))
		}
	case ModeFull:
	case ModeWarmStart:
		if f.NewModel == nil {
			errs = append(errs, fmt.Errorf("a warm start needs the new model's shape"))
		} else {
			c := *f.NewModel
			c.Vocab = max(c.Vocab, 1) // the donor's, set when the donor is read
			if err := transformer.Validate(c); err != nil {
				errs = append(errs, err)
			}
		}
	default:
		errs = append(errs, fmt.Errorf("mode %q: want %s, %s or %s", f.Mode, ModeLoRA, ModeFull, ModeWarmStart))
	}
	if f.mode() != ModeLoRA && f.Recompute != 0 {
		errs = append(errs, fmt.Errorf("recomputing blocks is for LoRA (the full and warm-start modes keep every activation)"))
	}
	if f.mode() != ModeLoRA && f.KeepTransposed {
		errs = append(errs, fmt.Errorf("keeping transposed weights is for LoRA on a quantized base (the full and warm-start modes train every weight)"))
	}
	switch {
	case f.FreezeEmbeddingsSteps < 0:
		errs = append(errs, fmt.Errorf("freeze the embeddings for %d steps: want at least 0", f.FreezeEmbeddingsSteps))
	case f.FreezeEmbeddingsSteps > 0 && f.FreezeEmbeddings:
		errs = append(errs, fmt.Errorf("the embeddings are frozen for the whole run and for %d steps: choose one", f.FreezeEmbeddingsSteps))
	}
	if _, err := train.ParseSchedule(f.Schedule, f.LR, f.MinLR, f.Warmup, f.Steps); err != nil {
		errs = append(errs, err)
	}
	if err := f.AdamW.Validate(); err != nil {
		errs = append(errs, err)
	}
	if f.EvalEvery < 0 || f.SaveEvery < 0 || f.SaveMinutes < 0 || math.IsNaN(f.SaveMinutes) || f.EvalBatches < 1 {
		errs = append(errs, fmt.Errorf("eval every %d (%d batches), save every %d steps or %g minutes: want 0 (never) or more, and at least one batch", f.EvalEvery, f.EvalBatches, f.SaveEvery, f.SaveMinutes))
	}
	return errors.Join(errs...)
}
