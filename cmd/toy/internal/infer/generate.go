package infer

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/cuda"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/grammar"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/speculative"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/kernelrt"
)

// RunGenerate is toy generate: a GGUF model run on a prompt, its text streamed to stdout.
func RunGenerate(args []string, stdout, stderr io.Writer) error {
	return generate("generate", args, stdout, stderr)
}

// RunChat is toy chat: toy generate -cnv.
func RunChat(args []string, stdout, stderr io.Writer) error {
	return generate("chat", append([]string{"-cnv"}, args...), stdout, stderr)
}

// generate is toy generate, and toy chat when name is "chat" (its flags and usage name it).
func generate(name string, args []string, stdout, stderr io.Writer) error {
	defer cli.OneGoProc()()
	start := time.Now()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var d cli.DecoderFlags
	d.Register(fs)
	p := sample.DefaultParams()
	prompt := fs.String("p", "", "prompt (-: read it from standard input)")
	promptFile := fs.String("f", "", "read the prompt from this file (one trailing newline dropped, as with -p -)")
	fs.StringVar(promptFile, "file", "", "alias of -f (llama.cpp's name)")
	n := fs.Int("n", 128, "tokens to generate (-1: until the context is full or the end of text); in a conversation, of each reply (default there: -1)")
	fs.IntVar(n, "n-predict", 128, "alias of -n (llama.cpp's name)")
	(*config.Sampling)(&p).RegisterFlags(fs)
	fs.Var(logitBiasFlag{&p.LogitBias}, "logit-bias", "add BIAS to token ID's logit before sampling, as ID+BIAS or ID-BIAS (llama.cpp's; -100 bans the token, +100 all but forces it; repeatable)")
	chat := fs.Bool("chat", false, "treat -p as a user message and apply the model's chat template")
	preset := cli.RegisterPreset(fs)
	cnv := fs.Bool("cnv", false, "a conversation: after -p's or -f's message, if any, read messages from standard input, a line each (a line ending in \\ continues on the next), and answer each through the chat template, keeping the history; /exit or the end of input ends it, Ctrl-C stops a reply, Ctrl-C at the prompt ends it")
	fs.BoolVar(cnv, "conversation", false, "alias of -cnv (llama.cpp's name)")
	interactive := fs.Bool("i", false, "interactive: -cnv, or on a model without a chat template (and no -template) plain text: each line read is appended to the text, and the model continues it")
	fs.BoolVar(interactive, "interactive", false, "alias of -i (llama.cpp's name)")
	modelName := fs.String("model-name", "", "a name to match the model against the kernel table's entries (besides its path and general.name)")
	allowUnresolved := cli.RegisterGate(fs)
	system := fs.String("system", "", "system message (with -chat or -cnv)")
	fs.StringVar(system, "sys", "", "alias of -system (llama.cpp's name)")
	fs.StringVar(system, "system-prompt", "", "alias of -system (llama.cpp's name)")
	templateName := fs.String("template", "", cli.TemplateUsage("", "the file's"))
	var stops cli.StringList
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
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if err := cli.GenerateCounts.Check(fs); err != nil {
		return err
	}
	if err := cli.CheckTemplateName(*templateName); err != nil {
		return err
	}
	if *n < -1 {
		return cli.Usagef("-n %d: want a number of tokens, or -1 for until the context is full or the end of text", *n)
	}
	set := cli.SetFlags(fs)
	conversing := *cnv || *interactive
	if conversing {
		switch {
		case *prompt == "-":
			return cli.Usagef("-p - reads the prompt from standard input, where a conversation's messages come from: give -p TEXT or -f FILE")
		case *draft != "" || *dflash:
			return cli.Usagef("a conversation (-cnv, -i) decodes without -draft or -dflash")
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
		return cli.Usagef("-draft-n %d: want at least 1 token per step", *draftN)
	}
	if err := speculative.CheckMinProbability(*pMin); err != nil {
		return cli.Usagef("-draft-p-min %v: %v", *pMin, err)
	}
	constraint, err := format.grammar()
	if err != nil {
		return err
	}
	if constraint != nil && (*draft != "" || *dflash) {
		return cli.Usagef("%s: constrained output cannot be combined with speculative decoding (-draft, -dflash)", format.flag)
	}
	if constraint != nil && conversing {
		return cli.Usagef("%s: constrained output is for one reply; a conversation (-cnv, -i, toy chat) takes none", format.flag)
	}
	d.ModelName, d.AllowUnresolved = *modelName, *allowUnresolved
	m, tok, dec, err := d.Open(stderr, "generate")
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
	target, ref := cli.BuildTarget(), cli.ModelRef(m, d.Model, *modelName)
	entry, named := d.Entry, d.Named
	if err := cli.PresetFor(&p, entry, named, *preset, set); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return cli.AsUsage(err)
	}
	for id := range p.LogitBias {
		if int(id) >= m.Arch.Vocab {
			return cli.Usagef("-logit-bias: token %d is past the model's vocabulary of %d", id, m.Arch.Vocab)
		}
	}
	var df *speculative.DFlash
	switch {
	case *dflash && draftDec != nil:
		fmt.Fprintf(stderr, "toy generate: -draft takes precedence over -dflash\n")
	case *dflash:
		dir := *modelsDir
		if dir == "" {
			dir = filepath.Dir(d.Model)
		}
		if df, err = cli.OpenDFlash(m, entry, named, dir); err != nil {
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
	if _, err := cli.Gate(target, entry, nil, dispatch, *allowUnresolved); err != nil {
		return err
	}
	beh := cli.ModelBehaviour(m, tok, entry, named)
	stops = append(stops, beh.Stops...)
	if *templateName == "" {
		*templateName = beh.Template
	}

	if conversing {
		return converse(stdout, stderr, dec, tok, conversationSetup{model: m, behaviour: beh, template: *templateName,
			plainIfNoTemplate: *interactive && !*cnv && !*chat, system: *system, prompt: *prompt,
			params: p, seedGiven: set["seed"] || set["s"], n: *n, stops: stops, start: start})
	}
	text, parseSpecial := *prompt, false
	if *chat {
		tmpl, err := cli.ChatTemplate(m, tok, *templateName, beh.AddBOS)
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
	if beh.AddBOS {
		ids = append([]int32{tok.BOS()}, ids...)
	}
	if beh.AddEOS && !*chat { // as llama.cpp tokenizes a prompt for a vocabulary that adds EOS
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
		dev, ts, err := cli.DeviceSampler(stderr, ref, s, *allowUnresolved)
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

// promptText is toy generate's prompt: -p's text, standard input's for -p -, or the file -f
// names, one trailing newline dropped from what was read (an editor or echo ends its text with
// one, as llama.cpp drops it from -f's).
func promptText(prompt, file string, in io.Reader) (string, error) {
	var b []byte
	var err error
	switch {
	case file != "" && prompt != "":
		return "", cli.Usagef("-p and -f both give the prompt: give one")
	case file != "":
		if b, err = cli.ReadTextFile(file); err != nil {
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
		return nil, cli.Usagef("%s: give one of -grammar, -grammar-file, -json-schema and -json-schema-file", strings.Join(given, " and "))
	}
	text := f.gbnf + f.schema
	if file := f.gbnfFile + f.schemaFile; file != "" {
		b, err := cli.ReadTextFile(file)
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
		return nil, cli.Usagef("%s: %v", f.flag, err)
	}
	return g, nil
}

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
