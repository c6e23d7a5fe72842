package bench

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/speculative"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// runBenchModel is `toy bench model`: prompt processing and generation speed like
// llama-bench, of a GGUF file or of random weights in a preset's shape.
func runBenchModel(args []string, stdout, stderr io.Writer) error {
	defer cli.OneGoProc()() // as toy generate decodes
	fs := flag.NewFlagSet("bench model", flag.ContinueOnError)
	model := fs.String("m", "", "GGUF model file")
	pp := fs.Int("p", 128, "prompt tokens (processed as one batch)")
	tg := fs.Int("n", 32, "generated tokens (one at a time)")
	depth := fs.Int("d", 0, "tokens already in the cache before each test, as llama-bench's -d (pp and tg after a long context)")
	compute := config.DefaultCompute()
	compute.RegisterFlags(fs)
	threads := &compute.Threads
	reps := fs.Int("r", 5, "repetitions")
	kvType := fs.String("kv-type", "f16", "KV cache type: f16, q8_0 (needs -fa) or f32")
	fs.StringVar(kvType, "ctk", "f16", "alias of -kv-type (llama.cpp's name)")
	fa := fs.Bool("fa", false, "flash attention: the KV cache keeps values untransposed (-kv-type q8_0 needs it); ggml's fused kernel on a GPU, toy's own on the CPU")
	mmap := fs.Bool("mmap", false, "memory-map the model file instead of reading the weights into memory")
	random := fs.String("random", "", "instead of a file, bench random weights of a training preset's shape ("+strings.Join(config.LlamaPresetNames(), ", ")+"); -m is then empty")
	randomType := fs.String("random-type", "f16", "weight type of the -random model's matrices (f32, f16, bf16, q8_0, q4_0, q4_K, …)")
	draft := fs.String("draft", "", "also measure greedy speculative decoding with this draft GGUF (\"self\": the target's own file, every proposal accepted: the ceiling)")
	draftN := fs.Int("draft-n", speculative.DefaultDraftTokens, "tokens the draft proposes per verification step (with -draft)")
	promptFile := fs.String("prompt-file", "", "with -draft or -dflash: the prompt is the first -p tokens of this text file (default: -p random tokens)")
	dflashN := fs.Int("dflash-n", 0, "of each DFlash block, the proposals the target verifies (with -dflash; 0: all, the block size − 1)")
	pMins := fs.String("draft-p-min", "", "comma-separated minimum draft probabilities (with -draft or -dflash): a drafter stops proposing at a token it gives less; each value is measured as its own row (0: always γ; default 0.75 for -draft and 0 for -dflash, as toy generate)")
	allowUnresolved := cli.RegisterGate(fs)
	dflash := fs.String("dflash", "", "also measure greedy DFlash decoding with this drafter GGUF (made for -m by toy train -recipe dflash)")
	saveRandom := fs.String("save-random", "", "with -random: also keep the random model (with a synthetic tokenizer of its vocabulary) as this GGUF, so that llama.cpp can run the same file")
	draftLayers := fs.Int("draft-layers", 0, "with -random: also measure speculative decoding with a random draft of the preset's shape cut to this many layers (same vocabulary)")
	noDRAM := fs.Bool("no-dram", false, "do not measure the DRAM read bandwidth that generation's GB/s is a share of (before and after the tests, about half a second each)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: toy bench model -m MODEL [-p 128] [-n 32] [-d 0] [-t 2] [-draft DRAFT.gguf] [-dflash DRAFTER.gguf]\n       toy bench model -random smollm2-135m [-random-type f16] ...\n\nPrompt-processing and generation tokens/s, mean ± standard deviation, as llama-bench reports.\n\n%s\nFlags:\n", benchModelBandwidthHelp)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if err := cli.BenchModelCounts.Check(fs); err != nil {
		return err
	}
	if err := cli.UsableThreads(stderr, "bench model", threads); err != nil {
		return err
	}
	if *model == "" && *random == "" {
		return cli.Usagef("give -m MODEL or -random PRESET")
	}
	if *draftN < 1 {
		return cli.Usagef("-draft-n %d: want at least 1", *draftN)
	}
	if *depth < 0 || (*depth > 0 && (*draft != "" || *dflash != "")) {
		return cli.Usagef("-d %d: want a number of tokens, without -draft or -dflash", *depth)
	}
	if *dflashN < 0 {
		return cli.Usagef("-dflash-n %d: want at least 0", *dflashN)
	}
	if *draftLayers < 0 || (*draftLayers > 0 && (*random == "" || *draft != "")) {
		return cli.Usagef("-draft-layers %d: want a positive number of layers, with -random and without -draft", *draftLayers)
	}
	if *saveRandom != "" && *random == "" {
		return cli.Usagef("-save-random %s: give -random PRESET (the model to save)", *saveRandom)
	}
	if *random != "" {
		if *model != "" {
			return cli.Usagef("-m and -random exclude each other")
		}
		a, typ, err := randomShape(*random, *randomType)
		if err != nil {
			return err
		}
		if need := decoding.BenchPositions(*pp, *tg, *depth); need > a.Context {
			return cli.Usagef("-d %d with -p %d and -n %d: %d positions do not fit %s's context of %d", *depth, *pp, *tg, need, *random, a.Context)
		}
		dir, err := os.MkdirTemp("", "toy-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*model = filepath.Join(dir, *random+".gguf")
		if *saveRandom != "" {
			*model = *saveRandom
		}
		if err := writeRandom(*model, *random, *randomType, *saveRandom != "", stderr); err != nil {
			return err
		}
		if *saveRandom != "" {
			fmt.Fprintf(stderr, "toy bench: the random model is saved as %s (llama-bench -m %s runs the same weights)\n", *saveRandom, *saveRandom)
		}
		if *draftLayers > 0 {
			if *draftLayers > a.NLayers {
				return cli.Usagef("-draft-layers %d: %s has %d layers", *draftLayers, *random, a.NLayers)
			}
			a.NLayers = *draftLayers
			*draft = filepath.Join(dir, fmt.Sprintf("%s-%dl.gguf", *random, *draftLayers))
			fmt.Fprintf(stderr, "toy bench: writing a random %d-layer draft of %s's shape …\n", *draftLayers, *random)
			if err := transformer.WriteRandomGGUF(*draft, a, typ, 1); err != nil {
				return err
			}
		}
	}
	if *draft == "self" {
		*draft = *model
	}
	// The boot gate runs on each model the bench loads (the target, a draft), over the lookups
	// of toy's CPU operations its decoders make; the bench samples on the host.
	gate := func(m *decoding.GGUFModel, o decoding.DecoderOptions) error {
		_, _, err := cli.GateDecoders(stderr, "bench", m, m.Path(), "", o, *allowUnresolved)
		return err
	}
	d := cli.DecoderFlags{KVType: *kvType, FlashAttn: *fa, CtxFull: "error"}
	opts, err := d.Options()
	if err != nil {
		return err
	}
	if *draft != "" || *dflash != "" {
		draftMins, dflashMins := []float64{speculative.DefaultMinProbability}, []float64{0}
		if *pMins != "" {
			ps, err := parseProbabilities(*pMins)
			if err != nil {
				return cli.Usagef("-draft-p-min %q: %v", *pMins, err)
			}
			draftMins, dflashMins = ps, ps
		}
		var drafters []speculative.SpecDrafter
		var modes []string
		for i := range draftMins { // as many as dflashMins
			if *draft != "" {
				drafters, modes = append(drafters, speculative.SpecDrafter{Path: *draft, Gamma: *draftN, MinProbability: draftMins[i]}), append(modes, "speculative")
			}
			if *dflash != "" {
				drafters, modes = append(drafters, speculative.SpecDrafter{Path: *dflash, Gamma: *dflashN, DFlash: true, MinProbability: dflashMins[i]}), append(modes, "dflash")
			}
		}
		bo := decoding.BenchOptions{Decoder: opts, Reps: *reps, Mmap: *mmap, Gate: gate}
		if *promptFile != "" {
			if bo.Prompt, err = benchPrompt(*model, *promptFile, max(*pp, 1)); err != nil {
				return err
			}
		}
		fmt.Fprintf(stderr, "toy bench: greedy generation of %d tokens after %d: the target alone and %s, in turn …\n", *tg, *pp, strings.Join(modes, " and "))
		res, err := speculative.BenchSpeculative(*model, drafters, max(*pp, 1), max(*tg, 1), *threads, bo)
		if err != nil {
			return err
		}
		var rows []specRow
		for i, r := range res {
			rows = append(rows, specRow{modes[i], r})
		}
		writeSpecTable(stdout, rows)
		return nil
	}
	// The DRAM read bandwidth before the model is loaded and after it is closed (its memory free).
	before, measure := measureDRAM(stderr, *threads, !*noDRAM && *tg > 0, " before the tests")
	res, err := decoding.BenchStats(*model, *pp, *tg, *threads, decoding.BenchOptions{Decoder: opts, Reps: *reps, Mmap: *mmap, Depth: *depth, Gate: gate})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, res)
	reportGenBandwidth(stdout, stderr, res, before, measure)
	return nil
}

