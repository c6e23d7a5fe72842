package cpuload

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBusy(t *testing.T) {
	busy, err := parseBusy([]byte("cpu  344087 334 70791 41782 1173 0 1342 613 7 9"))
	require.NoError(t, err)
	assert.Equal(t, int64(344087+334+70791+0+1342+613), busy, "all but idle and iowait; guest time is inside user")
	for _, bad := range []string{"", "cpu0 1 2 3 4 5", "cpu 1 2 x 4 5", "cpu 1 2 3", "cpu 1 -2 3 4 5"} {
		_, err := parseBusy([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

// TestOthersAndThreads checks the arithmetic on constructed samples: the machine's busy time
// less this process's, over the wall time, and the threads that leaves.
func TestOthersAndThreads(t *testing.T) {
	t0 := time.Unix(100, 0)
	from := Sample{Busy: 10 * time.Second, Own: 3 * time.Second, At: t0}
	to := Sample{Busy: 10*time.Second + 1800*time.Millisecond, Own: 3*time.Second + 1000*time.Millisecond, At: t0.Add(time.Second)}
	assert.InDelta(t, 0.8, Others(from, to), 1e-9)
	assert.Equal(t, 0.0, Others(to, from), "no time passed backwards")
	assert.Equal(t, 0.0, Others(from, Sample{Busy: from.Busy, Own: from.Own + time.Second, At: t0.Add(time.Second)}), "never negative")
	for _, c := range []struct {
		cpus   int
		others float64
		limit  int
		want   int
	}{
		{2, 0, 2, 2}, {2, 0.3, 2, 2}, {2, 0.65, 2, 1}, {2, 0.8, 2, 1}, {2, 1.9, 2, 1}, {2, 3, 2, 1},
		{16, 0.5, 8, 8}, {16, 10.2, 8, 6}, {4, 0, 1, 1},
	} {
		assert.Equal(t, c.want, Threads(c.cpus, c.others, c.limit), "%d cpus, %.2f busy, at most %d", c.cpus, c.others, c.limit)
	}
}

func TestNewMeterRefuses(t *testing.T) {
	if runtime.GOOS != "linux" {
		_, err := NewMeter()
		require.Error(t, err)
		return
	}
	stat := filepath.Join(t.TempDir(), "stat")
	require.NoError(t, os.WriteFile(stat, []byte("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\ncpu1 1 2 3 4 5 6 7 8 9 10\nintr 5\n"), 0o644))
	loadavg := filepath.Join(t.TempDir(), "loadavg")
	require.NoError(t, os.WriteFile(loadavg, []byte("0.61 1.62 5.77 3/87 7965\n"), 0o644))
	tasks := t.TempDir()
	for i, state := range []string{"R", "S", "R"} {
		dir := filepath.Join(tasks, fmt.Sprint(100+i))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(fmt.Sprintf("%d (a (b) c) %s 1 2 3", 100+i, state)), 0o644))
	}
	m, err := newMeter(stat, loadavg, tasks, 2)
	require.NoError(t, err)
	assert.Equal(t, 2, m.CPUs())
	s, err := m.Read()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(1+2+3+6+7+8)*10*time.Millisecond, s.Busy)
	others, err := m.RunningOthers()
	require.NoError(t, err)
	assert.Equal(t, 1.0, others, "three runnable, two of them this process's threads")
	for _, bad := range []string{"", "0.1 0.2 0.3", "0.1 0.2 0.3 x/87 1", "0.1 0.2 0.3 0/87 1"} {
		require.NoError(t, os.WriteFile(loadavg, []byte(bad), 0o644))
		_, err := m.RunningOthers()
		assert.Error(t, err, "%q", bad)
	}
	_, err = newMeter(stat, loadavg, tasks, 1)
	assert.ErrorContains(t, err, "counts 2 processors, the process may use 1", "an affinity mask narrower than the machine")
	_, err = newMeter(filepath.Join(t.TempDir(), "none"), loadavg, tasks, 2)
	assert.Error(t, err)
}

// busy starts n processes that spin until the test ends.
func busy(t *testing.T, n int) {
	for i := 0; i < n; i++ {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
}

// TestMeterSeesOtherProcesses spins one process per processor while this one sleeps: the
// meter must see most of the machine busy with others, and leave one thread.
func TestMeterSeesOtherProcesses(t *testing.T) {
	m, err := NewMeter()
	if err != nil {
		t.Skipf("no meter here: %v", err)
	}
	busy(t, m.CPUs())
	time.Sleep(100 * time.Millisecond)
	from, err := m.Read()
	require.NoError(t, err)
	time.Sleep(500 * time.Millisecond)
	to, err := m.Read()
	require.NoError(t, err)
	others := Others(from, to)
	assert.Greater(t, others, float64(m.CPUs())-0.6, "the busy processes are others'")
	assert.Equal(t, 1, Threads(m.CPUs(), others, m.CPUs()))
}
