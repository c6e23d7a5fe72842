// Package fsutil holds the file-system helpers toy's atomic writers share.
package fsutil

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CreateTemp is os.CreateTemp with the mode of an ordinary new file: 0666 less the process's
// umask (os.CreateTemp makes 0600), so a file written through it and renamed into place gets
// the permissions `touch` or a shell redirection would give it. pattern's last "*" is replaced
// by a random string (appended when it has none).
func CreateTemp(dir, pattern string) (*os.File, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	prefix, suffix := pattern, ""
	if i := strings.LastIndex(pattern, "*"); i >= 0 {
		prefix, suffix = pattern[:i], pattern[i+1:]
	}
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) && try < 10000 {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, prefix+"*"+suffix), Err: errors.Unwrap(err)}
		}
		return f, nil
	}
}
