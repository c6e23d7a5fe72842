package engines

// Compute is how many CPU threads a command computes with: the -t of every command that runs
// a model, and the threads{} of a training run's options (which a resumed run may change).
//
//kernelgen:options
//kernelgen:preset vit threads=1
type Compute struct {
	// Threads is the number of CPU threads ggml computes with (0: one per core; more than the
	// cores this process may use are lowered to them).
	Threads int `json:"threads" flag:"t" default:"2" min:"0" resume:"keep"`
}

// Training is the schedule and the bookkeeping every training recipe shares (toy train, toy
// finetune, toy train -arch vit; toy train -recipe dflash takes the schedule's flags). Its JSON
// keys are those of a run bundle's config{}; its presets are each recipe's defaults.
//
//kernelgen:options
//kernelgen:preset scratch steps=800 batch=4 lr=2e-3 min_lr=2e-4 warmup=40 eval_every=200 save_every=500 progress_every=50
//kernelgen:preset finetune steps=200 batch=4 lr=2e-4 min_lr=2e-5 warmup=10 eval_every=50 save_every=100 progress_every=10
//kernelgen:preset finetune-full steps=200 batch=4 lr=5e-5 min_lr=5e-6 warmup=10 eval_every=50 save_every=100 progress_every=10
//kernelgen:preset vit steps=5000 batch=64 lr=2e-3 min_lr=1e-4 warmup=50 eval_every=1000 save_every=1000 progress_every=250
//kernelgen:preset dflash steps=300 lr=3e-3 min_lr=3e-4 warmup=20
type Training struct {
	// Steps is the number of optimizer steps.
	Steps int `json:"steps" default:"800" min:"1"`
	// Batch is the number of sequences (images) a step trains on.
	Batch int `json:"batch" default:"4" min:"1"`
	// Schedule is the learning-rate schedule: cosine (warmup, then a cosine decay to the
	// minimum) or constant (warmup, then the peak).
	Schedule string `json:"schedule" default:"cosine"`
	// LR is the peak learning rate.
	LR float64 `json:"lr" default:"2e-3" min:"0"`
	// MinLR is the final learning rate of the cosine schedule.
	MinLR float64 `json:"min_lr" default:"2e-4" min:"0"`
	// Warmup is the number of steps of linear warmup.
	Warmup int `json:"warmup" default:"40" min:"0"`
	// Seed seeds the random choices of the run: the order of the training data (a ViT's
	// held-out split and shifts too), and the initial weights where a recipe makes new ones
	// (toy train's language models, a warm start, a DFlash drafter).
	Seed uint64 `json:"seed" default:"1"`
	// EvalEvery is the number of steps between held-out evaluations (0: at the end only; toy
	// finetune also evaluates before the first step).
	EvalEvery int `json:"eval_every" default:"200" min:"0" resume:"keep"`
	// SaveEvery is the number of steps between checkpoints (0: none by steps).
	SaveEvery int `json:"save_every" default:"500" min:"0" resume:"keep"`
	// SaveMinutes is the number of minutes between checkpoints (0: none by time); one is also
	// saved at the end and on Ctrl-C.
	SaveMinutes float64 `json:"save_minutes" default:"5" min:"0" resume:"keep"`
	// RunsDir is the directory of the run bundles.
	RunsDir string `json:"runs_dir" flag:"runs" default:"runs"`
	// Git records the git commit and branch of the working directory in the run.
	Git bool `json:"git" default:"false" resume:"keep"`
	// ProgressEvery is the number of steps between progress lines when the output is not a
	// terminal.
	ProgressEvery int `json:"progress_every" flag:"-" default:"50" min:"1" resume:"keep"`
}

// Sequences is how a language-model recipe cuts its text: the length of a training sequence,
// and how many batches of them a held-out evaluation reads.
//
//kernelgen:options
//kernelgen:preset scratch seq_len=128 eval_batches=8
//kernelgen:preset finetune seq_len=256 eval_batches=4
type Sequences struct {
	// SeqLen is the number of tokens of a sequence (at most the model's context; in fine-tuning
	// on chat data, a conversation is one sequence).
	SeqLen int `json:"seq_len" flag:"seq" default:"128" min:"1"`
	// EvalBatches is the number of batches of a held-out evaluation.
	EvalBatches int `json:"eval_batches" default:"8" min:"1"`
}

