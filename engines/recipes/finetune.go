package recipes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/runs"
	chatfmt "github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

func (f *Finetune) printf(format string, args ...any) {
	if f.Out != nil {
		fmt.Fprintf(f.Out, format, args...)
	}
}

// Run fine-tunes until Steps, or until ctx is cancelled (Ctrl-C), in which case it saves a
// checkpoint first and reports Interrupted. A new run that fails before it trains leaves no
// directory behind.
func (f *Finetune) Run(ctx context.Context) (*Result, error) {
	var (
		run   *runs.Run
		start int
		err   error
	)
	if isLead(f.Replicas) {
		run, start, err = f.prepare()
	} else {
		f.Out = nil // rank 0 reports
	}
	if replicated(f.Replicas) {
		run, err = shareStart(f.Replicas, f,
			func() (*runs.Run, error) { return run, err },
			func(dir string) (*runs.Run, error) {
				if f.Resume != "" {
					var r *runs.Run
					r, start, err = f.reopen()
					return r, err
				}
				return runs.Follow(dir)
			})
	}
	if err != nil {
		return nil, err
	}
	res, err := f.train(ctx, run, start)
	run.Close()
	if err != nil && f.Resume == "" && !f.started && isLead(f.Replicas) {
		os.RemoveAll(run.Dir)
		if f.madeRunsDir {
			os.Remove(f.RunsDir)
		}
	}
	return res, err
}

// openBase maps the base model and reads its tokenizer.
func (f *Finetune) openBase(be *ggml.Backend) (*decoding.GGUFModel, *tokenizer.Tokenizer, error) {
	m, err := decoding.OpenModel(f.Base, decoding.ModelOptions{Backend: be})
	if err != nil {
		return nil, nil, err
	}
	tok, err := tokenizer.FromGGUF(func(k string) (any, bool) { v, ok := m.Meta[k]; return v, ok })
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("%s: tokenizer: %w", f.Base, err)
	}
	if tok.VocabSize() != m.Arch.Vocab {
		m.Close()
		return nil, nil, fmt.Errorf("%s: the tokenizer has %d tokens, the model %d", f.Base, tok.VocabSize(), m.Arch.Vocab)
	}
	if f.mode() == ModeWarmStart {
		f.NewModel.Vocab = m.Arch.Vocab
		if err := training.CheckWarmStart(m, *f.NewModel); err != nil {
			m.Close()
			return nil, nil, err
		}
		if f.SeqLen > f.NewModel.Context {
			m.Close()
			return nil, nil, fmt.Errorf("sequence length %d: the new model's context is %d", f.SeqLen, f.NewModel.Context)
		}
	} else if f.SeqLen > m.Arch.Context {
		m.Close()
		return nil, nil, fmt.Errorf("sequence length %d: the model's context is %d", f.SeqLen, m.Arch.Context)
	}
	return m, tok, nil
}

// prepare creates the run directory with its token files, or reopens it.
func (f *Finetune) prepare() (*runs.Run, int, error) {
	if f.Resume != "" {
		return f.reopen()
	}
	if err := f.Validate(); err != nil {
		return nil, 0, err
	}
	// The run_start keeps them absolute: a resume from another working directory finds them.
	f.Base, f.Data = absPath(f.Base), absPath(f.Data)
	cpu, err := ggml.NewCPUBackend(1)
	if err != nil {
		return nil, 0, err
	}
	defer cpu.Close()
	m, tok, err := f.openBase(cpu)
	if err != nil {
		return nil, 0, err
	}
	defer m.Close()
	switch f.mode() { // refuse what cannot train before any work
	case ModeLoRA:
		ad, err := training.NewAdapter(m, f.loraOptions())
		if err != nil {
			return nil, 0, err
		}
		ad.Close()
	case ModeFull:
		if err := training.CheckTrainable(m); err != nil {
			return nil, 0, err
		}
	}
	var write func(dir string) error
	chat, err := f.IsChat()
	if err != nil {
		return nil, 0, err
	}
	if chat {
		if write, err = f.chatData(m, tok); err != nil {
			return nil, 0, err
		}
	} else {
		docs, err := data.ReadTexts(f.Data, f.MaxTextBytes)
		if err != nil {
			return nil, 0, err
		}
		var trainDocs, heldDocs []data.Document
		for _, d := range docs {
			if data.IsHeldOut(d.Path) {
				heldDocs = append(heldDocs, d)
			} else {
				trainDocs = append(trainDocs, d)
			}
		}
		if trainDocs, heldDocs, err = ensureHeldOut(trainDocs, heldDocs, f.Data); err != nil {
			return nil, 0, err
		}
		f.printf("data: %d training documents, %d held out (text)\n", len(trainDocs), len(heldDocs))
		write = func(dir string) error {
			for _, part := range []struct {
				docs []data.Document
				file string
			}{{trainDocs, trainFile}, {heldDocs, heldOutFile}} {
				if err := writeTokens(filepath.Join(dir, part.file), part.docs, tok, tok.EOS()); err != nil {
					return err
				}
			}
			return nil
		}
	}
	_, statErr := os.Stat(f.RunsDir)
	f.madeRunsDir = statErr != nil
	run, err := runs.Create(f.RunsDir, runs.NewID(time.Now(), rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))))
	if err != nil {
		return nil, 0, err
	}
	if err := write(run.Dir); err != nil {
		run.Close()
		os.RemoveAll(run.Dir)
		return nil, 0, err
	}
	return run, 0, nil
}

