// Package recipes holds toy's training recipes: complete procedures that turn data into a
// trained checkpoint, on one training loop (run bundles, checkpoints, Ctrl-C, bit-for-bit
// resume). Scratch trains a LLaMA/SmolLM2-shaped or a GPT-2 model from random weights (toy
// train), Finetune adapts a GGUF model with LoRA adapters, a full fine-tune or a warm start (toy
// finetune), and ViT trains an image classifier (toy train -arch vit). A recipe runs
// data-parallel in Replicas (under mpirun) and behind a KernelGate, which decides which of toy's
// own CPU kernels its graphs run.
package recipes

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/runs"
	sampling "github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/speculative"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// seeds are the run_start's seeds{}: every seed the run's numbers depend on.
func (s *Scratch) seeds() map[string]uint64 {
	return map[string]uint64{"init": uint64(s.initSeed()), "data": s.Seed, "heldout": heldOutSeed}
}

// minTrainedVocab is the smallest vocabulary a tokenizer trained by the run can have: the 256
// byte tokens and <|endoftext|>.
const minTrainedVocab = 256 + 1

func (s *Scratch) printf(format string, args ...any) {
	if s.Out != nil {
		fmt.Fprintf(s.Out, format, args...)
	}
}

// Validate checks the options.
func (s *Scratch) Validate() error {
	var errs []error
	if err := s.validateModel(); err != nil {
		errs = append(errs, err)
	}
	if s.Steps < 1 {
		errs = append(errs, fmt.Errorf("steps %d: want at least 1", s.Steps))
	}
	if s.Batch < 1 {
		errs = append(errs, fmt.Errorf("batch %d: want at least 1", s.Batch))
	} else if err := checkShare(s.Replicas, s.Batch); err != nil {
		errs = append(errs, err)
	}
	if s.SeqLen < 1 || s.SeqLen > s.Context() {
		errs = append(errs, fmt.Errorf("sequence length %d: want 1..%d (the model's context)", s.SeqLen, s.Context()))
	}
	if _, err := train.ParseSchedule(s.Schedule, s.LR, s.MinLR, s.Warmup, s.Steps); err != nil {
		errs = append(errs, err)
	}
	if err := s.AdamW.Validate(); err != nil {
		errs = append(errs, err)
	}
	if s.Tokenizer == "" && s.Corpus == "" && s.vocab() < minTrainedVocab {
		errs = append(errs, fmt.Errorf("vocabulary %d: a tokenizer trained on the text needs at least %d tokens (256 bytes and <|endoftext|>); give a larger vocabulary (-vocab %d or more) or a tokenizer (-tokenizer)",
			s.vocab(), minTrainedVocab, minTrainedVocab))
	}
	if s.EvalEvery < 0 || s.SaveEvery < 0 || s.SaveMinutes < 0 || math.IsNaN(s.SaveMinutes) {
		errs = append(errs, fmt.Errorf("eval every %d, save every %d steps or %g minutes: want 0 (never) or more", s.EvalEvery, s.SaveEvery, s.SaveMinutes))
	}
	if s.EvalBatches < 1 {
		errs = append(errs, fmt.Errorf("eval batches %d: want at least 1", s.EvalBatches))
	}
	if s.MaxTextBytes < 0 {
		errs = append(errs, fmt.Errorf("max text bytes %d: want 0 (all the text) or more", s.MaxTextBytes))
	}
	if s.Corpus != "" && s.Tokenizer == "" {
		errs = append(errs, fmt.Errorf("a token corpus (%s) needs the tokenizer it was made with (-tokenizer)", s.Corpus))
	}
	if s.Corpus != "" && s.Text != "" {
		errs = append(errs, fmt.Errorf("give a text or a token corpus, not both"))
	}
	switch {
	case s.Generated < 0:
		errs = append(errs, fmt.Errorf("generated %d: want 0 or more", s.Generated))
	case s.Teacher == "" && s.Generated > 0:
		errs = append(errs, fmt.Errorf("generated %d: sequences of a teacher, but no teacher is given (-teacher)", s.Generated))
	case s.Teacher != "" && s.Generated == 0:
		errs = append(errs, fmt.Errorf("a teacher (%s) needs the number of sequences it generates (-generated)", s.Teacher))
	}
	if s.Teacher != "" && s.Corpus != "" {
		errs = append(errs, fmt.Errorf("a teacher's prompts come from a text, not a token corpus (%s)", s.Corpus))
	}
	if s.Teacher != "" && s.Tokenizer != "" && s.Tokenizer != s.Teacher {
		errs = append(errs, fmt.Errorf("a distilled model takes its teacher's tokenizer (%s), not another (%s)", s.Teacher, s.Tokenizer))
	}
	return errors.Join(errs...)
}

