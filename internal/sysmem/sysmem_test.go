package sysmem

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTotal compares Total with MemTotal of /proc/meminfo, which the kernel writes in KiB.
func TestTotal(t *testing.T) {
	if runtime.GOOS != "linux" {
		assert.Zero(t, Total())
		return
	}
	raw, err := os.ReadFile("/proc/meminfo")
	require.NoError(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			assert.InDelta(t, float64(kib*1024), float64(Total()), float64(1<<20))
			return
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
}
