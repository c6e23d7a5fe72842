//go:build unix

package runs

import (
	"errors"
	"os"
	"syscall"
)

// flockExclusive takes an exclusive flock(2) on f without waiting; held reports that another
// open file description holds it (this process's or another's).
func flockExclusive(f *os.File) (held bool, err error) {
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}
