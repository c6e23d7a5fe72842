package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/ggml"
)

// The kinds of file toy writes, as fileKind names them.
const (
	KindGGUFModel     = "GGUF model"
	KindGGUFTokenizer = "GGUF tokenizer"
	kindGGUFOther     = "GGUF file toy cannot read"
	KindPNG           = "PNG image"
	KindCorpus        = "token corpus"
	kindEmpty         = "empty file"
	kindOther         = "file of another kind"
)

// fileKind says what the regular file at path holds, from its first bytes (and, for GGUF, its
// general.architecture: toy tokenizer train writes "toy.tokenizer" and no tensors).
func fileKind(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	head := make([]byte, 8)
	n, err := io.ReadFull(f, head)
	f.Close()
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	head = head[:n]
	switch {
	case n == 0:
		return kindEmpty, nil
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return KindPNG, nil
	case bytes.HasPrefix(head, []byte(data.Magic)):
		return KindCorpus, nil
	case bytes.HasPrefix(head, []byte("GGUF")):
		g, err := ggml.OpenGGUF(path)
		if err != nil {
			return kindGGUFOther, nil
		}
		defer g.Close()
		if arch, _ := g.String("general.architecture"); arch == "toy.tokenizer" && len(g.Tensors()) == 0 {
			return KindGGUFTokenizer, nil
		}
		return KindGGUFModel, nil
	}
	return kindOther, nil
}

// CheckOutput decides whether toy may write a file of kind want at path (atomically: a
// temporary file renamed over it). A path that does not exist is fine. An existing file is
// replaced only with -force (force), and only when it holds the same kind of thing (or
// nothing): a PNG or a corpus is never written over a model, a tokenizer never over a
// checkpoint, even with -force. A directory, a FIFO, a device or a symbolic link is never
// replaced. replaceSame lets a command replace its own default output of the same kind without
// -force (plot's <run>/loss.png).
func CheckOutput(path, want string, force, replaceSame bool) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case st.IsDir():
		return fmt.Errorf("%s is a directory; name a file to write the %s to", path, want)
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link; toy does not replace one (name the file it points to, or remove it)", path)
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (%v); toy writes its %s only to a regular file", path, st.Mode().Type(), want)
	}
	kind, err := fileKind(path)
	if err != nil {
		return err
	}
	if kind != want && kind != kindEmpty {
		return fmt.Errorf("%s exists and is a %s: toy does not replace it with a %s, even with -force (remove it, or choose another output)", path, kind, want)
	}
	if force || replaceSame && kind == want {
		return nil
	}
	return fmt.Errorf("%s exists (a %s); -force replaces it", path, kind)
}

// ReadTextFile reads a regular file whole; a directory, FIFO or device is an error rather than
// a read that blocks or fails obscurely.
func ReadTextFile(path string) ([]byte, error) {
	if err := RegularInput(path); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// RegularInput checks that path names a regular file (following links).
func RegularInput(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		what := "not a regular file"
		if st.IsDir() {
			what = "a directory"
		}
		return fmt.Errorf("%s is %s (want a text file)", path, what)
	}
	return nil
}