// Run trains until Steps, or until ctx is cancelled (Ctrl-C), in which case it saves a
// checkpoint first and reports Interrupted.
//
// A new run's options, data and tokenizer are all checked before anything is written, and a
// run that fails before it starts training leaves no directory behind.
func (s *Scratch) Run(ctx context.Context) (*Result, error) {
	var (
		run   *runs.Run
		tok   *tokenizer.Tokenizer
		start int
		err   error
	)
	if isLead(s.Replicas) {
		run, tok, start, err = s.prepare(ctx)
	} else {
		s.Out = nil // rank 0 reports
	}
	if replicated(s.Replicas) {
		run, tok, start, err = s.shareStart(run, tok, start, err)
	}
	if err != nil {
		return nil, err
	}
	res, err := s.train(ctx, run, tok, start)
	run.Close()
	if err != nil && s.Resume == "" && !s.started && isLead(s.Replicas) {
		s.discard(run.Dir)
	}
	return res, err
}

// scratchStart is what the other ranks of a data-parallel run take from rank 0's prepared run:
// the options (the model's vocabulary follows the tokenizer rank 0 trained) and the
// end-of-text token that separates documents.
type scratchStart struct {
	Options *Scratch      `json:"options"`
	Model   *config.Llama `json:"model"`
	GPT2    *config.Gpt2  `json:"gpt2"`
	EOS     int32         `json:"eos"`
}

// shareStart gives every rank the run rank 0 prepared (a new run's directory and options; a
// resumed run is reopened by each rank, after rank 0).
func (s *Scratch) shareStart(run *runs.Run, tok *tokenizer.Tokenizer, start int, err error) (*runs.Run, *tokenizer.Tokenizer, int, error) {
	state := &scratchStart{Options: s, Model: &s.Model, GPT2: s.GPT2}
	if tok != nil {
		state.EOS = tok.EOS()
	}
	run, err = shareStart(s.Replicas, state,
		func() (*runs.Run, error) { return run, err },
		func(dir string) (*runs.Run, error) {
			s.GPT2 = state.GPT2
			if s.Resume != "" {
				var r *runs.Run
				r, tok, start, err = s.reopen()
				return r, err
			}
			s.eos = &state.EOS
			return runs.Follow(dir)
		})
	return run, tok, start, err
}

// prepare creates (or reopens) the run directory with its token files and tokenizer.
func (s *Scratch) prepare(ctx context.Context) (*runs.Run, *tokenizer.Tokenizer, int, error) {
	if s.Resume != "" {
		return s.reopen()
	}
	if err := s.Validate(); err != nil {
		return nil, nil, 0, err
	}
	d, err := s.loadData(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	_, statErr := os.Stat(s.RunsDir)
	s.madeRunsDir = statErr != nil
	run, err := runs.Create(s.RunsDir, runs.NewID(time.Now(), rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))))
	if err != nil {
		return nil, nil, 0, err
	}
	if err := s.writeData(run.Dir, d); err != nil {
		run.Close()
		s.discard(run.Dir)
		return nil, nil, 0, err
	}
	return run, d.tok, 0, nil
}

// discard removes a new run's directory after a failed start, and the runs directory too when
// the run created it and nothing else is in it.
func (s *Scratch) discard(dir string) {
	os.RemoveAll(dir)
	if s.madeRunsDir {
		os.Remove(s.RunsDir)
	}
}

// preparedData is a new run's data, read and checked before the run directory exists: the
// text's documents, or a teacher's token ids.
type preparedData struct {
	tok                 *tokenizer.Tokenizer
	trainDocs, heldDocs []data.Document
	trainIDs, heldIDs   []int32
}

