package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/serve"
	"github.com/toyml/toy/engines/speculative"
	"github.com/toyml/toy/ggml"
)

// ServeFlags are the flags of toy serve that toy bench serve shares: the decoder's and the
// server's.
type ServeFlags struct {
	DecoderFlags
	Parallel, queue     int
	modelName, template string
	promptCache         bool
	allowUnresolved     *bool
	// preset is -sampling-preset: the kernel table entry's preset a request's defaults come from.
	preset *string
	// APIKeys are the keys the API asks for (toy serve's -api-key and -api-key-file); none:
	// it asks for none.
	APIKeys []string
	// LogRequests is toy serve's -log-requests.
	LogRequests bool
	// strictModelName is -strict-model-name: a request naming another model is refused.
	strictModelName bool
	// Draft is -draft: the draft model of speculative decoding ("self": -m's own file);
	// draftN and draftPMin its -draft-n and -draft-p-min.
	Draft     string
	draftN    int
	draftPMin float64
	// DFlash is -dflash: the DFlash drafter the kernel table pairs with the model, its path
	// relative to modelsDir (-models-dir) unless absolute.
	DFlash    bool
	modelsDir string
	// fs is the flag set register registered the flags in (which were given).
	fs *flag.FlagSet
}

// Register defines the flags toy serve and toy bench serve share on fs.
func (f *ServeFlags) Register(fs *flag.FlagSet) {
	f.DecoderFlags.Register(fs)
	fs.IntVar(&f.Parallel, "parallel", 0, fmt.Sprintf("sequences decoded at once (slots); -c is shared among them (0: as many as keep %d positions each, at most %d, at least 1)", minSlotContext, maxAutoSlots))
	fs.IntVar(&f.Parallel, "np", 0, "alias of -parallel (llama-server's name)")
	fs.IntVar(&f.queue, "queue", 64, "requests that may wait for a slot, counting those still being read or tokenized; more are refused with 429")
	fs.StringVar(&f.modelName, "model-name", "", "the model's id in the API (default: the run's id for a run's weights/model.gguf, else the file's name without .gguf); also matched against the kernel table's names")
	fs.BoolVar(&f.strictModelName, "strict-model-name", false, "refuse (404) a request whose \"model\" is not the model's id; by default the loaded model serves any name, as llama-server does")
	fs.StringVar(&f.template, "template", "", TemplateUsage("", "the file's"))
	fs.BoolVar(&f.promptCache, "prompt-cache", true, "reuse the keys and values of the longest prefix a prompt shares with a free slot's last sequence (a conversation's earlier turns), or copy them from another slot's (a common system message); false computes every prompt whole")
	f.allowUnresolved = RegisterGate(fs)
	f.preset = RegisterPreset(fs)
	fs.StringVar(&f.Draft, "draft", "", "draft model GGUF for speculative decoding in every slot (the same vocabulary as -m): greedy replies are the same, sampled ones follow the same distribution; self: -m's own file (a benchmark's ceiling, every proposal accepted)")
	fs.IntVar(&f.draftN, "draft-n", speculative.DefaultDraftTokens, "tokens the drafter proposes per slot and step (with -dflash, at most and by default the block's proposals)")
	fs.Float64Var(&f.draftPMin, "draft-p-min", speculative.DefaultMinProbability, "with -draft or -dflash: the drafter stops proposing, each step, at a token it gives a probability below this (0: always -draft-n; default 0.75 with -draft, 0 with -dflash)")
	fs.BoolVar(&f.DFlash, "dflash", false, "speculative decoding with the DFlash drafter the kernel table pairs with the model (its [dflash] draft_model), one state per slot; -draft takes precedence")
	fs.StringVar(&f.modelsDir, "models-dir", "", "the directory a [dflash] draft_model path is relative to (default: the directory of -m)")
	f.fs = fs
}

