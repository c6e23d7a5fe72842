package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toyml/toy/cuda"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/grammar"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/speculative"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// decoderFlags are the flags every command that runs a model shares.
type decoderFlags struct {
	model string
	// Compute is -t, from specs/engines.
	config.Compute
	ctx         int
	kvType      string
	flashAttn   bool
	ctxFull     string
	mmap        bool
	batchPrompt int
	loras       stringList
	loraScale   float64

	// The kernel gate's inputs, which a command sets before open (its -model-name and
	// --dangerously-allow-unresolved-kernel-lookups), and what it resolved: the table's entry
	// for the model (nil: none) and whether it names the model.
	modelName       string
	allowUnresolved bool
	entry           *kernels.Model
	named           bool
}

func (d *decoderFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.model, "m", "", "GGUF model file (required)")
	d.Compute = config.DefaultCompute()
	d.Compute.RegisterFlags(fs)
	fs.IntVar(&d.ctx, "c", 0, "context size: positions the KV cache holds (0: the model's)")
	fs.IntVar(&d.ctx, "ctx-size", 0, "alias of -c (llama.cpp's name)")
	fs.StringVar(&d.kvType, "kv-type", "f16", "KV cache type: f16, q8_0 (needs -fa) or f32")
	fs.StringVar(&d.kvType, "ctk", "f16", "alias of -kv-type (llama.cpp's name)")
	fs.BoolVar(&d.flashAttn, "fa", false, "flash attention: the KV cache keeps values untransposed (-kv-type q8_0 needs it); ggml's fused kernel on a GPU, toy's own on the CPU")
	fs.StringVar(&d.ctxFull, "ctx-full", "error", "when the context is full: error, or shift (keep the last half and go on)")
	fs.BoolVar(&d.mmap, "mmap", false, "memory-map the model file instead of reading the weights into memory (starts faster and shares the file's pages between processes; decodes slower, docs/PERFORMANCE.md)")
	fs.BoolFunc("no-mmap", "read the weights into memory: the default (llama.cpp's flag, accepted; -no-mmap=false is -mmap)", func(v string) error {
		no, err := strconv.ParseBool(v)
		d.mmap = !no
		return err
	})
	fs.IntVar(&d.batchPrompt, "b", 256, "prompt tokens per graph")
	fs.Var(&d.loras, "lora", "apply a LoRA adapter GGUF (llama.cpp's format; repeatable)")
	fs.Float64Var(&d.loraScale, "lora-scale", 1, "scale of the LoRA adapters")
}

func (d *decoderFlags) options() (decoding.DecoderOptions, error) {
	switch {
	case d.Threads < 0:
		return decoding.DecoderOptions{}, usagef("-t %d: want at least 1 thread (0: one per core)", d.Threads)
	case d.ctx < 0:
		return decoding.DecoderOptions{}, usagef("-c %d: want a number of positions (0: the model's context)", d.ctx)
	case d.batchPrompt < 0:
		return decoding.DecoderOptions{}, usagef("-b %d: want a number of prompt tokens per graph (0: the decoder's default)", d.batchPrompt)
	}
	o := decoding.DecoderOptions{MaxContext: d.ctx, FlashAttention: d.flashAttn, Threads: d.Threads, Batch: d.batchPrompt}
	switch d.kvType {
	case "f16":
		o.KVType = decoding.KVF16
	case "q8_0":
		o.KVType = decoding.KVQ8_0
	case "f32":
		o.KVType = decoding.KVF32
	default:
		return o, usagef("-kv-type %q: want f16, q8_0 or f32", d.kvType)
	}
	switch d.ctxFull {
	case "error":
		o.ContextFull = decoding.ContextError
	case "shift":
		o.ContextFull = decoding.ContextShift
	default:
		return o, usagef("-ctx-full %q: want error or shift", d.ctxFull)
	}
	return o, nil
}

// usableThreads refuses a negative -t and, on the CPU backend, sets *threads to the number the
// backend computes with (ggml.UsableThreads): -t 0 becomes one per core, and a -t above the
// cores this process may use is lowered to them, saying so once on stderr (ggml's threads spin
// at barriers, and more threads than cores stall each other).
func usableThreads(stderr io.Writer, cmd string, threads *int) error {
	if *threads < 0 {
		return usagef("-t %d: want at least 1 thread (0: one per core)", *threads)
	}
	if ggml.BackendKind != "cpu" {
		return nil
	}
	n, clamped := ggml.UsableThreads(*threads)
	if clamped {
		fmt.Fprintf(stderr, "toy %s: -t %d is more than the %d cores toy may use here; computing with %d threads\n", cmd, *threads, n, n)
	}
	*threads = n
	return nil
}

