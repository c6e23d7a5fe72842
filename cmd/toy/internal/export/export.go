package export

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/ggml"
)

// Run writes a GGUF model converted to a file type as llama-quantize converts it, with
// LoRA adapters merged into its weights first when it is given some.
func Run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	base := fs.String("m", "", "the GGUF model to convert (required)")
	var loras cli.StringList
	fs.Var(&loras, "lora", "a LoRA adapter GGUF to merge (repeatable)")
	scale := fs.Float64("lora-scale", 1, "scale of the adapters")
	out := fs.String("o", "", "the GGUF to write (required)")
	typName := fs.String("type", "F16", "the file type to write, as llama-quantize names it: "+strings.Join(decoding.FileTypeNames(), ", ")+" (any case; Q4_K is Q4_K_M)")
	pure := fs.Bool("pure", false, "store every converted tensor in the type's base type: no per-tensor mix, no fallbacks (llama-quantize --pure)")
	requantize := fs.Bool("allow-requantize", false, "convert tensors that are block-quantized already (quality suffers twice; llama-quantize --allow-requantize)")
	threads := fs.Int("t", runtime.NumCPU(), "threads that quantize")
	force := fs.Bool("force", false, "replace an existing model at -o")
	merge := fs.Bool("merge", true, "merge the adapters into the weights (the only export there is; -merge=false is refused)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: toy export -m MODEL.gguf -o OUT.gguf -type Q4_K_M
       toy export -m BASE.gguf -lora ADAPTER.gguf -o OUT.gguf [-type F16]

Converts a model to a file type as llama-quantize does, and writes a file llama.cpp runs:
every tensor llama-quantize converts (the weight matrices, the head, the token embeddings;
not the norms or biases) is stored in the type the file type chooses for it, the rest copied.

A plain type (F16, BF16, F32, Q8_0, Q4_0, Q5_0, ...) stores those tensors in it; a mix
(Q4_K_M, Q5_K_M, Q4_K_S, Q6_K, ...) gives some more bits, as llama-quantize does: the head
q6_K (q8_0 in Q8_0), attn_v and ffn_down q6_K on an eighth of the layers at either end and
every third between in the _M mixes, and so on. Rows that no 256-value super-block divides
(SmolLM2's 576) take llama-quantize's fallback: q4_K → q5_0, q5_K → q5_1, q6_K → q8_0. The
bytes are ggml's quantizers', the same as llama-quantize writes; general.file_type says the
file type. A tensor that is quantized already is converted only with -allow-requantize.

With -lora it merges LoRA adapters (toy finetune's, or llama.cpp's) first: each adapted
weight W becomes W + scale·(alpha/r)·B·A, computed in float64 from W's dequantized values,
and the whole model is then converted to -type (an adapted weight is re-encoded even where
its type stays). The result runs wherever the base ran, without the adapters.

The file is written atomically after one decoding step checks it; an existing file is
replaced only with -force.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		if _, ok := decoding.ParseFileType(fs.Arg(0)); ok {
			return cli.Usagef("unexpected argument %q: give the file type as -type %s (toy's commands take flags, and flags after an argument would be ignored)", fs.Arg(0), fs.Arg(0))
		}
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if *base == "" || *out == "" {
		return cli.Usagef("give the model (-m) and the output (-o)")
	}
	if !*merge {
		return cli.Usagef("-merge=false: toy export only writes merged models; to apply an adapter without merging it, give it to toy generate -lora")
	}
	ft, ok := decoding.ParseFileType(*typName)
	if !ok {
		for t := ggml.Type(0); t < 64; t++ {
			if ggml.ValidType(t) && strings.EqualFold(ggml.TypeName(t), *typName) {
				why := "it is not a type llama-quantize writes files of"
				if strings.HasPrefix(ggml.TypeName(t), "iq") {
					why = "the IQ1, IQ2 and IQ3_XXS mixes need an importance matrix, which toy does not compute"
				}
				return cli.Usagef("-type %q: toy export writes no %s files: %s; choose one of %s", *typName, ggml.TypeName(t), why, strings.Join(decoding.FileTypeNames(), ", "))
			}
		}
		return cli.Usagef("-type %q: not a ggml type nor a file type llama-quantize names; choose one of %s", *typName, strings.Join(decoding.FileTypeNames(), ", "))
	}
	if *threads < 1 {
		return cli.Usagef("-t %d: give at least one thread", *threads)
	}
	if err := cli.RegularInput(*base); err != nil {
		return err
	}
	if err := cli.CheckOutput(*out, cli.KindGGUFModel, *force, false); err != nil {
		return err
	}
	if len(loras) > 0 {
		if err := cli.CheckLoRAScale(*scale); err != nil {
			return err
		}
	}
	var ads []decoding.LoRA
	for _, p := range loras {
		ads = append(ads, decoding.LoRA{Path: p, Scale: float32(*scale)})
	}
	start, last := time.Now(), time.Now()
	rep, err := decoding.Export(*base, *out, decoding.ExportOptions{Adapters: ads, Type: ft, Pure: *pure, AllowRequantize: *requantize, Threads: *threads,
		Warn: func(w string) { fmt.Fprintf(stderr, "toy export: warning: %s\n", w) },
		Progress: func(done, total int, name string) {
			if now := time.Now(); now.Sub(last) >= 2*time.Second && done < total {
				fmt.Fprintf(stderr, "toy export: %d/%d tensors (%s), %.0f s\n", done, total, name, now.Sub(start).Seconds())
				last = now
			}
		}})
	if err != nil {
		return err
	}
	name := ft.String()
	if !ft.IsMix() {
		name = ggml.TypeName(ft.BaseType())
	}
	var types []string
	for _, t := range slices.Sorted(maps.Keys(rep.Types)) {
		types = append(types, fmt.Sprintf("%d %s", rep.Types[t], ggml.TypeName(t)))
	}
	summary := fmt.Sprintf("%d of %d tensors converted", rep.Converted, rep.Tensors)
	if len(types) > 0 {
		summary += ": " + strings.Join(types, ", ")
	}
	for _, t := range slices.Sorted(maps.Keys(rep.FellBack)) {
		summary += fmt.Sprintf("; %d fell back from %s (rows its blocks do not divide, as in llama-quantize)", rep.FellBack[t], ggml.TypeName(t))
	}
	fmt.Fprintf(stderr, "toy export: %s in %.1f s\n", summary, time.Since(start).Seconds())
	if len(ads) == 0 {
		fmt.Fprintf(stdout, "converted %s's weight matrices to %s in %s\n", *base, name, *out)
		return nil
	}
	fmt.Fprintf(stdout, "merged %d adapter(s) into %s (%s)\n", len(ads), *out, name)
	return nil
}
