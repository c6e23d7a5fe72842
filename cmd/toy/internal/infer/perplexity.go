package infer

import (
	"flag"
	"fmt"
	"io"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/tokenizer"
)

// RunPerplexity computes perplexity as llama.cpp's perplexity tool does (decoding.Perplexity): the
// text is split into non-overlapping chunks of the context size (each starting with BOS when the
// vocabulary adds one), and the second half of each chunk is scored.
func RunPerplexity(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("perplexity", flag.ContinueOnError)
	var d cli.DecoderFlags
	d.Register(fs)
	file := fs.String("f", "", "text file (required)")
	chunks := fs.Int("chunks", 0, "score at most this many chunks (0: all)")
	allowUnresolved := cli.RegisterGate(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: toy perplexity -m MODEL -f TEXT -c CTX [flags]\n\nPerplexity the way llama.cpp computes it: non-overlapping chunks of CTX tokens, the second half\nof each chunk scored.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if *file == "" {
		return cli.Usagef("-f TEXT is required")
	}
	text, err := cli.ReadTextFile(*file)
	if err != nil {
		return err
	}
	if *chunks < 0 {
		return cli.Usagef("-chunks %d is negative", *chunks)
	}
	if d.Ctx != 0 && d.Ctx < decoding.MinPerplexityContext {
		return cli.Usagef("-c %d: perplexity scores the second half of each chunk but its last token, so it needs a context of at least %d", d.Ctx, decoding.MinPerplexityContext)
	}
	d.AllowUnresolved = *allowUnresolved
	m, tok, dec, err := d.Open(stderr, "perplexity")
	if err != nil {
		return err
	}
	defer m.Close()
	defer dec.Close()
	// BOS as generate decides it (the file's add_bos_token first, then a table entry that names
	// the model), so that both see the text the same way.
	beh := cli.ModelBehaviour(m, tok, d.Entry, d.Named)
	nctx := dec.MaxContext()
	ids := tok.Encode(string(text), tokenizer.EncodeOptions{})
	bos := int32(-1)
	if beh.AddBOS {
		bos = tok.BOS()
		ids = append([]int32{bos}, ids...)
	}
	if beh.AddEOS { // the text ends with EOS, as llama.cpp tokenizes it
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
