package ggml

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/generated/ggmlc"
)

// TestAdviseHugePages: a host buffer advised before its first write is backed by transparent
// huge pages where the system allows them (transparent_hugepage "madvise" or "always"), as
// /proc/self/smaps reports for the mapping that holds it; a buffer that is not advised is not,
// under "madvise".
func TestAdviseHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(mode), "[madvise]") {
		t.Skipf("transparent huge pages are not in madvise mode here (%q)", strings.TrimSpace(string(mode)))
	}
	be, err := NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	anonHuge := func(advise bool) int {
		ctx, err := NewContext(ContextOptions{MaxTensors: 1})
		require.NoError(t, err)
		defer ctx.Close()
		ctx.NewTensor(F32, 16<<20/4) // 16 MiB: whole 2 MiB pages inside it whatever its alignment
		buf, err := be.Alloc(ctx)
		require.NoError(t, err)
		defer buf.Close()
		if advise {
			buf.AdviseHugePages()
		}
		buf.Clear(1)
		// Advising splits the mapping where the advised pages start: look in the middle.
		return smapsAnonHugeKB(t, uintptr(ggmlc.BackendBufferGetBase(buf.buf))+8<<20)
	}
	require.Greater(t, anonHuge(true), 0, "an advised buffer")
	require.Zero(t, anonHuge(false), "a buffer not advised")
}

// smapsAnonHugeKB is the AnonHugePages of the mapping of /proc/self/smaps that holds addr.
func smapsAnonHugeKB(t *testing.T, addr uintptr) int {
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") {
			in = lo <= addr && addr < hi
			continue
		}
		if v, ok := strings.CutPrefix(line, "AnonHugePages:"); ok && in {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			require.NoError(t, err)
			return kb
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("no mapping of /proc/self/smaps holds %#x", addr)
	return 0
}
