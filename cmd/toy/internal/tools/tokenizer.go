package tools

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/recipes"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/ggml"
)

// readTexts reads the files named (directories are walked), or the Go standard library's
// source when none is named, up to maxBytes (0: no limit).
func readTexts(paths []string, maxBytes int64) ([][]byte, error) {
	if len(paths) == 0 {
		root, err := data.GoRoot()
		if err != nil {
			return nil, err
		}
		train, held, err := data.GoSource(root, maxBytes)
		if err != nil {
			return nil, err
		}
		var out [][]byte
		for _, d := range append(train, held...) {
			out = append(out, d.Text)
		}
		return out, nil
	}
	var out [][]byte
	var total int64
	for _, p := range paths {
		left := int64(0)
		if maxBytes > 0 {
			if left = maxBytes - total; left <= 0 {
				break
			}
		}
		if st, err := os.Stat(p); err != nil {
			return nil, err
		} else if !st.IsDir() && !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file or a directory (a FIFO or device would block or never end)", p)
		}
		docs, err := data.ReadTexts(p, left)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			out = append(out, d.Text)
			total += int64(len(d.Text))
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no text to read")
	}
	return out, nil
}

// RunTokenizer is toy tokenizer train: a byte-level BPE tokenizer trained on text files into a
// GGUF file.
func RunTokenizer(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprintln(stderr, "usage: toy tokenizer train [flags] [text files or directories]")
		return flag.ErrHelp
	}
	if len(args) == 0 || args[0] != "train" {
		return cli.Usagef("usage: toy tokenizer train [flags] [text files or directories]")
	}
	fs := flag.NewFlagSet("tokenizer train", flag.ContinueOnError)
	vocab := fs.Int("vocab", 2048, "vocabulary size (special and byte tokens included)")
	out := fs.String("o", "tokenizer.gguf", "output GGUF file (tokenizer.ggml.* keys, as llama.cpp reads them)")
	force := fs.Bool("force", false, "replace -o when it exists (only ever a tokenizer GGUF)")
	maxBytes := fs.Int64("max-text-bytes", 6<<20, "read at most this much text (0: all)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: toy tokenizer train [flags] [text files or directories]

Trains a byte-level BPE tokenizer (GPT-2 pre-tokenization, <|endoftext|> as BOS/EOS) on the
text (default: the Go standard library's source) and writes it as GGUF tokenizer metadata.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args[1:], stderr); err != nil {
		return err
	}
	if *vocab <= 0 {
		return cli.Usagef("-vocab %d: want a positive vocabulary size", *vocab)
	}
	if *maxBytes < 0 {
		return cli.Usagef("-max-text-bytes %d is negative", *maxBytes)
	}
	if err := cli.CheckOutput(*out, cli.KindGGUFTokenizer, *force, false); err != nil {
		return err
	}
	texts, err := readTexts(fs.Args(), *maxBytes)
	if err != nil {
		return err
	}
	t0 := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tok, err := tokenizer.TrainContext(ctx, func(yield func([]byte) bool) {
		for _, t := range texts {
			if !yield(t) {
				return
			}
		}
	}, *vocab, tokenizer.TrainOptions{})
	if errors.Is(err, context.Canceled) {
		return &cli.InterruptedError{Err: fmt.Errorf("interrupted while training: nothing was written")}
	}
	if err != nil {
		return err
	}
	w, err := ggml.NewGGUFWriter()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Set("general.architecture", "toy.tokenizer"); err != nil {
		return err
	}
	for _, kv := range tok.GGUF() {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	if err := w.WriteFile(*out); err != nil {
		return err
	}
	if tok.VocabSize() < *vocab {
		fmt.Fprintf(stderr, "toy tokenizer train: the text yields only %d tokens of the %d asked for (no pair left to merge); more text gives more\n", tok.VocabSize(), *vocab)
	}
	fmt.Fprintf(stdout, "trained %d tokens on %d texts in %.1fs: %s\n", tok.VocabSize(), len(texts), time.Since(t0).Seconds(), *out)
	return nil
}

// RunTokenize is toy tokenize: text files turned into a token corpus for toy train -corpus.
func RunTokenize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	tokPath := fs.String("tokenizer", "", "GGUF file holding the tokenizer (a checkpoint or toy tokenizer train output)")
	out := fs.String("o", "corpus.tok", "output token corpus")
	force := fs.Bool("force", false, "replace -o when it exists (only ever a token corpus)")
	maxBytes := fs.Int64("max-text-bytes", 0, "read at most this much text (0: all)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: toy tokenize -tokenizer FILE [flags] [text files or directories]

Turns text (default: the Go standard library's source) into a token corpus for toy train
-corpus: a header (magic "TOYTOKS\n", version 2, token width, vocabulary size, count, and the
tokenizer's 32-byte fingerprint) and the ids, little-endian. Each text ends with the end-of-text
token. toy train -corpus refuses the corpus with another -tokenizer than the one that made it.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *tokPath == "" {
		return cli.Usagef("-tokenizer is required (make one with toy tokenizer train)")
	}
	if *maxBytes < 0 {
		return cli.Usagef("-max-text-bytes %d is negative", *maxBytes)
	}
	if err := cli.CheckOutput(*out, cli.KindCorpus, *force, false); err != nil {
		return err
	}
	tok, err := recipes.LoadTokenizer(*tokPath)
	if err != nil {
		return err
	}
	texts, err := readTexts(fs.Args(), *maxBytes)
	if err != nil {
		return err
	}
	width := 2
	if tok.VocabSize() > 1<<16 {
		width = 4
	}
	w, err := data.NewTokenizedWriter(*out, width, tok.VocabSize(), tok.Fingerprint())
	if err != nil {
		return err
	}
	for _, t := range texts {
		ids := tok.Encode(string(t), tokenizer.EncodeOptions{})
		if eos := tok.EOS(); eos >= 0 {
			ids = append(ids, eos)
		}
		if err := w.Write(ids); err != nil {
			w.Abort()
			return err
		}
	}
	n := w.Count()
	if err := w.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d tokens from %d texts: %s\n", n, len(texts), *out)
	return nil
}
