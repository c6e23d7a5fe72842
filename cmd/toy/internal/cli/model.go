package cli

import (
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/speculative"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
)

// DecoderFlags are the flags every command that runs a model shares.
type DecoderFlags struct {
	Model string
	// Compute is -t, from specs/engines.
	config.Compute
	Ctx         int
	KVType      string
	FlashAttn   bool
	CtxFull     string
	Mmap        bool
	batchPrompt int
	loras       StringList
	loraScale   float64

	// The kernel gate's inputs, which a command sets before open (its -model-name and
	// --dangerously-allow-unresolved-kernel-lookups), and what it resolved: the table's entry
	// for the model (nil: none) and whether it names the model.
	ModelName       string
	AllowUnresolved bool
	Entry           *kernels.Model
	Named           bool
}

// Register defines the decoder's flags on fs.
func (d *DecoderFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&d.Model, "m", "", "GGUF model file (required)")
	d.Compute = config.DefaultCompute()
	d.Compute.RegisterFlags(fs)
	fs.IntVar(&d.Ctx, "c", 0, "context size: positions the KV cache holds (0: the model's)")
	fs.IntVar(&d.Ctx, "ctx-size", 0, "alias of -c (llama.cpp's name)")
	fs.StringVar(&d.KVType, "kv-type", "f16", "KV cache type: f16, q8_0 (needs -fa) or f32")
	fs.StringVar(&d.KVType, "ctk", "f16", "alias of -kv-type (llama.cpp's name)")
	fs.BoolVar(&d.FlashAttn, "fa", false, "flash attention: the KV cache keeps values untransposed (-kv-type q8_0 needs it); ggml's fused kernel on a GPU, toy's own on the CPU")
	fs.StringVar(&d.CtxFull, "ctx-full", "error", "when the context is full: error, or shift (keep the last half and go on)")
	fs.BoolVar(&d.Mmap, "mmap", false, "memory-map the model file instead of reading the weights into memory (starts faster and shares the file's pages between processes; decodes slower, docs/PERFORMANCE.md); the k-quant matrices toy's kernel repacks are mapped and released either way")
	fs.BoolFunc("no-mmap", "read the weights into memory: the default (llama.cpp's flag, accepted; -no-mmap=false is -mmap)", func(v string) error {
		no, err := strconv.ParseBool(v)
		d.Mmap = !no
		return err
	})
	fs.IntVar(&d.batchPrompt, "b", 256, "prompt tokens per graph")
	fs.Var(&d.loras, "lora", "apply a LoRA adapter GGUF (llama.cpp's format; repeatable)")
	fs.Float64Var(&d.loraScale, "lora-scale", 1, "scale of the LoRA adapters")
}

// Options are the decoder options the flags give; a bad value is a usage error.
func (d *DecoderFlags) Options() (decoding.DecoderOptions, error) {
	switch {
	case d.Threads < 0:
		return decoding.DecoderOptions{}, Usagef("-t %d: want at least 1 thread (0: one per core)", d.Threads)
	case d.Ctx < 0:
		return decoding.DecoderOptions{}, Usagef("-c %d: want a number of positions (0: the model's context)", d.Ctx)
	case d.batchPrompt < 0:
		return decoding.DecoderOptions{}, Usagef("-b %d: want a number of prompt tokens per graph (0: the decoder's default)", d.batchPrompt)
	}
	o := decoding.DecoderOptions{MaxContext: d.Ctx, FlashAttention: d.FlashAttn, Threads: d.Threads, Batch: d.batchPrompt}
	switch d.KVType {
	case "f16":
		o.KVType = decoding.KVF16
	case "q8_0":
		o.KVType = decoding.KVQ8_0
	case "f32":
		o.KVType = decoding.KVF32
	default:
		return o, Usagef("-kv-type %q: want f16, q8_0 or f32", d.KVType)
	}
	switch d.CtxFull {
	case "error":
		o.ContextFull = decoding.ContextError
	case "shift":
		o.ContextFull = decoding.ContextShift
	default:
		return o, Usagef("-ctx-full %q: want error or shift", d.CtxFull)
	}
	return o, nil
}

