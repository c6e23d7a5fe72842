// Package recipes holds toy's training recipes: complete procedures that turn data into a
// trained checkpoint. Scratch trains a LLaMA/SmolLM2-shaped model from random weights.
package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/llama"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// Scratch trains a LLaMA model from scratch. The zero value is not usable: start from
// DefaultScratch. Its JSON, with snake_case keys, is the config{} of the run's run_start.
type Scratch struct {
	// Model is the model's shape (a preset, possibly adjusted); its Seed seeds the initial
	// weights. It is recorded as the run_start's model{}, not in config{}.
	Model config.Llama `json:"-"`
	// Text is a text file or a directory of text files to train on; "" is the built-in
	// corpus, the Go standard library's source. Corpus is a token corpus from `toy tokenize`
	// instead (with Tokenizer naming the GGUF file holding its tokenizer).
	Text      string `json:"text"`
	Corpus    string `json:"corpus"`
	Tokenizer string `json:"tokenizer"`
	// MaxTextBytes caps how much text is read (0: all).
	MaxTextBytes int64 `json:"max_text_bytes"`
	// Steps is the number of optimizer steps; Batch sequences of SeqLen tokens each.
	Steps  int `json:"steps"`
	Batch  int `json:"batch"`
	SeqLen int `json:"seq_len"`
	// Schedule ("cosine" or "constant") with peak LR, floor MinLR and Warmup steps.
	Schedule string      `json:"schedule"`
	LR       float64     `json:"lr"`
	MinLR    float64     `json:"min_lr"`
	Warmup   int         `json:"warmup"`
	AdamW    train.AdamW `json:"adamw"`
	// Seed seeds the order of the training batches (Model.Seed seeds the initial weights).
	Seed          uint64    `json:"seed"`
	Threads       int       `json:"threads"`
	EvalEvery     int       `json:"eval_every"`     // steps between held-out evaluations (0: only at the end)
	EvalBatches   int       `json:"eval_batches"`   // batches per evaluation
	SaveEvery     int       `json:"save_every"`     // steps between checkpoints (0: only at the end)
	RunsDir       string    `json:"runs_dir"`       // where new run directories go
	Resume        string    `json:"resume"`         // a run directory to continue
	ResumeSteps   int       `json:"resume_steps"`   // when resuming, a new total of steps (0: the run's own)
	Git           bool      `json:"git"`            // record the git sha and branch of the working directory
	SampleTokens  int       `json:"sample_tokens"`  // tokens of greedy sample printed at the end
	SamplePrompt  string    `json:"sample_prompt"`  // the prompt of that sample
	Out           io.Writer `json:"-"`              // progress and results (nil: discarded)
	Interactive   bool      `json:"-"`              // redraw one progress line instead of printing lines
	ProgressEvery int       `json:"progress_every"` // steps between progress lines when not interactive
}

// heldOutSeed seeds the choice of the held-out windows, the same at every evaluation.
const heldOutSeed = 0x5eed

// seeds are the run_start's seeds{}: every seed the run's numbers depend on.
func (s *Scratch) seeds() map[string]uint64 {
	return map[string]uint64{"init": uint64(s.Model.Seed), "data": s.Seed, "heldout": heldOutSeed}
}

// DefaultScratch is a small model on the built-in corpus, sized for about two minutes on two
// cores.
func DefaultScratch() Scratch {
	m, _ := config.LlamaPreset("demo")
	return Scratch{
		Model: m, MaxTextBytes: 6 << 20, Steps: 800, Batch: 4, SeqLen: 128,
		Schedule: "cosine", LR: 2e-3, MinLR: 2e-4, Warmup: 40, AdamW: train.FromScratch(),
		Seed: 1, Threads: 2, EvalEvery: 200, EvalBatches: 8, SaveEvery: 0, RunsDir: "runs",
		SampleTokens: 64, SamplePrompt: "func ", ProgressEvery: 50,
	}
}

// Result is what a run produced.
type Result struct {
	RunDir                 string
	Steps                  int
	TrainLoss, HeldOutLoss float64
	UnigramLoss            float64 // held-out loss of a unigram model of the training tokens
	TokensPerS             float64
	Sample                 string
	Interrupted            bool
}

const (
	trainFile, heldOutFile = "train.tok", "heldout.tok"
	modelFile, stateFile   = "model.gguf", "optimizer.gguf"
)

func (s *Scratch) printf(format string, args ...any) {
	if s.Out != nil {
		fmt.Fprintf(s.Out, format, args...)
	}
}

