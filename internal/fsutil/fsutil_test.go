//go:build unix

package fsutil

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCreateTempFollowsUmask(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0o027)
	f, err := CreateTemp(dir, ".x.tmp-*")
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o640 {
		t.Errorf("mode %v, want 0640 (0666 less umask 027)", got)
	}
	if base := filepath.Base(f.Name()); !strings.HasPrefix(base, ".x.tmp-") {
		t.Errorf("name %q", base)
	}
	if _, err := CreateTemp(filepath.Join(dir, "missing"), "y*"); err == nil || !os.IsNotExist(err) {
		t.Errorf("missing dir: %v", err)
	}
}