// Check refuses bad flags before anything is loaded.
func (f *ServeFlags) Check() error {
	if f.Parallel < 0 {
		return Usagef("-parallel %d: want at least 1 (0: chosen from the context)", f.Parallel)
	}
	if f.queue < 0 {
		return Usagef("-queue %d: want 0 or more", f.queue)
	}
	if f.CtxFull != "error" {
		return Usagef("-ctx-full %s: toy serve does not shift the context; a reply stops at the end of its slot's context (finish_reason length)", f.CtxFull)
	}
	if _, err := f.Options(); err != nil {
		return err
	}
	if f.Model == "" {
		return Usagef("-m MODEL is required")
	}
	if f.draftN < 1 {
		return Usagef("-draft-n %d: want at least 1 token per step", f.draftN)
	}
	if err := speculative.CheckMinProbability(f.draftPMin); err != nil {
		return Usagef("-draft-p-min %v: %v", f.draftPMin, err)
	}
	return CheckTemplateName(f.template)
}

// ServedModel is a server over a loaded model.
type ServedModel struct {
	Server *serve.Server
	// Ready is the line toy serve prints when it takes requests: the model, slots, queue and
	// sampling defaults.
	Ready string
	// Close stops the server and frees its decoder and model.
	Close func()
}

// Start loads the model, runs the boot-time kernel gate (the table's entry for the model, its
// audit printed on stderr; an unresolved lookup refuses to serve unless allowed) and starts a
// server over it, whose handler serves once the caller hands it out.
func (f *ServeFlags) Start(stderr io.Writer) (*ServedModel, error) {
	opts, err := f.Options()
	if err != nil {
		return nil, err
	}
	if f.modelName == "" {
		f.modelName = DefaultModelID(f.Model)
	}
	m, tok, err := f.openModel(stderr, "serve")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	// The boot gate: the server's decoders look up toy's CPU operations (on the CPU backend);
	// it samples on the host.
	t := BuildTarget()
	ref := ModelRef(m, f.Model, f.modelName)
	entry, named := resolveEntry(stderr, t, ref)
	r, err := auditCPU(m, ref, opts, *f.allowUnresolved)
	if t != nil {
		if entry != nil {
			fmt.Fprintf(stderr, "toy serve: kernel table %s: %s resolves to %s\n", t.Name, f.Model, entry.Name)
		}
		for _, l := range r.Lines() {
			fmt.Fprintf(stderr, "toy serve:   audit: %s\n", l)
		}
		if len(r.Lines()) == 0 {
			fmt.Fprintf(stderr, "toy serve:   audit: no kernel lookups (ggml's kernels run this backend)\n")
		}
	}
	if err != nil {
		return nil, err
	}
	info := map[string]any{"backend": ggml.BackendKind, "architecture": m.Arch.Name, "kernel_entry": nil, "kernel_entry_names_model": named}
	if entry != nil {
		info["kernel_target"], info["kernel_entry"] = t.Name, entry.Name
	}
	info["kernel_resolved"], info["kernel_expected_absent"], info["kernel_unresolved"] = len(r.Resolved), len(r.ExpectedAbsent), len(r.Unresolved)
	p := sample.DefaultParams()
	if err := PresetFor(&p, entry, named, *f.preset, map[string]bool{}); err != nil {
		return nil, err
	}
	beh := ModelBehaviour(m, tok, entry, named)
	if f.template == "" {
		f.template = beh.Template
	}
	var tmpl *sample.Template
	if t, err := ChatTemplate(m, tok, f.template, beh.AddBOS); err == nil {
		tmpl = &t
	} else if !errors.Is(err, ErrNoChatTemplate) {
		return nil, err
	} else {
		fmt.Fprintf(stderr, "toy serve: the model has no chat template: /v1/chat/completions is refused (-template names one)\n")
	}
	nctx := f.Ctx
	if nctx == 0 {
		nctx = m.Arch.Context
	}
	fmt.Fprintf(stderr, "toy serve: %s\n", f.sizeSlots(nctx))
	if nctx/f.Parallel < 2 {
		return nil, Usagef("-c %d among -parallel %d leaves fewer than 2 positions a slot", nctx, f.Parallel)
	}
	dec, err := decoding.NewBatchDecoder(m, decoding.BatchDecoderOptions{Slots: f.Parallel, SlotContext: nctx / f.Parallel,
		KVType: opts.KVType, FlashAttention: opts.FlashAttention, Threads: f.Threads, Batch: opts.Batch})
	if err != nil {
		return nil, err
	}
	draft, specNote, err := f.openDraft(m, dec, opts)
	if err != nil {
		dec.Close()
		return nil, err
	}
	var df *speculative.DFlash
	switch {
	case f.DFlash && draft.dec != nil:
		fmt.Fprintf(stderr, "toy serve: -draft takes precedence over -dflash\n")
	case f.DFlash:
		dir := f.modelsDir
		if dir == "" {
			dir = filepath.Dir(f.Model)
		}
		if df, err = OpenDFlash(m, entry, named, dir); err != nil {
			dec.Close()
			return nil, err
		}
		if !SetFlags(f.fs)["draft-p-min"] {
			f.draftPMin = 0 // a DFlash block's probabilities run lower (speculative.DefaultMinProbability)
		}
		if !SetFlags(f.fs)["draft-n"] {
			f.draftN = df.Cfg.Gamma - 1
		}
		specNote = fmt.Sprintf(", speculative: dflash %s (%d tokens a step, p-min %g)", filepath.Base(entry.DFlash.DraftModel), min(f.draftN, df.Cfg.Gamma-1), f.draftPMin)
	}
	closeDFlash := func() {
		if df != nil {
			df.Close()
		}
	}
	srv, err := serve.New(serve.Config{Model: m, Decoder: dec, Tokenizer: tok, ModelName: f.modelName, AnyModelName: !f.strictModelName, AddBOS: beh.AddBOS,
		Template: tmpl, Stops: beh.Stops, Defaults: p, Queue: f.queue, NoPromptCache: !f.promptCache, APIKeys: f.APIKeys,
		LogRequests: f.LogRequests, Info: info, Log: stderr, Draft: draft.dec, DraftTokens: f.draftN, DraftMinProbability: f.draftPMin, DFlash: df})
	if err != nil {
		closeDFlash()
		draft.close()
		dec.Close()
		return nil, err
	}
	ok = true
	keys := ""
	if len(f.APIKeys) > 0 {
		keys = fmt.Sprintf(", the API asks for a key (%d)", len(f.APIKeys))
	}
	return &ServedModel{Server: srv,
		Ready: fmt.Sprintf("%s, %s, queue %d, prompt cache %v, sampling: %v%s%s", f.modelName, slotsOf(f.Parallel, nctx/f.Parallel), f.queue, f.promptCache, p, specNote, keys),
		Close: func() {
			srv.Close()
			closeDFlash()
			draft.close()
			dec.Close()
			m.Close()
		}}, nil
}