// Validate checks the options.
func (s *Scratch) Validate() error {
	var errs []error
	if err := llama.Validate(s.Model); err != nil {
		errs = append(errs, err)
	}
	if s.Steps < 1 {
		errs = append(errs, fmt.Errorf("steps %d: want at least 1", s.Steps))
	}
	if s.Batch < 1 {
		errs = append(errs, fmt.Errorf("batch %d: want at least 1", s.Batch))
	}
	if s.SeqLen < 1 || s.SeqLen > s.Model.Context {
		errs = append(errs, fmt.Errorf("sequence length %d: want 1..%d (the model's context)", s.SeqLen, s.Model.Context))
	}
	if _, err := train.ParseSchedule(s.Schedule, s.LR, s.MinLR, s.Warmup, s.Steps); err != nil {
		errs = append(errs, err)
	}
	if err := s.AdamW.Validate(); err != nil {
		errs = append(errs, err)
	}
	if s.EvalBatches < 1 {
		errs = append(errs, fmt.Errorf("eval batches %d: want at least 1", s.EvalBatches))
	}
	if s.Corpus != "" && s.Tokenizer == "" {
		errs = append(errs, fmt.Errorf("a token corpus (%s) needs the tokenizer it was made with (-tokenizer)", s.Corpus))
	}
	if s.Corpus != "" && s.Text != "" {
		errs = append(errs, fmt.Errorf("give a text or a token corpus, not both"))
	}
	return errors.Join(errs...)
}

// Run trains until Steps, or until ctx is cancelled (Ctrl-C), in which case it saves a
// checkpoint first and reports Interrupted.
func (s *Scratch) Run(ctx context.Context) (*Result, error) {
	run, tok, start, err := s.prepare()
	if err != nil {
		return nil, err
	}
	defer run.Close()
	return s.train(ctx, run, tok, start)
}

// prepare creates (or reopens) the run directory with its token files and tokenizer.
func (s *Scratch) prepare() (*runs.Run, *tokenizer.Tokenizer, int, error) {
	if s.Resume != "" {
		return s.reopen()
	}
	if err := s.Validate(); err != nil {
		return nil, nil, 0, err
	}
	if err := os.MkdirAll(s.RunsDir, 0o755); err != nil {
		return nil, nil, 0, err
	}
	run, err := runs.Create(s.RunsDir, runs.NewID(time.Now(), rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))))
	if err != nil {
		return nil, nil, 0, err
	}
	tok, err := s.prepareData(run.Dir)
	if err != nil {
		run.Close()
		os.RemoveAll(run.Dir)
		return nil, nil, 0, err
	}
	return run, tok, 0, nil
}

// prepareData writes the run's train and held-out token files and returns the tokenizer.
func (s *Scratch) prepareData(dir string) (*tokenizer.Tokenizer, error) {
	if s.Corpus != "" {
		tok, err := loadTokenizer(s.Tokenizer)
		if err != nil {
			return nil, err
		}
		if err := splitCorpus(s.Corpus, dir, tok.VocabSize()); err != nil {
			return nil, err
		}
		s.Model.Vocab = tok.VocabSize()
		return tok, nil
	}
	trainDocs, heldDocs, err := s.texts()
	if err != nil {
		return nil, err
	}
	var n int64
	for _, d := range trainDocs {
		n += int64(len(d.Text))
	}
	s.printf("corpus: %d training documents (%.1f MiB), %d held out\n", len(trainDocs), float64(n)/(1<<20), len(heldDocs))
	var tok *tokenizer.Tokenizer
	if s.Tokenizer != "" {
		if tok, err = loadTokenizer(s.Tokenizer); err != nil {
			return nil, err
		}
	} else {
		t0 := time.Now()
		texts := func(yield func([]byte) bool) {
			for _, d := range trainDocs {
				if !yield(d.Text) {
					return
				}
			}
		}
		if tok, err = tokenizer.Train(texts, s.Model.Vocab, tokenizer.TrainOptions{}); err != nil {
			return nil, err
		}
		s.printf("tokenizer: byte-level BPE, %d tokens, trained in %.1fs\n", tok.VocabSize(), time.Since(t0).Seconds())
	}
	s.Model.Vocab = tok.VocabSize()
	eos := tok.EOS()
	for _, part := range []struct {
		docs []data.Document
		file string
	}{{trainDocs, trainFile}, {heldDocs, heldOutFile}} {
		if err := writeTokens(filepath.Join(dir, part.file), part.docs, tok, eos); err != nil {
			return nil, err
		}
	}
	return tok, nil
}