// FinalSample is the greedy sample toy train prints at the end of a run.
//
//kernelgen:options
type FinalSample struct {
	// SampleTokens is the number of tokens of the greedy sample printed at the end (0: none).
	SampleTokens int `json:"sample_tokens" flag:"sample" default:"64" min:"0" resume:"keep"`
	// SamplePrompt is the prompt of the final sample.
	SamplePrompt string `json:"sample_prompt" flag:"prompt" default:"func " resume:"keep"`
}

// Sampling is how a token is drawn from a model's logits: toy generate's and toy chat's flags,
// the server's defaults and request fields (SamplingOverlay), and the kernel table's sampling
// presets (MODEL.toml's [sampling.NAME], whose keys left out keep these defaults, llama.cpp's).
//
//kernelgen:options overlay
//kernelgen:preset greedy temperature=0 top_k=0 top_p=1 min_p=0 repeat_penalty=1 repeat_last_n=0
type Sampling struct {
	// Temperature divides the logits before the softmax; 0 is greedy decoding (argmax), which
	// ignores top-k, top-p, min-p and the seed.
	Temperature float64 `json:"temperature" flag:"temp" default:"0.8" min:"0"`
	// TopK keeps the K most likely tokens (0: off).
	TopK int `json:"top_k" default:"40" min:"0"`
	// TopP keeps the smallest set of most likely tokens whose probabilities sum to at least
	// this (nucleus sampling; 1: off).
	TopP float64 `json:"top_p" default:"0.95" min:"0" max:"1"`
	// MinP drops the tokens whose probability is below this times that of the most likely
	// token (0: off).
	MinP float64 `json:"min_p" default:"0.05" min:"0" max:"1"`
	// RepeatPenalty penalises the tokens seen in the last repeat-last-n tokens of the history:
	// positive logits are divided by it, negative ones multiplied by it, each distinct token
	// once (1: off).
	RepeatPenalty float64 `json:"repeat_penalty" default:"1" min:"0"`
	// RepeatLastN is how many of the most recent tokens the penalties look at (0: off, -1: the
	// whole history).
	RepeatLastN int `json:"repeat_last_n" default:"64" min:"-1"`
	// FrequencyPenalty lowers each token's logit by this times its count in the last
	// repeat-last-n tokens, after the repeat penalty (OpenAI's, llama.cpp's penalty_freq; -2
	// to 2, 0: off).
	FrequencyPenalty float64 `json:"frequency_penalty" default:"0" min:"-2" max:"2"`
	// PresencePenalty lowers the logit of each token among the last repeat-last-n by this
	// (OpenAI's, llama.cpp's penalty_present; -2 to 2, 0: off).
	PresencePenalty float64 `json:"presence_penalty" default:"0" min:"-2" max:"2"`
	// LogitBias adds a value to the logits of the tokens it names before the penalties (OpenAI's
	// logit_bias, llama.cpp's logit-bias sampler, which comes first in its chain too): -100
	// bans a token in practice, +100 all but forces it. Tokens past the vocabulary are ignored;
	// nil or empty turns it off.
	LogitBias map[int32]float64 `json:"logit_bias" flag:"-"`
	// Seed seeds the PCG generator of the draws (toy generate draws one at random, and prints
	// it on stderr, unless -seed is given).
	Seed uint64 `json:"seed" alias:"s" default:"0"`
}

// DFlash is the pairing of a target model with a DFlash drafter: the flags toy train -recipe
// dflash trains a drafter with, and what a kernel table's [dflash] declares. A key the table
// leaves out, and a flag not given when the table pairs nothing, take these defaults.
//
//kernelgen:options
type DFlash struct {
	// Gamma is the block size: the anchor and the masked positions one forward of the drafter
	// fills.
	Gamma int `json:"gamma" default:"8" min:"1"`
	// WindowSize is the number of context positions the drafter reads (0: all).
	WindowSize int `json:"window_size" flag:"window" default:"64" min:"0"`
	// MaskTokenID is the token whose embedding fills the masked positions.
	MaskTokenID int `json:"mask_token_id" flag:"mask-token" default:"0" min:"0"`
}