// open loads the model and its tokenizer, runs the kernel gate over what its decoders look up
// (gateDecoders: d.entry and d.named are set), and makes a decoder; cmd names the command in
// notes on stderr.
func (d *decoderFlags) open(stderr io.Writer, cmd string) (*decoding.GGUFModel, *tokenizer.Tokenizer, *decoding.Decoder, error) {
	opts, err := d.options()
	if err != nil {
		return nil, nil, nil, err
	}
	m, tok, err := d.openModel(stderr, cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	if d.entry, d.named, err = gateDecoders(stderr, cmd, m, d.model, d.modelName, opts, d.allowUnresolved); err != nil {
		m.Close()
		return nil, nil, nil, err
	}
	opts.Threads = d.Threads
	dec, err := decoding.NewDecoder(m, opts)
	if err != nil {
		m.Close()
		return nil, nil, nil, err
	}
	return m, tok, dec, nil
}

// openModel loads the model (with its LoRA adapters) and its tokenizer, the threads clamped
// to the usable cores.
func (d *decoderFlags) openModel(stderr io.Writer, cmd string) (*decoding.GGUFModel, *tokenizer.Tokenizer, error) {
	if d.model == "" {
		return nil, nil, usagef("-m MODEL is required")
	}
	if err := usableThreads(stderr, cmd, &d.Threads); err != nil {
		return nil, nil, err
	}
	var loras []decoding.LoRA
	if len(d.loras) > 0 {
		if err := checkLoRAScale(d.loraScale); err != nil {
			return nil, nil, err
		}
	}
	for _, p := range d.loras {
		loras = append(loras, decoding.LoRA{Path: p, Scale: float32(d.loraScale)})
	}
	m, err := decoding.OpenModel(d.model, decoding.ModelOptions{Threads: d.Threads, Mmap: d.mmap, LoRA: loras})
	if err != nil {
		return nil, nil, err
	}
	for _, w := range m.Warnings {
		fmt.Fprintf(stderr, "toy %s: warning: %s\n", cmd, w)
	}
	tok, err := tokenizer.FromGGUF(func(k string) (any, bool) { v, ok := m.Meta[k]; return v, ok })
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("%s: %w", d.model, err)
	}
	return m, tok, nil
}

// behaviour is how a model is prompted: whether BOS starts the text and EOS ends a plain
// prompt (not a chat template's rendering, which ends where the reply starts), its chat
// template (empty: none known) and the stop strings besides the template's.
type behaviour struct {
	addBOS, addEOS bool
	template       string
	stops          []string
}

// modelBehaviour decides BOS, EOS, chat template and stop strings. The file's own metadata wins
// (tokenizer.ggml.add_bos_token, add_eos_token, tokenizer.chat_template); the kernel table's entry fills only
// what the file lacks, and only when it names the model (kernelrt.NamedBy: a match name in the
// path, -model-name or general.name): an entry that resolved by architecture or hidden size
// alone imposes nothing. Where neither says, llama.cpp's defaults hold (the tokenizer's add_bos
// default for its pre-tokenizer; no template).
func modelBehaviour(m *decoding.GGUFModel, tok *tokenizer.Tokenizer, entry *kernels.Model, named bool) behaviour {
	b := behaviour{addBOS: tok.Vocab().AddBOS && tok.BOS() >= 0, addEOS: tok.Vocab().AddEOS && tok.EOS() >= 0}
	var eb *kernels.Behaviour
	if entry != nil && named {
		eb = entry.Behaviour
	}
	if eb == nil {
		return b
	}
	if _, inFile := m.Meta[tokenizer.KeyAddBOS]; !inFile {
		b.addBOS = eb.AddBOS && tok.BOS() >= 0
	}
	if _, inFile := m.Meta[tokenizer.KeyAddEOS]; !inFile {
		b.addEOS = eb.AddEOS && tok.EOS() >= 0
	}
	if jinja, _ := m.Meta["tokenizer.chat_template"].(string); jinja == "" {
		b.template = eb.ChatTemplate
	}
	b.stops = eb.Stop
	return b
}

// oneGoProc lowers GOMAXPROCS to 1 for a command whose work is ggml's decoding, and returns
// the function that restores it. ggml's own threads take every core while a step computes;
// with a second P, Go's scheduler wakes or keeps spinning another thread meanwhile, which takes
// a core from a ggml worker that its barrier then waits for. Measured idle on 2 cores
// (docs/PERFORMANCE.md): one-token steps of the SmolLM2-135M shape 1.6–10.7 % faster with one
// P, in each of four alternations, with a third of the spread. The Go work of these commands —
// tokenizing, sampling, writing text — runs on one goroutine anyway. toy serve runs with one P
// too: its handlers' work is small beside a step's, and one stream ran 4–45 % faster with one
// P in four alternations, 8 streams level.
func oneGoProc() (restore func()) {
	prev := runtime.GOMAXPROCS(1)
	return func() { runtime.GOMAXPROCS(prev) }
}

func runGenerate(args []string, stdout, stderr io.Writer) error {
	return generate("generate", args, stdout, stderr)
}