// servedDraft is -draft's model and its batched decoder (nil without -draft).
type servedDraft struct {
	m   *decoding.GGUFModel
	dec *decoding.BatchDecoder
}

func (d servedDraft) close() {
	if d.dec != nil {
		d.dec.Close()
		d.m.Close()
	}
}

// openDraft opens -draft on the target's backend (one thread pool for both), gated as the
// target is, with a batched decoder of the target decoder's slots and options; specNote is
// what the ready line says of it.
func (f *ServeFlags) openDraft(target *decoding.GGUFModel, dec *decoding.BatchDecoder, opts decoding.DecoderOptions) (d servedDraft, specNote string, err error) {
	if f.Draft == "" {
		return d, "", nil
	}
	path := f.Draft
	if path == "self" {
		path = f.Model
	}
	dm, err := decoding.OpenModel(path, decoding.ModelOptions{Backend: target.Backend(), Mmap: f.Mmap})
	if err != nil {
		return d, "", fmt.Errorf("-draft: %w", err)
	}
	if err := speculative.CheckVocab(target, dm); err != nil {
		dm.Close()
		return d, "", fmt.Errorf("-draft: %w", err)
	}
	if _, _, err := GateDecoders(io.Discard, "serve -draft", dm, path, "", opts, *f.allowUnresolved); err != nil {
		dm.Close()
		return d, "", fmt.Errorf("-draft: %w", err)
	}
	ddec, err := decoding.NewBatchDecoder(dm, decoding.BatchDecoderOptions{Slots: dec.Slots(), SlotContext: dec.SlotContext(),
		KVType: opts.KVType, FlashAttention: opts.FlashAttention, Threads: f.Threads, Batch: opts.Batch})
	if err != nil {
		dm.Close()
		return d, "", fmt.Errorf("-draft: %w", err)
	}
	return servedDraft{m: dm, dec: ddec}, fmt.Sprintf(", speculative: draft %s (%d tokens a step, p-min %g)", filepath.Base(path), f.draftN, f.draftPMin), nil
}

