// Package cpuload measures how much of the machine's processor time other processes take, so
// that a CPU backend can compute with no more threads than there are cores free: ggml's threads
// spin at the barrier that ends each operation, and a thread that has to share its core with
// another process stalls the others there for its whole time slice.
package cpuload

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/toyml/toy/internal/cputime"
)

// Sample is one reading: the machine's busy processor time (every state but idle and iowait;
// steal, time the hypervisor gave to others, counts as busy), this process's processor time,
// and when it was read.
type Sample struct {
	Busy, Own time.Duration
	At        time.Time
}

// Meter reads samples. It measures only where the process may run on every processor the
// machine's counters cover (/proc/stat's per-processor lines): with a narrower affinity mask the
// machine's busy time would count processors the process cannot use.
type Meter struct {
	path, loadavg, tasks string
	tick                 time.Duration // the counters' unit (USER_HZ)
	cpus                 int
}

// NewMeter returns a meter of this machine, or an error saying why it cannot measure (not
// Linux, /proc/stat unreadable, or an affinity mask narrower than the machine).
func NewMeter() (*Meter, error) {
	return newMeter("/proc/stat", "/proc/loadavg", "/proc/self/task", runtime.NumCPU())
}

func newMeter(path, loadavg, tasks string, usable int) (*Meter, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("cpuload: no processor counters on %s", runtime.GOOS)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cpuload: %w", err)
	}
	cpus := 0
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(line) > 3 && bytes.HasPrefix(line, []byte("cpu")) && line[3] >= '0' && line[3] <= '9' {
			cpus++
		}
	}
	if cpus == 0 || cpus != usable {
		return nil, fmt.Errorf("cpuload: %s counts %d processors, the process may use %d", path, cpus, usable)
	}
	// USER_HZ is 100 on every Linux architecture Go supports (the kernel's ABI for /proc).
	return &Meter{path: path, loadavg: loadavg, tasks: tasks, tick: 10 * time.Millisecond, cpus: cpus}, nil
}

// RunningOthers is a guess, from one reading, of how many processors other processes keep busy
// now: the tasks the kernel counts as runnable this instant (/proc/loadavg's fourth field)
// less this process's own runnable threads (the one reading included). A backend starts from
// it, before a window of Read's samples has passed: a short command (a benchmark's test, a few
// decoding steps) would otherwise spend its first window at every thread on a busy machine.
func (m *Meter) RunningOthers() (float64, error) {
	all, err := m.runnable()
	if err != nil {
		return 0, err
	}
	return float64(max(0, all-ownRunnable(m.tasks))), nil
}

// ownRunnable counts this process's threads in state R (tasks: /proc/self/task), at least the
// one counting.
func ownRunnable(tasks string) int {
	n := 0
	entries, _ := os.ReadDir(tasks)
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join(tasks, e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) S ...": the state follows the command's closing parenthesis.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'R' {
			n++
		}
	}
	return max(n, 1)
}

// runnable is the machine's runnable tasks this instant (/proc/loadavg's fourth field).
func (m *Meter) runnable() (int, error) {
	data, err := os.ReadFile(m.loadavg)
	if err != nil {
		return 0, fmt.Errorf("cpuload: %w", err)
	}
	fields := bytes.Fields(data)
	if len(fields) < 4 {
		return 0, fmt.Errorf("cpuload: %s: want five fields, got %q", m.loadavg, data)
	}
	running, _, ok := bytes.Cut(fields[3], []byte("/"))
	n, err := strconv.Atoi(string(running))
	if !ok || err != nil || n < 1 {
		return 0, fmt.Errorf("cpuload: %s: runnable tasks %q", m.loadavg, fields[3])
	}
	return n, nil
}

// CPUs is the number of processors the meter covers.
func (m *Meter) CPUs() int { return m.cpus }

// Read takes a sample.
func (m *Meter) Read() (Sample, error) {
	f, err := os.Open(m.path)
	if err != nil {
		return Sample{}, fmt.Errorf("cpuload: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return Sample{}, fmt.Errorf("cpuload: %s is empty", m.path)
	}
	busy, err := parseBusy(sc.Bytes())
	if err != nil {
		return Sample{}, err
	}
	return Sample{Busy: time.Duration(busy) * m.tick, Own: cputime.Process(), At: time.Now()}, nil
}

// parseBusy reads /proc/stat's aggregate line, "cpu user nice system idle iowait irq softirq
// steal guest guest_nice", and returns its busy ticks: all but idle and iowait (guest time is
// already inside user and nice).
func parseBusy(line []byte) (int64, error) {
	fields := bytes.Fields(line)
	if len(fields) < 5 || string(fields[0]) != "cpu" {
		return 0, fmt.Errorf("cpuload: not /proc/stat's cpu line: %q", line)
	}
	var busy int64
	for i, f := range fields[1:] {
		if i >= 8 { // guest and guest_nice are counted in user and nice
			break
		}
		v, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("cpuload: /proc/stat's cpu line: field %d is %q", i+1, f)
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, nil
}

// Others is how many processors other processes (and the hypervisor) kept busy on average
// between two samples: the machine's busy time less this process's, over the wall time.
func Others(from, to Sample) float64 {
	wall := to.At.Sub(from.At)
	if wall <= 0 {
		return 0
	}
	return math.Max(0, float64((to.Busy-from.Busy)-(to.Own-from.Own))/float64(wall))
}

// Threads is how many threads to compute with on cpus processors when others of them are kept
// busy by other processes: the free processors, rounded so that a process taking most of one
// counts as taking it (0.65 of a processor or more), at least 1 and at most limit.
func Threads(cpus int, others float64, limit int) int {
	return min(limit, max(int(float64(cpus)-others+0.35), 1))
}