// UsableThreads refuses a negative -t and, on the CPU backend, sets *threads to the number the
// backend computes with (ggml.UsableThreads): -t 0 becomes one per core, and a -t above the
// cores this process may use is lowered to them, saying so once on stderr (ggml's threads spin
// at barriers, and more threads than cores stall each other).
func UsableThreads(stderr io.Writer, cmd string, threads *int) error {
	if *threads < 0 {
		return Usagef("-t %d: want at least 1 thread (0: one per core)", *threads)
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

// Open loads the model and its tokenizer, runs the kernel gate over what its decoders look up
// (GateDecoders: d.entry and d.named are set), and makes a decoder; cmd names the command in
// notes on stderr.
func (d *DecoderFlags) Open(stderr io.Writer, cmd string) (*decoding.GGUFModel, *tokenizer.Tokenizer, *decoding.Decoder, error) {
	opts, err := d.Options()
	if err != nil {
		return nil, nil, nil, err
	}
	m, tok, err := d.openModel(stderr, cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	if d.Entry, d.Named, err = GateDecoders(stderr, cmd, m, d.Model, d.ModelName, opts, d.AllowUnresolved); err != nil {
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
func (d *DecoderFlags) openModel(stderr io.Writer, cmd string) (*decoding.GGUFModel, *tokenizer.Tokenizer, error) {
	if d.Model == "" {
		return nil, nil, Usagef("-m MODEL is required")
	}
	if err := UsableThreads(stderr, cmd, &d.Threads); err != nil {
		return nil, nil, err
	}
	var loras []decoding.LoRA
	if len(d.loras) > 0 {
		if err := CheckLoRAScale(d.loraScale); err != nil {
			return nil, nil, err
		}
	}
	for _, p := range d.loras {
		loras = append(loras, decoding.LoRA{Path: p, Scale: float32(d.loraScale)})
	}
	m, err := decoding.OpenModel(d.Model, decoding.ModelOptions{Threads: d.Threads, Mmap: d.Mmap, LoRA: loras})
	if err != nil {
		return nil, nil, err
	}
	for _, w := range m.Warnings {
		fmt.Fprintf(stderr, "toy %s: warning: %s\n", cmd, w)
	}
	tok, err := tokenizer.FromGGUF(func(k string) (any, bool) { v, ok := m.Meta[k]; return v, ok })
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("%s: %w", d.Model, err)
	}
	return m, tok, nil
}

// Behaviour is how a model is prompted: whether BOS starts the text and EOS ends a plain
// prompt (not a chat template's rendering, which ends where the reply starts), its chat
// template (empty: none known) and the stop strings besides the template's.
type Behaviour struct {
	AddBOS, AddEOS bool
	Template       string
	Stops          []string
}

// ModelBehaviour decides BOS, EOS, chat template and stop strings. The file's own metadata wins
// (tokenizer.ggml.add_bos_token, add_eos_token, tokenizer.chat_template); the kernel table's entry fills only
// what the file lacks, and only when it names the model (kernelrt.NamedBy: a match name in the
// path, -model-name or general.name): an entry that resolved by architecture or hidden size
// alone imposes nothing. Where neither says, llama.cpp's defaults hold (the tokenizer's add_bos
// default for its pre-tokenizer; no template).
func ModelBehaviour(m *decoding.GGUFModel, tok *tokenizer.Tokenizer, entry *kernels.Model, named bool) Behaviour {
	b := Behaviour{AddBOS: tok.Vocab().AddBOS && tok.BOS() >= 0, AddEOS: tok.Vocab().AddEOS && tok.EOS() >= 0}
	var eb *kernels.Behaviour
	if entry != nil && named {
		eb = entry.Behaviour
	}
	if eb == nil {
		return b
	}
	if _, inFile := m.Meta[tokenizer.KeyAddBOS]; !inFile {
		b.AddBOS = eb.AddBOS && tok.BOS() >= 0
	}
	if _, inFile := m.Meta[tokenizer.KeyAddEOS]; !inFile {
		b.AddEOS = eb.AddEOS && tok.EOS() >= 0
	}
	if jinja, _ := m.Meta["tokenizer.chat_template"].(string); jinja == "" {
		b.Template = eb.ChatTemplate
	}
	b.Stops = eb.Stop
	return b
}

// OneGoProc lowers GOMAXPROCS to 1 for a command whose work is ggml's decoding, and returns
// the function that restores it. ggml's own threads take every core while a step computes;
// with a second P, Go's scheduler wakes or keeps spinning another thread meanwhile, which takes
// a core from a ggml worker that its barrier then waits for. Measured idle on 2 cores
// (docs/PERFORMANCE.md): one-token steps of the SmolLM2-135M shape 1.6–10.7 % faster with one
// P, in each of four alternations, with a third of the spread. The Go work of these commands —
// tokenizing, sampling, writing text — runs on one goroutine anyway. toy serve runs with one P
// too: its handlers' work is small beside a step's, and one stream ran 4–45 % faster with one
// P in four alternations, 8 streams level.
func OneGoProc() (restore func()) {
	prev := runtime.GOMAXPROCS(1)
	return func() { runtime.GOMAXPROCS(prev) }
}

// CheckLoRAScale refuses a -lora-scale the adapters cannot take: NaN, an infinity or a value
// beyond float32 (which becomes one) would make every adapted weight non-finite, and 0 would be
// read as no scale given (1).
func CheckLoRAScale(s float64) error {
	switch {
	case math.IsNaN(s) || math.IsInf(s, 0) || math.Abs(s) > math.MaxFloat32:
		return Usagef("-lora-scale %v: want a finite number within float32's range", s)
	case s == 0:
		return Usagef("-lora-scale 0: an adapter at scale 0 changes nothing; leave out -lora instead")
	}
	return nil
}

// OpenDFlash opens the drafter the kernel table's entry pairs with the model (its [dflash]
// draft_model, relative to modelsDir unless absolute) and checks that the file's pairing is
// the declared one.
func OpenDFlash(m *decoding.GGUFModel, entry *kernels.Model, named bool, modelsDir string) (*speculative.DFlash, error) {
	if entry == nil || !named || entry.DFlash == nil {
		name := "no entry"
		if entry != nil {
			name = "entry " + entry.Name
		}
		return nil, fmt.Errorf("-dflash: the kernel table pairs no DFlash drafter with %s (%s; a MODEL.toml [dflash] section names one, for a model its match names name); -draft names a draft model", m.Path(), name)
	}
	decl := entry.DFlash
	path := decl.DraftModel
	if !filepath.IsAbs(path) {
		path = filepath.Join(modelsDir, path)
	}
	df, err := speculative.OpenDFlash(path, m)
	if err != nil {
		return nil, fmt.Errorf("-dflash (the drafter entry %s pairs with the model): %w", entry.Name, err)
	}
	c := df.Cfg
	want := speculative.DFlashConfig{Gamma: decl.Gamma, Window: decl.WindowSize, MaskToken: decl.MaskTokenID, TargetLayers: decl.TargetLayerIDs, Layers: c.Layers}
	if c.Gamma != want.Gamma || c.Window != want.Window || c.MaskToken != want.MaskToken || len(decl.TargetLayerIDs) > 0 && fmt.Sprint(c.TargetLayers) != fmt.Sprint(want.TargetLayers) {
		df.Close()
		return nil, fmt.Errorf("-dflash: %s was trained with block %d, window %d, mask token %d, target layers %v; entry %s declares %d, %d, %d, %v",
			path, c.Gamma, c.Window, c.MaskToken, c.TargetLayers, entry.Name, want.Gamma, want.Window, want.MaskToken, want.TargetLayers)
	}
	return df, nil
}