// benchPrompt is the first n tokens of the text file path under the model's tokenizer.
func benchPrompt(model, path string, n int) ([]int32, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-prompt-file: %w", err)
	}
	f, err := ggml.OpenGGUF(model)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(func(k string) (any, bool) { v, err := f.Value(k); return v, err == nil })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", model, err)
	}
	ids := tok.Encode(string(text), tokenizer.EncodeOptions{})
	if len(ids) == 0 {
		return nil, fmt.Errorf("-prompt-file %s: no tokens", path)
	}
	return ids[:min(n, len(ids))], nil
}

// parseProbabilities parses a comma-separated list of minimum draft probabilities
// (speculative.CheckMinProbability).
func parseProbabilities(list string) ([]float64, error) {
	var ps []float64
	for _, f := range strings.Split(list, ",") {
		p, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a probability in [0, 1)", f)
		}
		if err := speculative.CheckMinProbability(p); err != nil {
			return nil, fmt.Errorf("%q: %w", f, err)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// specRow is one speculative mode's bench.
type specRow struct {
	mode string
	r    speculative.SpecBenchResult
}

// writeSpecTable prints speculative benches as llama-bench-style rows: the target alone, then
// each mode (its speed-up over the target alone measured in the same run), and where the
// speculative time went per generated token (other: the loop outside the timed phases).
func writeSpecTable(w io.Writer, rows []specRow) {
	r0 := rows[0].r
	fmt.Fprintf(w, "target %s (%.1fM params), %d threads, greedy, prompt %d\n", filepath.Base(r0.Target), float64(r0.TargetParams)/1e6, r0.Threads, r0.PromptTokens)
	for _, row := range rows {
		fmt.Fprintf(w, "%s: %s (%.2fM params)\n", row.mode, filepath.Base(row.r.Draft), float64(row.r.DraftParams)/1e6)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode        | test  |   γ | p-min |             t/s | speedup | accepted/step | accept % | draft ms/t | verify ms/t | accept ms/t | rollback ms/t | other ms/t | identical |")
	fmt.Fprintln(w, "| ----------- | ----- | --: | ----: | --------------: | ------: | ------------: | -------: | ---------: | ----------: | ----------: | ------------: | ---------: | --------- |")
	test := fmt.Sprintf("tg%d", r0.GenTokens)
	fmt.Fprintf(w, "| target      | %-5s |   – |     – | %15s |    1.00 |             – |        – |          – |           – |           – |             – |          – | –         |\n", test, r0.Plain)
	for _, row := range rows {
		r, st := row.r, row.r.Stats
		per := func(d time.Duration) string {
			if st.Generated == 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f", d.Seconds()*1e3/float64(st.Generated))
		}
		fmt.Fprintf(w, "| %-11s | %-5s | %3d | %5.2f | %15s | %7.2f | %13.2f | %8.1f | %10s | %11s | %11s | %13s | %10s | %-9v |\n", row.mode, test, r.Gamma, r.MinProbability, r.Spec, r.Speedup(),
			st.MeanAccepted(), 100*st.AcceptRate(), per(st.DraftTime), per(st.VerifyTime), per(st.AcceptTime), per(st.RollbackTime), per(r.Other()), r.Identical)
	}
}