// runChat is toy chat: toy generate -cnv.
func runChat(args []string, stdout, stderr io.Writer) error {
	return generate("chat", append([]string{"-cnv"}, args...), stdout, stderr)
}

// generate is toy generate, and toy chat when name is "chat" (its flags and usage name it).
func generate(name string, args []string, stdout, stderr io.Writer) error {
	defer oneGoProc()()
	start := time.Now()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var d decoderFlags
	d.register(fs)
	p := sample.DefaultParams()
	prompt := fs.String("p", "", "prompt (-: read it from standard input)")
	promptFile := fs.String("f", "", "read the prompt from this file (one trailing newline dropped, as with -p -)")
	fs.StringVar(promptFile, "file", "", "alias of -f (llama.cpp's name)")
	n := fs.Int("n", 128, "tokens to generate (-1: until the context is full or the end of text); in a conversation, of each reply (default there: -1)")
	fs.IntVar(n, "n-predict", 128, "alias of -n (llama.cpp's name)")
	(*config.Sampling)(&p).RegisterFlags(fs)
	fs.Var(logitBiasFlag{&p.LogitBias}, "logit-bias", "add BIAS to token ID's logit before sampling, as ID+BIAS or ID-BIAS (llama.cpp's; -100 bans the token, +100 all but forces it; repeatable)")
	chat := fs.Bool("chat", false, "treat -p as a user message and apply the model's chat template")
	preset := registerPreset(fs)
	cnv := fs.Bool("cnv", false, "a conversation: after -p's or -f's message, if any, read messages from standard input, a line each (a line ending in \\ continues on the next), and answer each through the chat template, keeping the history; /exit or the end of input ends it, Ctrl-C stops a reply, Ctrl-C at the prompt ends it")
	fs.BoolVar(cnv, "conversation", false, "alias of -cnv (llama.cpp's name)")
	interactive := fs.Bool("i", false, "interactive: -cnv, or on a model without a chat template (and no -template) plain text: each line read is appended to the text, and the model continues it")
	fs.BoolVar(interactive, "interactive", false, "alias of -i (llama.cpp's name)")
	modelName := fs.String("model-name", "", "a name to match the model against the kernel table's entries (besides its path and general.name)")
	allowUnresolved := registerGate(fs)
	system := fs.String("system", "", "system message (with -chat or -cnv)")
	fs.StringVar(system, "sys", "", "alias of -system (llama.cpp's name)")
	fs.StringVar(system, "system-prompt", "", "alias of -system (llama.cpp's name)")
	templateName := fs.String("template", "", templateUsage("", "the file's"))
	var stops stringList
	fs.Var(&stops, "stop", "stop when this text is generated (repeatable)")
	var format formatFlags
	format.register(fs)
	draft := fs.String("draft", "", "draft model GGUF for speculative decoding (the same vocabulary as -m)")
	draftN := fs.Int("draft-n", speculative.DefaultDraftTokens, "tokens the draft proposes per verification step (with -draft)")
	pMin := fs.Float64("draft-p-min", 0, "with -draft or -dflash: the drafter stops proposing, each step, at a token it gives a probability below this (llama.cpp's --draft-p-min; 0: always -draft-n; default 0.75 with -draft, 0 with -dflash)")
	dflash := fs.Bool("dflash", false, "speculative decoding with the DFlash drafter the kernel table pairs with the model (its [dflash] draft_model); -draft takes precedence")
	modelsDir := fs.String("models-dir", "", "the directory a [dflash] draft_model path is relative to (default: the directory of -m)")
	fs.Usage = func() {
		if name == "chat" {
			fmt.Fprintf(fs.Output(), "usage: toy chat -m MODEL [-sys SYSTEM] [-p FIRST-MESSAGE] [flags]\n\ntoy chat is toy generate -cnv.\n\n")
		}
		fmt.Fprintf(fs.Output(), `usage: toy generate -m MODEL -p PROMPT [flags]
       toy generate -m MODEL -f PROMPT-FILE [flags]
       toy generate -m MODEL -p - [flags] < PROMPT-FILE
       toy generate -m MODEL -cnv [-sys SYSTEM] [flags]

Runs a GGUF model (llama/SmolLM2, qwen2, qwen3, gemma2, gemma3, MoE families) and streams its
continuation of the prompt, then a timing summary on stderr. --temp 0 is greedy. llama.cpp's
names (--ctx-size, --n-predict, --file, -sys, --system-prompt, -cnv, -i) are accepted beside
toy's. With -chat the prompt is a user message wrapped in the model's chat template: the
Jinja template the file carries (tokenizer.chat_template), or the built-in one -template names.

-cnv (toy chat) holds a conversation: each line read from standard input is a user message
(a line ending in \ goes on to the next), answered through the template with the history
kept; the cache keeps the earlier turns, so a turn computes only its new tokens. /exit or the
end of input ends it; Ctrl-C stops a reply, and at the prompt ends the conversation. -i is
-cnv, or on a model without a chat template plain text that each line continues.

-draft (a smaller model) and -dflash (the DFlash drafter the kernel table pairs with the model,
made by toy train -recipe dflash) decode speculatively: the same text greedy, the same
distribution sampling. -grammar / -grammar-file (GBNF, llama.cpp's format) and -json-schema /
-json-schema-file constrain the output: every token is one the grammar allows, and generation
stops where it is complete (docs/INFERENCE.md, "Structured output").

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if err := generateCounts.check(fs); err != nil {
		return err
	}
	if err := checkTemplateName(*templateName); err != nil {
		return err
	}
	if *n < -1 {
		return usagef("-n %d: want a number of tokens, or -1 for until the context is full or the end of text", *n)
	}
	set := setFlags(fs)
	conversing := *cnv || *interactive
	if conversing {
		switch {
		case *prompt == "-":
			return usagef("-p - reads the prompt from standard input, where a conversation's messages come from: give -p TEXT or -f FILE")
		case *draft != "" || *dflash:
			return usagef("a conversation (-cnv, -i) decodes without -draft or -dflash")
		}
		if !set["n"] && !set["n-predict"] {
			*n = -1 // a reply ends at the end of its turn, of the context, or at Ctrl-C
		}
	}
	text, err := promptText(*prompt, *promptFile, stdin)
	if err != nil {
		return err
	}
	*prompt = text
	if *draftN < 1 {
		return usagef("-draft-n %d: want at least 1 token per step", *draftN)
	}
	if err := speculative.CheckMinProbability(*pMin); err != nil {
		return usagef("-draft-p-min %v: %v", *pMin, err)
	}
	constraint, err := format.grammar()
	if err != nil {
		return err
	}
	if constraint != nil && (*draft != "" || *dflash) {
		return usagef("%s: constrained output cannot be combined with speculative decoding (-draft, -dflash)", format.flag)
	}
	if constraint != nil && conversing {
		return usagef("%s: constrained output is for one reply; a conversation (-cnv, -i, toy chat) takes none", format.flag)
	}
	d.modelName, d.allowUnresolved = *modelName, *allowUnresolved
	m, tok, dec, err := d.open(stderr, "generate")
	if err != nil {
		return err
	}
	defer m.Close()
	defer dec.Close()
	var draftDec *decoding.Decoder
	if *draft != "" {
		dm, ddec, err := openDraft(&d, m, dec, *draft)
		if err != nil {
			return err
		}
		defer dm.Close()
		defer ddec.Close()
		draftDec = ddec
	}
	// The compiled-in kernel table's entry for the model, when it names the model, supplies the
	// defaults the file lacks: the sampling preset "default" for every sampling flag not given,
	// stop strings, BOS and chat template.
	target, ref := buildTarget(), modelRef(m, d.model, *modelName)
	entry, named := d.entry, d.named
	if err := presetFor(&p, entry, named, *preset, set); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return asUsage(err)
	}
	for id := range p.LogitBias {
		if int(id) >= m.Arch.Vocab {
			return usagef("-logit-bias: token %d is past the model's vocabulary of %d", id, m.Arch.Vocab)
		}
	}
	var df *speculative.DFlash
	switch {
	case *dflash && draftDec != nil:
		fmt.Fprintf(stderr, "toy generate: -draft takes precedence over -dflash\n")
	case *dflash:
		dir := *modelsDir
		if dir == "" {
			dir = filepath.Dir(d.model)
		}
		if df, err = openDFlash(m, entry, named, dir); err != nil {
			return err
		}
		defer df.Close()
	}
	// The gate audits what this run dispatches: on a cuda target, sampling on the device when
	// the parameters allow it (speculative decoding and conversations sample on the host).
	var dispatch kernelrt.Dispatch
	if draftDec == nil && df == nil && !conversing && constraint == nil { // a grammar's mask is the host's
		dispatch = cuda.DeviceSampling(p)
	}
	if _, err := gate(target, entry, nil, dispatch, *allowUnresolved); err != nil {
		return err
	}
	beh := modelBehaviour(m, tok, entry, named)
	stops = append(stops, beh.stops...)
	if *templateName == "" {
		*templateName = beh.template
	}

	if conversing {
		return converse(stdout, stderr, dec, tok, conversationSetup{model: m, behaviour: beh, template: *templateName,
			plainIfNoTemplate: *interactive && !*cnv && !*chat, system: *system, prompt: *prompt,
			params: p, seedGiven: set["seed"] || set["s"], n: *n, stops: stops, start: start})
	}
	text, parseSpecial := *prompt, false
	if *chat {
		tmpl, err := chatTemplate(m, tok, *templateName, beh.addBOS)
		if err != nil {
			return fmt.Errorf("-chat: %w", err)
		}
		var msgs []sample.Message
		if *system != "" {
			msgs = append(msgs, sample.Message{Role: sample.RoleSystem, Content: *system})
		}
		msgs = append(msgs, sample.Message{Role: sample.RoleUser, Content: *prompt})
		if text, err = tmpl.Apply(msgs, true); err != nil {
			return err
		}
		parseSpecial = true
		stops = append(stops, tmpl.StopStrings()...)
	}
	ids := tok.Encode(text, tokenizer.EncodeOptions{ParseSpecial: parseSpecial})
	if beh.addBOS {
		ids = append([]int32{tok.BOS()}, ids...)
	}
	if beh.addEOS && !*chat { // as llama.cpp tokenizes a prompt for a vocabulary that adds EOS
		ids = append(ids, tok.EOS())
	}
	if len(ids) == 0 {
		return errors.New("the prompt encodes to no tokens (give -p or -f)")
	}
	if draftDec != nil || df != nil {
		minProb := *pMin
		if !set["draft-p-min"] && draftDec != nil {
			minProb = speculative.DefaultMinProbability
		}
		newSp := func(s *sample.Sampler) (sp *speculative.Speculative, err error) {
			if draftDec != nil {
				sp, err = speculative.NewSpeculative(dec, draftDec, *draftN, s)
			} else {
				sp, err = speculative.NewDFlashSpeculative(dec, df, 0, s)
			}
			if err == nil {
				err = sp.SetMinProbability(minProb)
			}
			return sp, err
		}
		return generateSpeculative(stdout, stderr, dec, newSp, p, set["seed"] || set["s"], ids, *prompt, *chat, *n, tok, stops, start)
	}
	drawSeed(&p, set["seed"] || set["s"], stderr)
	s := sample.NewSampler(p)
	var matcher *grammar.Matcher
	if constraint != nil {
		matcher = constraint.NewMatcher(grammar.VocabOf(tok))
		s.Constrain(matcher)
	}
	var onDevice *cuda.TokenSampler
	if target != nil && len(kernelrt.DispatchNeeds(target.Backend, dispatch)) > 0 {
		dev, ts, err := deviceSampler(stderr, ref, s, *allowUnresolved)
		if err != nil {
			return err
		}
		if dev != nil {
			defer dev.Close()
			onDevice = ts
			dec.SetDeviceLogits(true)
		}
	}
	timing := &genTiming{load: time.Since(start), promptTokens: len(ids)}
	t0 := time.Now()
	logits, err := dec.Prompt(ids)
	if err != nil {
		return err
	}
	timing.promptTime = time.Since(t0)
	out := bufio.NewWriter(stdout)
	if !*chat {
		fmt.Fprint(out, *prompt)
	}
	loop := &replyLoop{dec: dec, tok: tok, s: s, onDevice: onDevice, n: *n, stops: stops, timing: timing, matcher: matcher, constraint: format.flag}
	_, end, err := loop.reply(out, append([]int32(nil), ids...), logits)
	if err != nil {
		out.Flush()
		return err
	}
	fmt.Fprintln(out)
	out.Flush()
	switch end {
	case endContextFull:
		contextFullNote(stderr, dec)
	case endCut:
		fmt.Fprintf(stderr, "toy generate: -n %d tokens generated before the output was complete (%s): it is cut\n", *n, format.flag)
	}
	timing.report(stderr)
	return nil
}

// drawSeed gives p a random seed when it samples and no seed was given, and prints it on stderr
// so that the run can be repeated, as llama.cpp does.
func drawSeed(p *sample.Params, given bool, stderr io.Writer) {
	if given || p.Temperature <= 0 {
		return
	}
	p.Seed = rand.Uint64()
	fmt.Fprintf(stderr, "toy generate: seed %d (-seed %d repeats this generation)\n", p.Seed, p.Seed)
}

// stdin is where toy generate reads -p - and a conversation's messages: the process's standard
// input, a pipe in tests.
var stdin io.Reader = os.Stdin

// promptText is toy generate's prompt: -p's text, standard input's for -p -, or the file -f
// names, one trailing newline dropped from what was read (an editor or echo ends its text with
// one, as llama.cpp drops it from -f's).
func promptText(prompt, file string, in io.Reader) (string, error) {
	var b []byte
	var err error
	switch {
	case file != "" && prompt != "":
		return "", usagef("-p and -f both give the prompt: give one")
	case file != "":
		if b, err = readTextFile(file); err != nil {
			return "", fmt.Errorf("-f: %w", err)
		}
	case prompt == "-":
		if b, err = io.ReadAll(in); err != nil {
			return "", fmt.Errorf("-p -: reading standard input: %w", err)
		}
	default:
		return prompt, nil
	}
	if !utf8.Valid(b) {
		src := file
		if src == "" {
			src = "standard input"
		}
		return "", fmt.Errorf("the prompt in %s is not UTF-8 text", src)
	}
	t := string(b)
	if strings.HasSuffix(t, "\n") {
		t = strings.TrimSuffix(strings.TrimSuffix(t, "\n"), "\r")
	}
	return t, nil
}

// errNoChatTemplate: the model file has no tokenizer.chat_template and no template is named.
var errNoChatTemplate = errors.New("the model has no chat template (no tokenizer.chat_template, and no kernel-table entry names it); name one with -template")

// templateUsage is the help of a command's -template: the built-in chat templates' names
// (engines/sample's TemplateNames), what the template is used for (forWhat, e.g. " for .jsonl
// data") and whose tokenizer.chat_template it stands in for.
func templateUsage(forWhat, whose string) string {
	return fmt.Sprintf("a built-in chat template%s instead of the model's own: %s (default: %s tokenizer.chat_template, rendered as Jinja)",
		forWhat, strings.Join(sample.TemplateNames(), ", "), whose)
}

// checkTemplateName refuses a -template that names no built-in chat template (sample.TemplateByName,
// whose error lists them) before a command loads anything; "" (the model's own) passes.
func checkTemplateName(name string) error {
	if name == "" {
		return nil
	}
	if _, err := sample.TemplateByName(name); err != nil {
		return fmt.Errorf("-template: %w", err)
	}
	return nil
}

// chatTemplate picks the template named, or else the model's own tokenizer.chat_template
// rendered as Jinja (its bos_token and eos_token the tokenizer's, a leading bos_token dropped
// when addBOS puts the BOS token first). A file's template that does not compile is an error
// naming the file (its base name: serve's clients see render errors) and the template's line;
// no named template stands in for it.
func chatTemplate(m *decoding.GGUFModel, tok *tokenizer.Tokenizer, name string, addBOS bool) (sample.Template, error) {
	if name != "" {
		return sample.TemplateByName(name)
	}
	src, _ := m.Meta["tokenizer.chat_template"].(string)
	if src == "" {
		return sample.Template{}, errNoChatTemplate
	}
	return sample.NewJinjaTemplate(src, sample.JinjaOptions{Source: filepath.Base(m.Path()) + " (tokenizer.chat_template)",
		BOSToken: tok.Token(tok.BOS()), EOSToken: tok.Token(tok.EOS()), AddsBOS: addBOS})
}

// formatFlags are the flags that constrain generation to a grammar (llama.cpp's spellings):
// GBNF text or file, or a JSON Schema or its file. At most one may be given.
type formatFlags struct {
	gbnf, gbnfFile, schema, schemaFile string
	// flag is the one given, for messages ("" for none).
	flag string
}

func (f *formatFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.gbnf, "grammar", "", "constrain the output to this GBNF grammar (llama.cpp's format; its rule root is the whole output)")
	fs.StringVar(&f.gbnfFile, "grammar-file", "", "constrain the output to the GBNF grammar in this file")
	fs.StringVar(&f.schema, "json-schema", "", "constrain the output to JSON that validates against this JSON Schema (docs/INFERENCE.md lists the keywords supported)")
	fs.StringVar(&f.schema, "j", "", "alias of -json-schema (llama.cpp's name)")
	fs.StringVar(&f.schemaFile, "json-schema-file", "", "constrain the output to JSON that validates against the JSON Schema in this file")
}

// grammar compiles the grammar the flags name, nil for none.
func (f *formatFlags) grammar() (*grammar.Grammar, error) {
	var given []string
	for _, g := range []struct{ name, v string }{{"-grammar", f.gbnf}, {"-grammar-file", f.gbnfFile}, {"-json-schema", f.schema}, {"-json-schema-file", f.schemaFile}} {
		if g.v != "" {
			given = append(given, g.name)
		}
	}
	switch len(given) {
	case 0:
		return nil, nil
	case 1:
		f.flag = given[0]
	default:
		return nil, usagef("%s: give one of -grammar, -grammar-file, -json-schema and -json-schema-file", strings.Join(given, " and "))
	}
	text := f.gbnf + f.schema
	if file := f.gbnfFile + f.schemaFile; file != "" {
		b, err := readTextFile(file)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", f.flag, file, err)
		}
		text = string(b)
	}
	var g *grammar.Grammar
	var err error
	if f.gbnf != "" || f.gbnfFile != "" {
		g, err = grammar.Parse(text)
	} else {
		g, err = grammar.CompileJSONSchema([]byte(text))
	}
	if err != nil {
		if file := f.gbnfFile + f.schemaFile; file != "" {
			return nil, fmt.Errorf("%s %s: %w", f.flag, file, err)
		}
		return nil, usagef("%s: %v", f.flag, err)
	}
	return g, nil
}

type stringList []string

// logitBiasFlag is -logit-bias: ID+BIAS or ID-BIAS, added to the map it points to (made on the
// first use).
type logitBiasFlag struct{ m *map[int32]float64 }

func (f logitBiasFlag) String() string {
	if f.m == nil {
		return ""
	}
	var parts []string
	for id, b := range *f.m {
		parts = append(parts, fmt.Sprintf("%d%+g", id, b))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (f logitBiasFlag) Set(v string) error {
	i := strings.IndexAny(v, "+-")
	if i <= 0 {
		return fmt.Errorf("%q: want ID+BIAS or ID-BIAS (15043+1, 2-100)", v)
	}
	id, err := strconv.ParseInt(v[:i], 10, 32)
	if err != nil || id < 0 {
		return fmt.Errorf("%q: %q is not a token id", v, v[:i])
	}
	b, err := strconv.ParseFloat(v[i:], 64)
	if err != nil || !(math.Abs(b) <= sample.MaxLogitBias) {
		return fmt.Errorf("%q: want a bias in [-%d, %d]", v, sample.MaxLogitBias, sample.MaxLogitBias)
	}
	if *f.m == nil {
		*f.m = map[int32]float64{}
	}
	(*f.m)[int32(id)] = b
	return nil
}

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// runPerplexity computes perplexity as llama.cpp's perplexity tool does (decoding.Perplexity): the
// text is split into non-overlapping chunks of the context size (each starting with BOS when the
// vocabulary adds one), and the second half of each chunk is scored.
func runPerplexity(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("perplexity", flag.ContinueOnError)
	var d decoderFlags
	d.register(fs)
	file := fs.String("f", "", "text file (required)")
	chunks := fs.Int("chunks", 0, "score at most this many chunks (0: all)")
	allowUnresolved := registerGate(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: toy perplexity -m MODEL -f TEXT -c CTX [flags]\n\nPerplexity the way llama.cpp computes it: non-overlapping chunks of CTX tokens, the second half\nof each chunk scored.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if *file == "" {
		return usagef("-f TEXT is required")
	}
	text, err := readTextFile(*file)
	if err != nil {
		return err
	}
	if *chunks < 0 {
		return usagef("-chunks %d is negative", *chunks)
	}
	if d.ctx != 0 && d.ctx < decoding.MinPerplexityContext {
		return usagef("-c %d: perplexity scores the second half of each chunk but its last token, so it needs a context of at least %d", d.ctx, decoding.MinPerplexityContext)
	}
	d.allowUnresolved = *allowUnresolved
	m, tok, dec, err := d.open(stderr, "perplexity")
	if err != nil {
		return err
	}
	defer m.Close()
	defer dec.Close()
	// BOS as generate decides it (the file's add_bos_token first, then a table entry that names
	// the model), so that both see the text the same way.
	beh := modelBehaviour(m, tok, d.entry, d.named)
	nctx := dec.MaxContext()
	ids := tok.Encode(string(text), tokenizer.EncodeOptions{})
	bos := int32(-1)
	if beh.addBOS {
		bos = tok.BOS()
		ids = append([]int32{bos}, ids...)
	}
	if beh.addEOS { // the text ends with EOS, as llama.cpp tokenizes it
		ids = append(ids, tok.EOS())
	}
	if len(ids) < nctx {
		return fmt.Errorf("%s has %d tokens, fewer than one chunk of %d (lower -c)", *file, len(ids), nctx)
	}
	r, err := decoding.Perplexity(ids, decoding.PerplexityOptions{Context: nctx, BOS: bos, MaxChunks: *chunks,
		Progress: func(c int, ppl float64) { fmt.Fprintf(stdout, "[%d]%.4f,", c+1, ppl) }}, dec.Logits)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nFinal estimate: PPL = %.4f over %d chunks of %d tokens (%d scored)\n", r.PPL, r.Chunks, nctx, r.Scored)
	return nil
}

func runInspect(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	full := fs.Bool("full", false, "print arrays in full")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: toy inspect [-full] MODEL.gguf\n\nPrints a GGUF file's metadata and tensor table.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("name one GGUF file")
	}
	f, err := ggml.OpenGGUF(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(stdout, "%s: GGUF v%d, %d keys, %d tensors, alignment %d, data at %d\n", escapeText(f.Path()), f.Version(), len(f.Keys()), len(f.Tensors()), f.Alignment(), f.DataOffset())
	keys := f.Keys()
	for _, k := range keys {
		v, err := f.Value(k)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  %-48s %s\n", escapeText(k), showValue(v, *full))
	}
	ts := f.Tensors()
	byType := map[string]int64{}
	var total int64
	fmt.Fprintf(stdout, "\n  %-40s %-6s %-24s %12s %12s\n", "tensor", "type", "shape", "offset", "bytes")
	for _, t := range ts {
		fmt.Fprintf(stdout, "  %-40s %-6s %-24s %12d %12d\n", escapeText(t.Name), ggml.TypeName(t.Type), fmt.Sprint(t.Ne[:t.NDims]), t.Offset, t.Size)
		byType[ggml.TypeName(t.Type)] += t.Size
		total += t.Size
	}
	var types []string
	for t := range byType {
		types = append(types, t)
	}
	sort.Strings(types)
	fmt.Fprintf(stdout, "\n  %.1f MiB of tensor data:", float64(total)/(1<<20))
	for _, t := range types {
		fmt.Fprintf(stdout, " %s %.1f MiB", t, float64(byType[t])/(1<<20))
	}
	fmt.Fprintln(stdout)
	return nil
}

// showValue renders a metadata value on one line: strings quoted (strconv.Quote's escapes),
// long values cut at 160 characters unless full, and no control character of the file's
// reaching the terminal raw.
func showValue(v any, full bool) string {
	s := fmt.Sprint(v)
	switch x := v.(type) {
	case string:
		s = strconv.Quote(x)
	case []string:
		if len(x) > 8 && !full {
			return escapeText(fmt.Sprintf("[%d strings: %q ...]", len(x), x[:8]))
		}
		s = fmt.Sprintf("%q", x)
	}
	s = escapeText(s)
	if r := []rune(s); len(r) > 160 && !full {
		return string(r[:157]) + "..."
	}
	return s
}

// escapeText returns s with every rune that is not printable (strconv.IsPrint: control
// characters, invalid UTF-8, ...) written as its Go escape, so that text from a file cannot
// move the cursor, clear the screen or retitle the terminal.
func escapeText(s string) string {
	ok := true
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !strconv.IsPrint(r) || r == utf8.RuneError:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// applyPreset takes every sampling option the user did not set (by its flag or the flag's
// alias, as the Sampling spec's options table names them) from the entry's preset of that name
// (MODEL.toml's [sampling.NAME]; "default" unless -sampling-preset names another); an option
// the preset leaves out stays as it is. Two values a preset may hold are not applied: a
// repeat_penalty of 0 (no penalty: the sampler's off is 1) and a seed of 0 (none: one is drawn);
// a seed it does apply counts as given, as by -seed, so that none is drawn. A name the entry
// lacks is a usage error listing the entry's presets; the entry's "default" may be absent
// (toy's defaults hold).
func applyPreset(p *sample.Params, entry *kernels.Model, name string, set map[string]bool) error {
	var names []string
	for _, pr := range entry.Presets {
		names = append(names, pr.Name)
		if pr.Name != name {
			continue
		}
		o := withoutFlagsSet(pr.Sampling, set)
		if o.RepeatPenalty != nil && *o.RepeatPenalty == 0 {
			o.RepeatPenalty = nil
		}
		if o.Seed != nil && *o.Seed == 0 {
			o.Seed = nil
		}
		s := config.Sampling(*p)
		o.Apply(&s)
		*p = sample.Params(s)
		if o.Seed != nil {
			set["seed"] = true // a seed given, as by -seed: not drawn
		}
		return nil
	}
	if name == "default" {
		return nil
	}
	if len(names) == 0 {
		return usagef("-sampling-preset %s: the kernel table's entry %s declares no sampling presets", name, entry.Name)
	}
	return usagef("-sampling-preset %s: the kernel table's entry %s declares %s", name, entry.Name, strings.Join(names, ", "))
}

// withoutFlagsSet returns o without the options whose flag, or its alias, set names: for each
// option of the Sampling spec's table, the overlay's field of the same JSON key is cleared.
func withoutFlagsSet(o config.SamplingOverlay, set map[string]bool) config.SamplingOverlay {
	v := reflect.ValueOf(&o).Elem()
	for _, opt := range config.SamplingOptions() {
		if opt.Flag == "" || !set[opt.Flag] && (opt.Alias == "" || !set[opt.Alias]) {
			continue
		}
		for i := range v.NumField() {
			if key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); key == opt.JSON {
				v.Field(i).SetZero()
			}
		}
	}
	return o
}

// registerPreset adds -sampling-preset to a command's flags.
func registerPreset(fs *flag.FlagSet) *string {
	return fs.String("sampling-preset", "default", "the kernel table entry's sampling preset whose values every sampling flag not given takes (MODEL.toml's [sampling.NAME]: default, greedy, ...; toy kernels -m MODEL lists them); the entry must name the model for \"default\" to apply")
}

// presetFor applies -sampling-preset: the named preset of entry, which must name the model for
// the default preset (an entry that resolved by architecture or size alone imposes nothing);
// a preset asked for by name applies from whichever entry resolved.
func presetFor(p *sample.Params, entry *kernels.Model, named bool, name string, set map[string]bool) error {
	switch {
	case entry == nil && name != "default":
		return usagef("-sampling-preset %s: the kernel table has no entry for this model", name)
	case entry == nil, name == "default" && !named:
		return nil
	}
	return applyPreset(p, entry, name, set)
}

// checkLoRAScale refuses a -lora-scale the adapters cannot take: NaN, an infinity or a value
// beyond float32 (which becomes one) would make every adapted weight non-finite, and 0 would be
// read as no scale given (1).
func checkLoRAScale(s float64) error {
	switch {
	case math.IsNaN(s) || math.IsInf(s, 0) || math.Abs(s) > math.MaxFloat32:
		return usagef("-lora-scale %v: want a finite number within float32's range", s)
	case s == 0:
		return usagef("-lora-scale 0: an adapter at scale 0 changes nothing; leave out -lora instead")
	}
	return nil
}