// loadData reads the text (or opens the token corpus) and loads or trains the tokenizer,
// writing nothing.
func (s *Scratch) loadData(ctx context.Context) (*preparedData, error) {
	if s.Corpus != "" {
		tok, err := loadTokenizer(s.Tokenizer)
		if err != nil {
			return nil, err
		}
		c, err := data.Open(s.Corpus)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		if err := checkCorpusTokenizer(c, tok, s.Tokenizer); err != nil {
			return nil, err
		}
		if n, window := c.Len(), int64(s.SeqLen+1); n-n/20 < window || n/20 < window {
			return nil, fmt.Errorf("the corpus is too small: %d training and %d held-out tokens for windows of %d", n-n/20, n/20, window)
		}
		s.setVocab(tok.VocabSize())
		return &preparedData{tok: tok}, nil
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
	if s.Teacher != "" {
		s.Tokenizer = s.Teacher
	}
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
		if tok, err = tokenizer.TrainContext(ctx, texts, s.vocab(), tokenizer.TrainOptions{}); err != nil {
			return nil, err
		}
		s.printf("tokenizer: byte-level BPE, %d tokens, trained in %.1fs\n", tok.VocabSize(), time.Since(t0).Seconds())
	}
	s.setVocab(tok.VocabSize())
	d := &preparedData{tok: tok, trainDocs: trainDocs, heldDocs: heldDocs}
	if s.Teacher != "" {
		if err := s.distil(ctx, d); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// distil replaces the text of d by the teacher's greedy continuations of openings drawn from
// it: Generated for training, a twentieth as many (at least one) from the held-out text. A
// cancelled ctx stops it between sequences, before anything is written.
func (s *Scratch) distil(ctx context.Context, d *preparedData) error {
	teacher, err := decoding.OpenModel(s.Teacher, decoding.ModelOptions{Threads: s.Threads})
	if err != nil {
		return err
	}
	defer teacher.Close()
	if teacher.Arch.Vocab != d.tok.VocabSize() {
		return fmt.Errorf("%s: its model has %d tokens, its tokenizer %d", s.Teacher, teacher.Arch.Vocab, d.tok.VocabSize())
	}
	promptLen := min(speculative.TeacherPromptTokens, teacher.Arch.Context/2) // room for a continuation
	if promptLen < 1 {
		return fmt.Errorf("%s: a context of %d positions leaves no room for a prompt and its continuation", s.Teacher, teacher.Arch.Context)
	}
	eos := d.tok.EOS()
	t0 := time.Now()
	total, done := s.Generated+max(1, s.Generated/20), 0
	for _, part := range []struct {
		docs []data.Document
		n    int
		seed uint64
		out  *[]int32
	}{{d.trainDocs, s.Generated, s.Seed, &d.trainIDs}, {d.heldDocs, max(1, s.Generated/20), heldOutSeed, &d.heldIDs}} {
		var text []int32
		for _, doc := range part.docs {
			text = append(text, d.tok.Encode(string(doc.Text), tokenizer.EncodeOptions{})...)
			if eos >= 0 {
				text = append(text, eos)
			}
		}
		prompts, err := speculative.TeacherPrompts(text, part.n, promptLen, part.seed)
		if err != nil {
			return err
		}
		before := done
		*part.out, err = speculative.TargetText(ctx, teacher, prompts, s.SeqLen, sampling.GreedyParams(), decoding.DecoderOptions{Threads: s.Threads}, func(k int) {
			if done = before + k; done%max(1, total/10) == 0 || done == total {
				s.printf("teacher: %d of %d sequences generated (%.0f s)\n", done, total, time.Since(t0).Seconds())
			}
		})
		if err != nil {
			return fmt.Errorf("teacher %s: %w", s.Teacher, err)
		}
	}
	s.printf("teacher: %s generated %d training and %d held-out tokens in %.1f s\n", s.Teacher, len(d.trainIDs), len(d.heldIDs), time.Since(t0).Seconds())
	if window := s.SeqLen + 1; len(d.trainIDs) < window || len(d.heldIDs) < window {
		return fmt.Errorf("teacher %s: %d training and %d held-out tokens generated, fewer than a window of %d: generate more sequences (-generated)", s.Teacher, len(d.trainIDs), len(d.heldIDs), window)
	}
	return nil
}

// writeData writes the run's train and held-out token files.
func (s *Scratch) writeData(dir string, d *preparedData) error {
	if s.Corpus != "" {
		return splitCorpus(s.Corpus, dir, d.tok.VocabSize())
	}
	if d.trainIDs != nil {
		if err := writeIDs(filepath.Join(dir, trainFile), d.trainIDs, d.tok.VocabSize(), 4); err != nil {
			return err
		}
		return writeIDs(filepath.Join(dir, heldOutFile), d.heldIDs, d.tok.VocabSize(), 4)
	}
	eos := d.tok.EOS()
	for _, part := range []struct {
		docs []data.Document
		file string
	}{{d.trainDocs, trainFile}, {d.heldDocs, heldOutFile}} {
		if err := writeTokens(filepath.Join(dir, part.file), part.docs, d.tok, eos); err != nil {
			return err
		}
	}
	return nil
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

// checkCorpusTokenizer refuses a token corpus that another tokenizer than tok (read from
// tokPath) made: its vocabulary size must be tok's, and its fingerprint, when it records one
// (toy tokenize writes it; older corpora have none), tok's. Trained with another tokenizer, a
// corpus's ids would name other tokens, silently.
func checkCorpusTokenizer(c *data.Corpus, tok *tokenizer.Tokenizer, tokPath string) error {
	if c.Vocab() != tok.VocabSize() {
		return fmt.Errorf("%s was made with a tokenizer of %d tokens, not with %s (%d tokens): give the tokenizer it was made with (-tokenizer)", c.Path(), c.Vocab(), tokPath, tok.VocabSize())
	}
	if fp, ok := c.Fingerprint(); ok {
		if want := tok.Fingerprint(); fp != want {
			return fmt.Errorf("%s was made with another tokenizer of %d tokens (fingerprint %x…), not with %s (%x…): give the tokenizer it was made with (-tokenizer)", c.Path(), c.Vocab(), fp[:6], tokPath, want[:6])
		}
	}
	return nil
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
	values, err := transformer.Metadata(f)
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

// reopen continues a run from its last checkpoint, with the options of its latest run_start
// (so that an earlier extension of the steps, or an earlier -t, holds), the caller's
// ResumeKeep options and a new total of steps (ResumeSteps).
func (s *Scratch) reopen() (*runs.Run, *tokenizer.Tokenizer, int, error) {
	run, _, err := reopenOptions(s.Resume, isLead(s.Replicas), s, "training", func(saved *Scratch) error {
		s.Out, s.Interactive, s.Resume, s.ResumeKeep, s.ResumeSteps = saved.Out, saved.Interactive, saved.Resume, saved.ResumeKeep, saved.ResumeSteps
		return keepOptions(s, saved, saved.ResumeKeep)
	})
	if err != nil {
		return nil, nil, 0, err
	}
	fail := func(err error) (*runs.Run, *tokenizer.Tokenizer, int, error) {
		run.Close()
		return nil, nil, 0, fmt.Errorf("resume %s: %w", s.Resume, err)
	}
	c, err := run.LatestCheckpoint()
	if err != nil {
		return fail(err)
	}
	values, err := s.checkPairing(c, run.ID)
	if err != nil {
		return fail(err)
	}
	step, _ := values["toy.train.step"].(uint32)
	if s.Steps, err = resumedTotal(int(step), s.Steps, s.ResumeSteps); err != nil {
		return fail(err)
	}
	if err := s.Validate(); err != nil {
		return fail(err)
	}
	tok, err := tokenizer.FromGGUF(func(k string) (any, bool) { v, ok := values[k]; return v, ok })
	if err != nil {
		return fail(err)
	}
	s.ckpt = c
	return run, tok, int(step), nil
}

// checkPairing reads the checkpoint's model configuration into s (Model or GPT2, by its
// architecture) and its metadata, and checks that its optimizer state belongs with it: the
// same step, seed and run (and the manifest's step and run).
func (s *Scratch) checkPairing(c *runs.Checkpoint, runID string) (map[string]any, error) {
	if !c.Has(modelFile) || !c.Has(stateFile) {
		return nil, fmt.Errorf("the checkpoint in %s lacks %s or %s", filepath.Dir(c.Path(modelFile)), modelFile, stateFile)
	}
	values, err := s.readCheckpointConfig(c.Path(modelFile))
	if err != nil {
		return nil, err
	}
	g, err := ggml.OpenGGUF(c.Path(stateFile))
	if err != nil {
		return nil, err
	}
	state, err := transformer.Metadata(g)
	g.Close()
	if err != nil {
		return nil, err
	}
	if _, ok := values["toy.train.step"].(uint32); !ok {
		return nil, fmt.Errorf("%s has no toy.train.step", c.Path(modelFile))
	}
	for _, k := range []string{"toy.train.step", "toy.train.seed", "toy.train.run_id"} {
		if values[k] != state[k] {
			return nil, fmt.Errorf("%s (%s %v) and %s (%v) are not one checkpoint", c.Path(modelFile), k, values[k], c.Path(stateFile), state[k])
		}
	}
	if step := values["toy.train.step"].(uint32); !c.Legacy && int(step) != c.Step {
		return nil, fmt.Errorf("%s is at step %d, its manifest says %d", c.Path(modelFile), step, c.Step)
	}
	if id, ok := values["toy.train.run_id"].(string); ok && id != runID {
		return nil, fmt.Errorf("%s was saved by run %q, not %q", c.Path(modelFile), id, runID)
	}
	return values, nil
}

// checkpointKVs is the metadata saved with the weights.
func (s *Scratch) checkpointKVs(tok *tokenizer.Tokenizer, step int, name, runID string) []transformer.KV {
	kvs := []transformer.KV{
		{Key: "general.name", Value: name},
		{Key: "toy.train.step", Value: uint32(step)},
		{Key: "toy.train.seed", Value: uint64(s.Seed)},
		{Key: "toy.train.adamw_mode", Value: s.AdamW.Mode.String()},
		{Key: "toy.train.run_id", Value: runID},
	}
	for _, kv := range tok.GGUF() {
		kvs = append(kvs, transformer.KV{Key: kv.Key, Value: kv.Value})
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

	var m *training.Model
	if startStep == 0 {
		if m, err = s.NewModel(be); err == nil {
			err = m.Init()
		}
	} else {
		m, _, err = training.Load(s.ckpt.Path(modelFile), be)
	}
	if err != nil {
		return nil, err
	}
	defer m.Close()
	var opts []training.TrainerOption
	if replicated(s.Replicas) {
		opts = append(opts, training.DataParallel(s.Replicas))
	}
	tm, err := Gated(s.KernelGate, &m.Arch, nil, m)
	if err != nil {
		return nil, err
	}
	tr, err := training.NewTrainer(tm, s.SeqLen, localBatch(s.Replicas, s.Batch), opts...)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	eos := int32(-1)
	switch {
	case tok != nil:
		eos = tok.EOS()
	case s.eos != nil:
		eos = *s.eos
	}
	tr.Sep = eos
	if startStep > 0 {
		if err := loadOptimizerState(tr, s.ckpt.Path(stateFile), s.AdamW); err != nil {
			return nil, err
		}
	}
	if err := checkSameStart(s.Replicas, m.Weights()); err != nil {
		return nil, err
	}
	if !isLead(s.Replicas) {
		return s.follow(ctx, run, tr, trainC, startStep)
	}
	ev, err := training.NewEvaluator(tm, s.SeqLen, s.Batch)
	if err != nil {
		return nil, err
	}
	defer ev.Close()
	ev.Sep = eos

	sched, err := train.ParseSchedule(s.Schedule, s.LR, s.MinLR, s.Warmup, s.Steps)
	if err != nil {
		return nil, err
	}
	if err := run.LogStart(runs.RunStart{Model: s.modelRecord(), Config: s, Seeds: s.seeds(), Git: gitInfo(s.Git)}); err != nil {
		return nil, err
	}
	s.started = true
	name := fmt.Sprintf("toy %s", filepath.Base(run.Dir))

	save := func(step int) error {
		kvs := s.checkpointKVs(tok, step, name, run.ID)
		_, err := run.SaveCheckpoint(step, func(dir string) error {
			if err := tr.SaveState(filepath.Join(dir, stateFile), kvs[1:5]); err != nil {
				return err
			}
			return m.Save(filepath.Join(dir, modelFile), kvs)
		}, modelFile)
		return err
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

	s.printf("model: %s, %.2fM parameters, %d layers, d_model %d, vocab %d; batch %d × %d tokens%s; %d threads\n",
		s.presetName(), float64(m.Params())/1e6, m.Arch.NLayers, m.Arch.DModel, m.Arch.Vocab, s.Batch, s.SeqLen, describeShare(s.Replicas, s.Batch), be.Threads())
	if startStep > 0 {
		s.printf("resuming %s at step %d of %d\n", run.Dir, startStep, s.Steps)
	}
	l := s.loop(run, sched, tr, trainC, startStep)
	l.progress = progressLine{s.Out, s.Interactive, s.ProgressEvery, s.Steps, s.Batch * s.SeqLen, "tok"}
	l.evaluate, l.save, l.finite = lossEval(evaluate), save, tr.CheckFinite
	step, err := l.do(ctx, res)
	if err != nil {
		return nil, err
	}
	elapsed := l.elapsedSecs
	if res.UnigramLoss, err = unigram(trainC, heldC); err != nil {
		return nil, err
	}
	s.printf("done: %d steps in %.0fs (%.0f tokens/s); train loss %.4f, held-out loss %.4f (unigram baseline %.4f)\n",
		step-startStep, elapsed, res.TokensPerS, res.TrainLoss, res.HeldOutLoss, res.UnigramLoss)
	s.printf("checkpoint: %s\n", filepath.Join(run.WeightsDir(), modelFile))
	if s.SampleTokens > 0 && !res.Interrupted {
		if res.Sample, err = sample(tm, m.Arch.Context, tok, s.SamplePrompt, s.SampleTokens); err != nil {
			return nil, err
		}
		s.printf("sample (greedy):\n%s\n", res.Sample)
	}
	return res, nil
}

// loop is the training loop of every rank: each step draws the global batch (the same on
// every rank, from the run's seed and the step) and trains this rank's share of it.
func (s *Scratch) loop(run *runs.Run, sched train.Schedule, tr *training.Trainer, trainC *data.Corpus, startStep int) loop {
	window := s.SeqLen + 1
	sampler := data.SamplerAt(trainC, s.Seed, window, uint64(startStep*s.Batch))
	return loop{run: run, sched: sched, adamw: s.AdamW, steps: s.Steps, start: startStep,
		evalEvery: s.EvalEvery, saveEvery: s.SaveEvery, saveMinutes: s.SaveMinutes, command: "toy train",
		replicas: s.Replicas,
		step: func(_ int, decay, noDecay [7]float32) (float32, error) {
			flat, err := sampler.NextBatch(s.Batch)
			if err != nil {
				return 0, err
			}
			return tr.Step(shareOf(s.Replicas, split(flat, window)), decay, noDecay)
		}}
}

// follow trains as a rank other than 0 of a data-parallel run: the same steps, nothing
// written.
func (s *Scratch) follow(ctx context.Context, run *runs.Run, tr *training.Trainer, trainC *data.Corpus, startStep int) (*Result, error) {
	sched, err := train.ParseSchedule(s.Schedule, s.LR, s.MinLR, s.Warmup, s.Steps)
	if err != nil {
		return nil, err
	}
	res := &Result{RunDir: run.Dir}
	l := s.loop(run, sched, tr, trainC, startStep)
	_, err = l.do(ctx, res)
	return res, err
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

// sample greedily continues prompt with the model, whose context is ctxLen.
func sample(m training.Trainable, ctxLen int, tok *tokenizer.Tokenizer, prompt string, n int) (string, error) {
	ids := tok.Encode(prompt, tokenizer.EncodeOptions{})
	if len(ids) == 0 {
		ids = []int32{tok.EOS()}
	}
	ev, err := training.NewEvaluator(m, ctxLen, 1)
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