// texts reads the training text: a file, a directory, or the Go source tree.
func (s *Scratch) texts() (trainDocs, heldDocs []data.Document, err error) {
	if s.Text == "" {
		root, err := data.GoRoot()
		if err != nil {
			return nil, nil, err
		}
		if trainDocs, heldDocs, err = data.GoSource(root, s.MaxTextBytes); err != nil {
			return nil, nil, err
		}
	} else {
		docs, err := data.ReadTexts(s.Text, s.MaxTextBytes)
		if err != nil {
			return nil, nil, err
		}
		for _, d := range docs {
			if data.IsHeldOut(d.Path) {
				heldDocs = append(heldDocs, d)
			} else {
				trainDocs = append(trainDocs, d)
			}
		}
	}
	return ensureHeldOut(trainDocs, heldDocs, s.Text)
}

// ensureHeldOut makes sure both parts hold text when the hash split left the held-out part
// empty (a small corpus): the last training document moves over, or, for a single document, its
// last 5%.
func ensureHeldOut(trainDocs, heldDocs []data.Document, source string) ([]data.Document, []data.Document, error) {
	switch {
	case len(heldDocs) > 0:
		return trainDocs, heldDocs, nil
	case len(trainDocs) > 1:
		return trainDocs[:len(trainDocs)-1], trainDocs[len(trainDocs)-1:], nil
	case len(trainDocs) == 1:
		d := trainDocs[0]
		cut := len(d.Text) - len(d.Text)/20
		return []data.Document{{Path: d.Path, Text: d.Text[:cut]}}, []data.Document{{Path: d.Path, Text: d.Text[cut:]}}, nil
	}
	if source == "" {
		source = "the Go source corpus"
	}
	return nil, nil, fmt.Errorf("%s holds no text", source)
}