// The slots toy serve makes when -parallel is not given: as many as keep minSlotContext
// positions each, at most maxAutoSlots, at least one. Four slots of a 256-position model held
// 64 positions each, too few for a system message and a question.
const (
	minSlotContext = 512
	maxAutoSlots   = 4
)

// sizeSlots chooses the slots when -parallel is 0, from the total context nctx, and returns
// the line that says what each slot holds and how to change it.
func (f *ServeFlags) sizeSlots(nctx int) string {
	auto := f.Parallel == 0
	if auto {
		f.Parallel = max(1, min(maxAutoSlots, nctx/minSlotContext))
	}
	line := fmt.Sprintf("%s (a request's prompt and reply together)", slotsOf(f.Parallel, nctx/f.Parallel))
	switch {
	case auto:
		line += fmt.Sprintf(" (the context of %d shared among as many slots as keep %d positions each, at most %d; -np sets the slots, -c the context)", nctx, minSlotContext, maxAutoSlots)
	case nctx/f.Parallel < minSlotContext:
		line += fmt.Sprintf(" (-c %d shared among -np %d: few positions for a conversation; fewer slots or a larger -c give each more)", nctx, f.Parallel)
	default:
		line += fmt.Sprintf(" (-c %d shared among -np %d)", nctx, f.Parallel)
	}
	return line
}

// slotsOf says "n slots of c positions each", or "1 slot of c positions".
func slotsOf(n, c int) string {
	if n == 1 {
		return fmt.Sprintf("1 slot of %d positions", c)
	}
	return fmt.Sprintf("%d slots of %d positions each", n, c)
}

// DefaultModelID is the model's id in the API when -model-name gives none: for a run's
// checkpoint, runs/<id>/weights/model.gguf, the run's id (its directory's name), and for a
// step's, weights/step-<N>/model.gguf, "<id>-step-<N>"; for any other file its name without
// .gguf. toy's checkpoints are all called model.gguf, so the file's name told them apart from
// nothing.
func DefaultModelID(path string) string {
	name := filepath.Base(path)
	if ext := filepath.Ext(name); ext == ".gguf" {
		name = name[:len(name)-len(ext)]
	}
	abs, err := filepath.Abs(path)
	if err != nil || filepath.Base(abs) != "model.gguf" {
		return name
	}
	dir, step := filepath.Dir(abs), ""
	if n, ok := strings.CutPrefix(filepath.Base(dir), "step-"); ok {
		v, err := strconv.Atoi(n)
		if err != nil || v < 0 {
			return name
		}
		dir, step = filepath.Dir(dir), fmt.Sprintf("-step-%d", v)
	}
	if filepath.Base(dir) != runs.WeightsDir {
		return name
	}
	run := filepath.Dir(dir)
	if st, err := os.Stat(filepath.Join(run, runs.EventsFile)); err != nil || !st.Mode().IsRegular() {
		return name
	}
	return filepath.Base(run) + step
}