// chatData renders the conversations into records of SeqLen+1 tokens (padded with the
// end-of-text token) and their masks (1 where the token is the assistant's, which the loss
// counts), and returns the function that writes them into a run directory.
func (f *Finetune) chatData(m *decoding.GGUFModel, tok *tokenizer.Tokenizer) (func(dir string) error, error) {
	convs, err := data.ReadChat(f.Data)
	if err != nil {
		return nil, err
	}
	if len(convs) < 2 {
		return nil, fmt.Errorf("%s: %d conversation: want at least 2 (one is held out)", f.Data, len(convs))
	}
	tmpl, err := f.chatTemplate(m, tok)
	if err != nil {
		return nil, err
	}
	W := f.SeqLen + 1
	type part struct{ ids, mask []int32 }
	var tr, held part
	cut := 0
	for i, c := range convs {
		ids, kept, err := renderChat(tmpl, tok, c.Messages)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", c.Path, c.Line, err)
		}
		if len(ids) > W {
			ids, kept = ids[:W], kept[:W]
			cut++
		}
		n := 0
		for _, k := range kept[1:] {
			if k {
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("%s:%d: no assistant token within the first %d tokens (raise -seq)", c.Path, c.Line, W)
		}
		p := &tr
		if i%heldOutEvery == heldOutEvery-1 || (i == len(convs)-1 && len(held.ids) == 0) {
			p = &held
		}
		for j := range W {
			id, mk := tok.EOS(), int32(0)
			if j < len(ids) {
				id = ids[j]
				if kept[j] {
					mk = 1
				}
			}
			p.ids = append(p.ids, id)
			p.mask = append(p.mask, mk)
		}
	}
	f.printf("data: %d conversations (%d held out), template %s, loss on the assistant's tokens", len(convs), len(held.ids)/W, tmpl.Name)
	if cut > 0 {
		f.printf("; %d conversations longer than %d tokens were cut", cut, W)
	}
	f.printf("\n")
	return func(dir string) error {
		for _, x := range []struct {
			p          part
			ids, masks string
		}{{tr, trainFile, trainMaskFile}, {held, heldOutFile, heldOutMaskFile}} {
			if err := writeIDs(filepath.Join(dir, x.ids), x.p.ids, tok.VocabSize(), 4); err != nil {
				return err
			}
			if err := writeIDs(filepath.Join(dir, x.masks), x.p.mask, 2, 2); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// chatTemplate is the template named by Template, or else the base's own
// tokenizer.chat_template rendered as Jinja, with the tokenizer's BOS and EOS texts (a
// leading bos_token dropped where renderChat puts the BOS token first). A template that does
// not compile is an error naming the base and the template's line.
func (f *Finetune) chatTemplate(m *decoding.GGUFModel, tok *tokenizer.Tokenizer) (chatfmt.Template, error) {
	if f.Template != "" {
		return chatfmt.TemplateByName(f.Template)
	}
	src, _ := m.Meta["tokenizer.chat_template"].(string)
	if src == "" {
		return chatfmt.Template{}, fmt.Errorf("%s has no chat template (tokenizer.chat_template); name one with -template", f.Base)
	}
	return chatfmt.NewJinjaTemplate(src, chatfmt.JinjaOptions{Source: f.Base + " (tokenizer.chat_template)",
		BOSToken: tok.Token(tok.BOS()), EOSToken: tok.Token(tok.EOS()), AddsBOS: tok.Vocab().AddBOS && tok.BOS() >= 0})
}

// renderChat renders a conversation through the template and tokenizes it, BOS first when the
// tokenizer adds one, and tells for each token whether it is the assistant's: the text of each
// assistant reply up to and including the template's end-of-turn marker. Each assistant turn
// (but a conversation's opening one, which answers nothing) is located as the difference between the conversation rendered up to it with a generation
// prompt and rendered through it.
func renderChat(tmpl chatfmt.Template, tok *tokenizer.Tokenizer, msgs []data.Message) ([]int32, []bool, error) {
	conv := make([]chatfmt.Message, len(msgs))
	for i, m := range msgs {
		conv[i] = chatfmt.Message{Role: m.Role, Content: m.Content}
	}
	full, err := tmpl.Apply(conv, false)
	if err != nil {
		return nil, nil, err
	}
	var ids []int32
	var kept []bool
	if tok.Vocab().AddBOS && tok.BOS() >= 0 {
		ids, kept = append(ids, tok.BOS()), append(kept, false)
	}
	add := func(text string, k bool) {
		for _, id := range tok.Encode(text, tokenizer.EncodeOptions{ParseSpecial: true}) {
			ids, kept = append(ids, id), append(kept, k)
		}
	}
	done := 0 // bytes of full tokenized so far
	for i, m := range conv {
		if m.Role != chatfmt.RoleAssistant || i == 0 { // an opening assistant turn answers no prompt: it stays context
			continue
		}
		prompt, err := tmpl.Apply(conv[:i], true)
		if err != nil {
			return nil, nil, err
		}
		through, err := tmpl.Apply(conv[:i+1], false)
		if err != nil {
			return nil, nil, err
		}
		if !strings.HasPrefix(through, prompt) || !strings.HasPrefix(full, through) || len(prompt) < done {
			return nil, nil, fmt.Errorf("template %s: message %d: the rendering of the conversation up to a reply is not a prefix of the whole", tmpl.Name, i)
		}
		reply := through[len(prompt):]
		if eot := tmpl.EndOfTurn(); eot != "" {
			if j := strings.LastIndex(reply, eot); j >= 0 {
				reply = reply[:j+len(eot)]
			}
		}
		add(full[done:len(prompt)], false)
		add(reply, true)
		done = len(prompt) + len(reply)
	}
	add(full[done:], false)
	return ids, kept, nil
}

// reopen continues a run from its last checkpoint with its own options (see Scratch.reopen).
func (f *Finetune) reopen() (*runs.Run, int, error) {
	run, start, err := reopenOptions(f.Resume, isLead(f.Replicas), f, "fine-tuning", func(saved *Finetune) error {
		f.Out, f.Interactive, f.Resume, f.ResumeKeep, f.ResumeSteps = saved.Out, saved.Interactive, saved.Resume, saved.ResumeKeep, saved.ResumeSteps
		return keepOptions(f, saved, saved.ResumeKeep)
	})
	if err != nil {
		return nil, 0, err
	}
	fail := func(err error) (*runs.Run, int, error) {
		run.Close()
		return nil, 0, fmt.Errorf("resume %s: %w", f.Resume, err)
	}
	var base BaseModel
	if raw, ok := start.Model.(json.RawMessage); !ok || json.Unmarshal(raw, &base) != nil {
		return fail(fmt.Errorf("the run_start names no base model"))
	}
	// A run started before the paths were stored absolute names them from its working directory.
	f.Base, f.Data = savedPath(f.Base, f.Resume, f.RunsDir), savedPath(f.Data, f.Resume, f.RunsDir)
	if sum, err := fileSHA256(f.Base); err != nil {
		return fail(err)
	} else if sum != base.SHA256 {
		return fail(fmt.Errorf("the base model %s has changed since the run started (sha256 %s, was %s)", f.Base, sum, base.SHA256))
	}
	c, err := run.LatestCheckpoint()
	if err != nil {
		return fail(err)
	}
	step, err := checkpointPairing(c, run.ID, f.weightsFile())
	if err != nil {
		return fail(err)
	}
	if f.Steps, err = resumedTotal(step, f.Steps, f.ResumeSteps); err != nil {
		return fail(err)
	}
	if err := f.Validate(); err != nil {
		return fail(err)
	}
	f.ckpt = c
	return run, step, nil
}

// weightsFile is the checkpoint's trained file: the adapter, or the model.
func (f *Finetune) weightsFile() string {
	if f.mode() == ModeLoRA {
		return adapterFile
	}
	return modelFile
}

// checkpointPairing checks that a checkpoint's trained file (the adapter or the model) and
// optimizer state are one: the same step, seed and run, and the manifest's step; it returns
// the step.
func checkpointPairing(c *runs.Checkpoint, runID, adapterFile string) (int, error) {
	if !c.Has(adapterFile) || !c.Has(stateFile) {
		return 0, fmt.Errorf("the checkpoint in %s lacks %s or %s", filepath.Dir(c.Path(adapterFile)), adapterFile, stateFile)
	}
	meta := func(path string) (map[string]any, error) {
		g, err := ggml.OpenGGUF(path)
		if err != nil {
			return nil, err
		}
		defer g.Close()
		return transformer.Metadata(g)
	}
	a, err := meta(c.Path(adapterFile))
	if err != nil {
		return 0, err
	}
	s, err := meta(c.Path(stateFile))
	if err != nil {
		return 0, err
	}
	step, ok := a["toy.train.step"].(uint32)
	if !ok {
		return 0, fmt.Errorf("%s has no toy.train.step", c.Path(adapterFile))
	}
	for _, k := range []string{"toy.train.step", "toy.train.seed", "toy.train.run_id"} {
		if a[k] != s[k] {
			return 0, fmt.Errorf("%s (%s %v) and %s (%v) are not one checkpoint", c.Path(adapterFile), k, a[k], c.Path(stateFile), s[k])
		}
	}
	if !c.Legacy && int(step) != c.Step {
		return 0, fmt.Errorf("%s is at step %d, its manifest says %d", c.Path(adapterFile), step, c.Step)
	}
	if id, _ := a["toy.train.run_id"].(string); id != runID {
		return 0, fmt.Errorf("%s was saved by run %q, not %q", c.Path(adapterFile), id, runID)
	}
	return int(step), nil
}

func fileSHA256(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// batches are a run's training and held-out batches: windows of a text corpus, or chat
// records with their loss masks.
type batches struct {
	trainC, heldC *data.Corpus
	trainM, heldM *data.Corpus // chat: the masks (nil for text)
	window, batch int
	seed          uint64
}

func openBatches(dir string, chat bool, window, batch int, seed uint64) (*batches, error) {
	b := &batches{window: window, batch: batch, seed: seed}
	var err error
	open := func(name string) *data.Corpus {
		if err != nil {
			return nil
		}
		var c *data.Corpus
		c, err = data.Open(filepath.Join(dir, name))
		return c
	}
	b.trainC, b.heldC = open(trainFile), open(heldOutFile)
	if chat {
		b.trainM, b.heldM = open(trainMaskFile), open(heldOutMaskFile)
	}
	if err == nil && (b.trainC.Len() < int64(window) || b.heldC.Len() < int64(window)) {
		err = fmt.Errorf("the data is too small: %d training and %d held-out tokens for windows of %d", b.trainC.Len(), b.heldC.Len(), window)
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (b *batches) Close() {
	for _, c := range []*data.Corpus{b.trainC, b.heldC, b.trainM, b.heldM} {
		if c != nil {
			c.Close()
		}
	}
}

// records reads chat records i (of window tokens) and their loss flags: flag t of a record
// tells whether its token t+1 is the assistant's.
func (b *batches) records(ids, masks *data.Corpus, idx []int64) ([][]int32, [][]bool, error) {
	var seqs [][]int32
	var keep [][]bool
	for _, i := range idx {
		seq := make([]int32, b.window)
		mask := make([]int32, b.window)
		if _, err := ids.ReadAt(seq, i*int64(b.window)); err != nil {
			return nil, nil, err
		}
		if _, err := masks.ReadAt(mask, i*int64(b.window)); err != nil {
			return nil, nil, err
		}
		k := make([]bool, b.window-1)
		for t := range k {
			k[t] = mask[t+1] == 1
		}
		seqs, keep = append(seqs, seq), append(keep, k)
	}
	return seqs, keep, nil
}

// train returns batch number n of the training batches (a pure function of the seed and n,
// so a resumed run continues exactly).
func (b *batches) train(n int) ([][]int32, [][]bool, error) {
	if b.trainM == nil {
		flat, err := data.SamplerAt(b.trainC, b.seed, b.window, uint64(n*b.batch)).NextBatch(b.batch)
		return split(flat, b.window), nil, err
	}
	records := b.trainC.Len() / int64(b.window)
	idx := make([]int64, b.batch)
	for i := range idx {
		r := rand.New(rand.NewPCG(b.seed, uint64(n*b.batch+i)^0x9e3779b97f4a7c15))
		idx[i] = int64(r.Uint64N(uint64(records)))
	}
	return b.records(b.trainC, b.trainM, idx)
}

// heldOut returns held-out batch i of an evaluation (the same batches every time).
func (b *batches) heldOut(i int) ([][]int32, [][]bool, error) {
	if b.heldM == nil {
		flat, err := data.SamplerAt(b.heldC, heldOutSeed, b.window, uint64(i*b.batch)).NextBatch(b.batch)
		return split(flat, b.window), nil, err
	}
	records := b.heldC.Len() / int64(b.window)
	idx := make([]int64, b.batch)
	for j := range idx {
		idx[j] = int64(i*b.batch+j) % records
	}
	return b.records(b.heldC, b.heldM, idx)
}

func (f *Finetune) checkpointKVs(step int, runID string) []transformer.KV {
	return []transformer.KV{
		{Key: "toy.train.step", Value: uint32(step)},
		{Key: "toy.train.seed", Value: uint64(f.Seed)},
		{Key: "toy.train.adamw_mode", Value: f.AdamW.Mode.String()},
		{Key: "toy.train.run_id", Value: runID},
		{Key: "toy.finetune.base", Value: filepath.Base(f.Base)},
		{Key: decoding.BaseFingerprintKey, Value: f.baseFingerprint},
	}
}

func (f *Finetune) train(ctx context.Context, run *runs.Run, startStep int) (*Result, error) {
	res := &Result{RunDir: run.Dir}
	be, err := ggml.NewBackend(f.Threads)
	if err != nil {
		return nil, err
	}
	defer be.Close()
	m, tok, err := f.openBase(be)
	if err != nil {
		return nil, err
	}
	defer func() { m.Close() }()
	base := BaseModel{Path: f.Base, Architecture: m.Arch.Name, Type: ggml.TypeName(m.WeightType()), Params: m.Params()}
	chat, err := f.IsChat()
	if err != nil {
		return nil, err
	}
	window := f.SeqLen + 1
	bs, err := openBatches(run.Dir, chat, window, f.Batch, f.Seed)
	if err != nil {
		return nil, err
	}
	defer bs.Close()
	ln, err := f.newLearner(m, be, startStep)
	if err != nil {
		return nil, err
	}
	defer ln.close()
	arch := &m.Arch
	baseName, _ := m.Meta["general.name"].(string)
	if ln.model != nil { // the trained copy holds all it needs: unmap the base
		arch = &ln.model.Arch
		m.Close()
		m = nil
	}
	newTrainer := training.NewTrainer
	if chat {
		newTrainer = training.NewMaskedTrainer
	}
	var opts []training.TrainerOption
	if replicated(f.Replicas) {
		opts = append(opts, training.DataParallel(f.Replicas))
	}
	tm, err := Gated(f.KernelGate, arch, []string{f.Base, baseName}, ln.trainable)
	if err != nil {
		return nil, err
	}
	tr, err := newTrainer(tm, f.SeqLen, localBatch(f.Replicas, f.Batch), opts...)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	if !chat { // text documents are separated by the end-of-text token; a chat record is one
		tr.Sep = tok.EOS()
	}
	if startStep > 0 {
		if err := loadOptimizerState(tr, f.ckpt.Path(stateFile), f.AdamW); err != nil {
			return nil, err
		}
	}
	if err := checkSameStart(f.Replicas, ln.tensors()); err != nil {
		return nil, err
	}
	l := loop{run: run, adamw: f.AdamW, steps: f.Steps, start: startStep,
		evalEvery: f.EvalEvery, saveEvery: f.SaveEvery, saveMinutes: f.SaveMinutes, command: "toy finetune",
		replicas: f.Replicas,
		step: func(step int, decay, noDecay [7]float32) (float32, error) {
			seqs, keep, err := bs.train(step)
			if err != nil {
				return 0, err
			}
			tr.HoldEmbeddings(step < f.FreezeEmbeddingsSteps)
			return tr.StepMasked(shareOf(f.Replicas, seqs), shareOf(f.Replicas, keep), decay, noDecay)
		}}
	if l.sched, err = train.ParseSchedule(f.Schedule, f.LR, f.MinLR, f.Warmup, f.Steps); err != nil {
		return nil, err
	}
	if !isLead(f.Replicas) { // another rank: the same steps, nothing written
		_, err := l.do(ctx, res)
		return res, err
	}
	ev, err := training.NewLossEvaluator(tm, f.SeqLen, f.Batch, chat)
	if err != nil {
		return nil, err
	}
	defer ev.Close()
	if !chat {
		ev.Sep = tok.EOS()
	}
	if base.SHA256, err = fileSHA256(f.Base); err != nil {
		return nil, err
	}
	if f.baseFingerprint, err = decoding.ModelFingerprint(f.Base); err != nil {
		return nil, err
	}
	seeds := map[string]uint64{"data": f.Seed, "heldout": heldOutSeed}
	switch f.mode() {
	case ModeLoRA:
		seeds["lora"] = f.LoRA.Seed
	case ModeWarmStart:
		seeds["init"] = uint64(f.NewModel.Seed)
	}
	if err := run.LogStart(runs.RunStart{Model: base, Config: f, Seeds: seeds, Git: gitInfo(f.Git)}); err != nil {
		return nil, err
	}
	f.started = true

	file := f.weightsFile()
	save := func(step int) error {
		kvs := append(f.checkpointKVs(step, run.ID), ln.kvs()...)
		_, err := run.SaveCheckpoint(step, func(dir string) error {
			if err := tr.SaveState(filepath.Join(dir, stateFile), kvs[:4]); err != nil {
				return err
			}
			return ln.save(filepath.Join(dir, file), kvs)
		}, file)
		return err
	}
	evaluate := func() (float64, error) {
		total := 0.0
		for i := 0; i < f.EvalBatches; i++ {
			seqs, keep, err := bs.heldOut(i)
			if err != nil {
				return 0, err
			}
			l, err := ev.LossMasked(seqs, keep)
			if err != nil {
				return 0, err
			}
			total += float64(l)
		}
		return total / float64(f.EvalBatches), nil
	}

	f.printf("%s; batch %d × %d tokens%s; %d threads\n", ln.describe(base), f.Batch, f.SeqLen, describeShare(f.Replicas, f.Batch), be.Threads())
	if startStep > 0 {
		f.printf("resuming %s at step %d of %d\n", run.Dir, startStep, f.Steps)
	}
	if startStep == 0 {
		hl, err := evaluate()
		if err != nil {
			return nil, err
		}
		what := map[string]string{ModeLoRA: "the base model", ModeFull: "the base model", ModeWarmStart: "the warm-started model"}[f.mode()]
		if math.IsNaN(hl) || math.IsInf(hl, 0) {
			return nil, fmt.Errorf("before the first step: the held-out loss of %s is %v: %s holds weights that are not finite", what, hl, f.Base)
		}
		if err := run.LogEval(runs.Eval{Step: 0, Loss: hl}); err != nil {
			return nil, err
		}
		f.printf("step 0: held-out loss %.4f (%s)\n", hl, what)
	}
	l.progress = progressLine{f.Out, f.Interactive, f.ProgressEvery, f.Steps, f.Batch * f.SeqLen, "tok"}
	l.evaluate, l.save, l.finite = lossEval(evaluate), save, tr.CheckFinite
	step, err := l.do(ctx, res)
	if err != nil {
		return nil, err
	}
	elapsed := l.elapsedSecs
	out := filepath.Join(run.WeightsDir(), file)
	f.printf("done: %d steps in %.0fs (%.0f tokens/s); train loss %.4f, held-out loss %.4f\n",
		step-startStep, elapsed, res.TokensPerS, res.TrainLoss, res.HeldOutLoss)
	if f.mode() == ModeLoRA {
		f.printf("adapter: %s\n  run it:   toy generate -m %s -lora %s\n  merge it: toy export -m %s -lora %s -o merged.gguf\n", out, f.Base, out, f.Base, out)
	} else {
		f.printf("model: %s\n  run it:   toy generate -m %s\n", out, out)
	}
	return res, nil
}