// writeTokens tokenizes docs (each followed by the end-of-text token) into a token file.
func writeTokens(path string, docs []data.Document, tok *tokenizer.Tokenizer, eos int32) error {
	w, err := data.NewWriter(path, 4, tok.VocabSize())
	if err != nil {
		return err
	}
	for _, d := range docs {
		ids := tok.Encode(string(d.Text), tokenizer.EncodeOptions{})
		if eos >= 0 {
			ids = append(ids, eos)
		}
		if err := w.Write(ids); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Close()
}

// splitCorpus copies a token corpus into the run as its train (95%) and held-out (5%) parts.
func splitCorpus(src, dir string, vocab int) error {
	c, err := data.Open(src)
	if err != nil {
		return err
	}
	defer c.Close()
	if c.Vocab() > vocab {
		return fmt.Errorf("%s: its vocabulary (%d) is larger than the tokenizer's (%d)", src, c.Vocab(), vocab)
	}
	n := c.Len()
	cut := n - n/20
	for _, part := range []struct {
		file     string
		from, to int64
	}{{trainFile, 0, cut}, {heldOutFile, cut, n}} {
		w, err := data.NewWriter(filepath.Join(dir, part.file), 4, vocab)
		if err != nil {
			return err
		}
		buf := make([]int32, 1<<16)
		for off := part.from; off < part.to; {
			k := int(min(int64(len(buf)), part.to-off))
			if _, err := c.ReadAt(buf[:k], off); err != nil {
				w.Abort()
				return err
			}
			if err := w.Write(buf[:k]); err != nil {
				w.Abort()
				return err
			}
			off += int64(k)
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	return nil
}

// loadTokenizer reads the tokenizer stored in a GGUF file (a checkpoint, or the output of
// `toy tokenizer train`).
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	f, err := ggml.OpenGGUF(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	values, err := llama.Metadata(f)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(func(k string) (any, bool) { v, ok := values[k]; return v, ok })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tok, nil
}

// LoadTokenizer reads the tokenizer stored in a GGUF file.
func LoadTokenizer(path string) (*tokenizer.Tokenizer, error) { return loadTokenizer(path) }

// reopen continues a run from its last checkpoint.
func (s *Scratch) reopen() (*runs.Run, *tokenizer.Tokenizer, int, error) {
	run, err := runs.OpenRun(s.Resume)
	if err != nil {
		return nil, nil, 0, err
	}
	fail := func(err error) (*runs.Run, *tokenizer.Tokenizer, int, error) {
		run.Close()
		return nil, nil, 0, fmt.Errorf("resume %s: %w", s.Resume, err)
	}
	var start *runs.RunStart
	for _, e := range run.Events {
		if rs, ok := e.Data.(runs.RunStart); ok && start == nil {
			start = &rs
		}
	}
	if start == nil {
		return fail(fmt.Errorf("no run_start event in %s", run.EventsPath()))
	}
	saved := *s
	raw, _ := start.Config.(json.RawMessage)
	if start.Legacy { // a run logged before config{} had snake_case keys
		if raw, err = snakeKeys(raw, reflect.TypeFor[Scratch]()); err != nil {
			return fail(fmt.Errorf("reading the training options: %w", err))
		}
	}
	if err := json.Unmarshal(raw, s); err != nil {
		return fail(fmt.Errorf("reading the training options: %w", err))
	}
	s.Out, s.Interactive, s.Resume = saved.Out, saved.Interactive, saved.Resume
	if saved.ResumeSteps > 0 { // the schedule then follows the new total
		s.Steps = saved.ResumeSteps
	}
	model := filepath.Join(run.WeightsDir(), modelFile)
	f, err := ggml.OpenGGUF(model)
	if err != nil {
		return fail(err)
	}
	cfg, values, err := llama.ConfigFromGGUF(f)
	f.Close()
	if err != nil {
		return fail(err)
	}
	s.Model = cfg
	tok, err := tokenizer.FromGGUF(func(k string) (any, bool) { v, ok := values[k]; return v, ok })
	if err != nil {
		return fail(err)
	}
	step, ok := values["toy.train.step"].(uint32)
	if !ok {
		return fail(fmt.Errorf("%s has no toy.train.step", model))
	}
	return run, tok, int(step), nil
}

// snakeKeys rewrites a JSON object written from a struct of type t without JSON tags (its keys
// the Go field names) to the keys t's tags give them, recursing into struct fields. Keys that
// name no field are dropped.
func snakeKeys(raw json.RawMessage, t reflect.Type) (json.RawMessage, error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(raw, &in); err != nil || in == nil {
		return raw, err
	}
	out := map[string]json.RawMessage{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		v, ok := in[f.Name]
		if !ok || name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if f.Type.Kind() == reflect.Struct {
			var err error
			if v, err = snakeKeys(v, f.Type); err != nil {
				return nil, err
			}
		}
		out[name] = v
	}
	return json.Marshal(out)
}

// checkpointKVs is the metadata saved with the weights.
func (s *Scratch) checkpointKVs(tok *tokenizer.Tokenizer, step int, name string) []llama.KV {
	kvs := []llama.KV{
		{Key: "general.name", Value: name},
		{Key: "toy.train.step", Value: uint32(step)},
		{Key: "toy.train.seed", Value: uint64(s.Seed)},
		{Key: "toy.train.adamw_mode", Value: s.AdamW.Mode.String()},
	}
	for _, kv := range tok.GGUF() {
		kvs = append(kvs, llama.KV{Key: kv.Key, Value: kv.Value})
	}
	return kvs
}

func (s *Scratch) train(ctx context.Context, run *runs.Run, tok *tokenizer.Tokenizer, startStep int) (*Result, error) {
	res := &Result{RunDir: run.Dir}
	be, err := ggml.NewBackend(s.Threads)
	if err != nil {
		return nil, err
	}
	defer be.Close()
	trainC, err := data.Open(filepath.Join(run.Dir, trainFile))
	if err != nil {
		return nil, err
	}
	defer trainC.Close()
	heldC, err := data.Open(filepath.Join(run.Dir, heldOutFile))
	if err != nil {
		return nil, err
	}
	defer heldC.Close()
	window := s.SeqLen + 1
	if trainC.Len() < int64(window) || heldC.Len() < int64(window) {
		return nil, fmt.Errorf("the corpus is too small: %d training and %d held-out tokens for windows of %d", trainC.Len(), heldC.Len(), window)
	}

	var m *llama.Model
	if startStep == 0 {
		if m, err = llama.New(s.Model, be); err == nil {
			err = m.Init()
		}
	} else {
		m, _, err = llama.Load(filepath.Join(run.WeightsDir(), modelFile), be)
	}
	if err != nil {
		return nil, err
	}
	defer m.Close()
	tr, err := llama.NewTrainer(m, s.SeqLen, s.Batch)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	tr.Sep = tok.EOS()
	if startStep > 0 {
		values, err := tr.LoadState(filepath.Join(run.WeightsDir(), stateFile))
		if err != nil {
			return nil, err
		}
		mode, _ := values["toy.train.adamw_mode"].(string)
		saved, err := train.ParseMode(mode)
		if err != nil {
			return nil, fmt.Errorf("resume: optimizer state: %w", err)
		}
		if err := s.AdamW.CheckMode(saved); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
	}
	ev, err := llama.NewEvaluator(m, s.SeqLen, s.Batch)
	if err != nil {
		return nil, err
	}
	defer ev.Close()
	ev.Sep = tok.EOS()

	gitInfo := (*runs.GitInfo)(nil)
	if s.Git {
		if sha, branch, ok := runs.Git("."); ok {
			gitInfo = &runs.GitInfo{SHA: sha, Branch: branch}
		}
	}
	if err := run.LogStart(runs.RunStart{Model: s.Model, Config: s, Seeds: s.seeds(), Git: gitInfo}); err != nil {
		return nil, err
	}
	sched, _ := train.ParseSchedule(s.Schedule, s.LR, s.MinLR, s.Warmup, s.Steps)
	sampler := data.SamplerAt(trainC, s.Seed, window, uint64(startStep*s.Batch))
	name := fmt.Sprintf("toy %s", filepath.Base(run.Dir))

	save := func(step int) error {
		if err := os.MkdirAll(run.WeightsDir(), 0o755); err != nil {
			return err
		}
		kvs := s.checkpointKVs(tok, step, name)
		if err := tr.SaveState(filepath.Join(run.WeightsDir(), stateFile), kvs[1:4]); err != nil {
			return err
		}
		return m.Save(filepath.Join(run.WeightsDir(), modelFile), kvs)
	}
	evaluate := func() (float64, error) {
		es := data.SamplerAt(heldC, heldOutSeed, window, 0) // the same held-out windows every time
		total := 0.0
		for i := 0; i < s.EvalBatches; i++ {
			flat, err := es.NextBatch(s.Batch)
			if err != nil {
				return 0, err
			}
			l, err := ev.Loss(split(flat, window))
			if err != nil {
				return 0, err
			}
			total += float64(l)
		}
		return total / float64(s.EvalBatches), nil
	}

	s.printf("model: %s, %.2fM parameters, %d layers, d_model %d, vocab %d; batch %d × %d tokens; %d threads\n",
		presetName(s.Model), float64(m.Params())/1e6, s.Model.NLayers, s.Model.DModel, s.Model.Vocab, s.Batch, s.SeqLen, be.Threads())
	if startStep > 0 {
		s.printf("resuming %s at step %d of %d\n", run.Dir, startStep, s.Steps)
	}
	t0 := time.Now()
	var loss float32
	step := startStep
	tokensPerStep := float64(s.Batch * s.SeqLen)
	for ; step < s.Steps; step++ {
		if ctx.Err() != nil {
			res.Interrupted = true
			break
		}
		flat, err := sampler.NextBatch(s.Batch)
		if err != nil {
			return nil, err
		}
		lr := sched.LR(step)
		decay, err := s.AdamW.Params(step, lr, true)
		if err != nil {
			return nil, err
		}
		noDecay, _ := s.AdamW.Params(step, lr, false)
		ts := time.Now()
		if loss, err = tr.Step(split(flat, window), decay, noDecay); err != nil {
			return nil, err
		}
		if math.IsNaN(float64(loss)) || math.IsInf(float64(loss), 0) {
			return nil, fmt.Errorf("step %d: the loss is %v (lower the learning rate)", step, loss)
		}
		tps := tokensPerStep / time.Since(ts).Seconds()
		if err := run.LogStep(runs.Step{Step: step, Loss: float64(loss), LR: lr, TokensPerS: tps}); err != nil {
			return nil, err
		}
		s.progress(step, startStep, float64(loss), lr, t0)
		if s.EvalEvery > 0 && (step+1)%s.EvalEvery == 0 && step+1 < s.Steps {
			hl, err := evaluate()
			if err != nil {
				return nil, err
			}
			if err := run.LogEval(runs.Eval{Step: step, Loss: hl}); err != nil {
				return nil, err
			}
			s.endProgress()
			s.printf("step %d: held-out loss %.4f\n", step+1, hl)
		}
		if s.SaveEvery > 0 && (step+1)%s.SaveEvery == 0 {
			if err := save(step + 1); err != nil {
				return nil, err
			}
		}
	}
	s.endProgress()
	elapsed := time.Since(t0).Seconds()
	res.Steps, res.TrainLoss = step, float64(loss)
	if step > startStep {
		res.TokensPerS = float64(step-startStep) * tokensPerStep / elapsed
	}
	if err := save(step); err != nil {
		return nil, err
	}
	reason := runs.ReasonDone
	if res.Interrupted {
		reason = runs.ReasonInterrupted
		s.printf("interrupted at step %d: checkpoint saved; continue with toy train -resume %s\n", step, run.Dir)
	}
	if res.HeldOutLoss, err = evaluate(); err != nil {
		return nil, err
	}
	if err := run.LogEval(runs.Eval{Step: step, Loss: res.HeldOutLoss}); err != nil {
		return nil, err
	}
	if err := run.LogEnd(runs.RunEnd{Step: step, Loss: float64(loss), Reason: reason}); err != nil {
		return nil, err
	}
	if res.UnigramLoss, err = unigram(trainC, heldC); err != nil {
		return nil, err
	}
	s.printf("done: %d steps in %.0fs (%.0f tokens/s); train loss %.4f, held-out loss %.4f (unigram baseline %.4f)\n",
		step-startStep, elapsed, res.TokensPerS, res.TrainLoss, res.HeldOutLoss, res.UnigramLoss)
	s.printf("checkpoint: %s\n", filepath.Join(run.WeightsDir(), modelFile))
	if s.SampleTokens > 0 && !res.Interrupted {
		if res.Sample, err = sample(m, tok, s.SamplePrompt, s.SampleTokens); err != nil {
			return nil, err
		}
		s.printf("sample (greedy):\n%s\n", res.Sample)
	}
	return res, nil
}

func presetName(c config.Llama) string {
	for _, n := range config.LlamaPresetNames() {
		if p, _ := config.LlamaPreset(n); p == c {
			return n
		}
	}
	return "custom"
}

// split cuts a flat batch into windows.
func split(flat []int32, window int) [][]int32 {
	var out [][]int32
	for i := 0; i+window <= len(flat); i += window {
		out = append(out, flat[i:i+window])
	}
	return out
}

// unigram is the held-out cross entropy of a unigram model of the training tokens.
func unigram(trainC, heldC *data.Corpus) (float64, error) {
	read := func(c *data.Corpus) ([]int32, error) {
		ids := make([]int32, c.Len())
		_, err := c.ReadAt(ids, 0)
		return ids, err
	}
	tr, err := read(trainC)
	if err != nil {
		return 0, err
	}
	he, err := read(heldC)
	if err != nil {
		return 0, err
	}
	u, err := train.NewUnigram(tr, trainC.Vocab())
	if err != nil {
		return 0, err
	}
	return u.CrossEntropy(he)
}

// sample greedily continues prompt with the model.
func sample(m *llama.Model, tok *tokenizer.Tokenizer, prompt string, n int) (string, error) {
	ids := tok.Encode(prompt, tokenizer.EncodeOptions{})
	if len(ids) == 0 {
		ids = []int32{tok.EOS()}
	}
	ev, err := llama.NewEvaluator(m, m.Cfg.Context, 1)
	if err != nil {
		return "", err
	}
	defer ev.Close()
	out, err := ev.Greedy(ids, n, tok.EOS())
	if err != nil {
		return "", err
	}
	return tok.Decode(out, tokenizer.DecodeOptions{})
}

func (s *Scratch) progress(step, start int, loss, lr float64, t0 time.Time) {
	done := step + 1 - start
	elapsed := time.Since(t0)
	eta := time.Duration(float64(elapsed) / float64(done) * float64(s.Steps-step-1)).Round(time.Second)
	tps := float64(done*s.Batch*s.SeqLen) / elapsed.Seconds()
	if s.Interactive {
		const width = 24
		filled := width * (step + 1) / s.Steps
		bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
		s.printf("\rstep %*d/%d [%s] loss %.4f lr %.2e %6.0f tok/s ETA %-8s", len(fmt.Sprint(s.Steps)), step+1, s.Steps, bar, loss, lr, tps, eta)
		return
	}
	if (step+1)%max(s.ProgressEvery, 1) == 0 || step+1 == s.Steps {
		s.printf("step %d/%d loss %.4f lr %.2e %.0f tok/s ETA %s\n", step+1, s.Steps, loss, lr, tps, eta)
	}
}

func (s *Scratch) endProgress() {
	if s.Interactive {
		s.printf("\n")
	}
}
