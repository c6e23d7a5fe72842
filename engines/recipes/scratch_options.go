package recipes

import (
	"io"

	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/generated/config"
)

// Scratch trains a LLaMA or a GPT-2 model from scratch. The zero value is not usable: start
// from DefaultScratch. Its JSON, with snake_case keys, is the config{} of the run's run_start.
type Scratch struct {
	// Model is the model's shape (a preset, possibly adjusted); its Seed seeds the initial
	// weights. It is recorded as the run_start's model{}, not in config{}.
	Model config.Llama `json:"-"`
	// GPT2, when set, trains a GPT-2 model of this shape instead of Model (which is then
	// ignored); run_start's model{} is its keys with "arch": "gpt2". A resumed run sets the
	// one its checkpoint holds.
	GPT2 *config.Gpt2 `json:"-"`
	// Text is a text file or a directory of text files to train on; "" is the built-in
	// corpus, the Go standard library's source. Corpus is a token corpus from `toy tokenize`
	// instead (with Tokenizer naming the GGUF file holding its tokenizer).
	Text      string `json:"text"`
	Corpus    string `json:"corpus"`
	Tokenizer string `json:"tokenizer"`
	// Teacher, when set, makes the run a distillation of that GGUF model: the data becomes the
	// teacher's greedy continuations of Generated prompts drawn from the text (SeqLen tokens
	// after speculative.TeacherPromptTokens of the text's), in the teacher's tokenizer and its own
	// token ids, a twentieth as many for the held-out part from the held-out text. It makes a
	// draft model for speculative decoding: what a draft must predict is the target's greedy
	// chain, which is often not how the tokenizer would split the same text.
	Teacher   string `json:"teacher"`
	Generated int    `json:"generated"`
	// MaxTextBytes caps how much text is read (0: all).
	MaxTextBytes int64 `json:"max_text_bytes"`
	// Training (steps, batch, schedule, seed, evaluations, checkpoints, runs directory),
	// Sequences (SeqLen, EvalBatches), Compute (Threads) and FinalSample are the option groups
	// declared in specs/engines; their fields' JSON keys are config{}'s. Training.Seed seeds the
	// order of the training batches (Model.Seed seeds the initial weights).
	config.Training
	config.Sequences
	config.Compute
	config.FinalSample
	AdamW train.AdamW `json:"adamw"`
	// Resume is a run directory to continue; ResumeSteps, when resuming, a new total of steps
	// (0: the run's own).
	Resume      string    `json:"resume"`
	ResumeSteps int       `json:"resume_steps"`
	Out         io.Writer `json:"-"` // progress and results (nil: discarded)
	Interactive bool      `json:"-"` // redraw one progress line instead of printing lines
	// ResumeKeep names options (by their JSON keys, such as "threads" or "sample_tokens") whose
	// values in this Scratch replace the run's own when resuming; every other option comes from
	// the run. Only ResumableOptions may be named.
	ResumeKeep []string `json:"-"`
	// Replicas, when set, make this process one rank of a data-parallel run (see Replicas):
	// Batch is the global batch, shared among the ranks. A run may be resumed with another
	// number of ranks.
	Replicas Replicas `json:"-"`
	// KernelGate audits the lookups of toy's CPU operations the run's graphs make and says
	// which resolved (nil: the build's table's own).
	KernelGate KernelGate `json:"-"`

	ckpt        *runs.Checkpoint // the checkpoint a resumed run starts from
	eos         *int32           // a follower rank's end-of-text token, for a new run (it has no tokenizer)
	started     bool             // the run_start is logged: the run directory is no longer disposable
	madeRunsDir bool             // the runs directory did not exist before this run
}

// DefaultScratch is a small model on the built-in corpus, sized for about two minutes on two
// cores: the demo shape, and the scratch presets of the option groups (specs/engines).
func DefaultScratch() Scratch {
	m, _ := config.LlamaPreset("demo")
	t, _ := config.TrainingPreset("scratch")
	q, _ := config.SequencesPreset("scratch")
	return Scratch{
		Model: m, MaxTextBytes: 6 << 20, Training: t, Sequences: q, Compute: config.DefaultCompute(),
		FinalSample: config.DefaultFinalSample(), AdamW: train.FromScratch(),
	}
}
