package runs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CheckpointFile is the manifest in the weights directory that names the run's latest
// checkpoint. It is written last, so a checkpoint exists exactly when the manifest names it.
const CheckpointFile = "checkpoint.json"

// ErrNoCheckpoint is returned by LatestCheckpoint for a run that has saved none.
var ErrNoCheckpoint = errors.New("the run has no checkpoint")

// Checkpoint is one saved checkpoint of a run: a set of files, written together into one step
// directory (weights/step-<N>/) that was renamed into place once, and named by the manifest
// weights/checkpoint.json with each file's size and SHA-256.
type Checkpoint struct {
	// Step is the number of optimizer steps done when the checkpoint was taken.
	Step int `json:"step"`
	// RunID is the id of the run that saved it.
	RunID string `json:"run_id"`
	// Dir is the step directory, relative to the weights directory ("step-00000040"); "." for
	// a checkpoint of the first layout (Legacy).
	Dir string `json:"dir"`
	// Files are the checkpoint's files, in name order.
	Files []CheckpointEntry `json:"files"`
	// Legacy marks a checkpoint of the layout before manifests: weights/model.gguf and
	// weights/optimizer.gguf, renamed into place one by one. Its Step and RunID are unknown
	// (0 and ""): the caller must check the files' pairing from their contents.
	Legacy bool `json:"-"`

	weights string // the weights directory
}

// CheckpointEntry is one file of a checkpoint.
type CheckpointEntry struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Path returns the path of the checkpoint's file name.
func (c *Checkpoint) Path(name string) string {
	return filepath.Join(c.weights, c.Dir, name)
}

// stepDir is the name of the step directory of a checkpoint at step.
func stepDir(step int) string { return fmt.Sprintf("step-%08d", step) }

// SaveCheckpoint saves a checkpoint at step as one unit. write fills a new temporary directory
// (in the weights directory) with the checkpoint's files; the directory is then renamed to
// weights/step-<N>/ and the manifest weights/checkpoint.json, naming the step, the run id and
// every file with its size and SHA-256, is written atomically, last. Until that write the
// previous checkpoint stays the run's checkpoint, whole, so a crash at any moment leaves one
// good checkpoint. Each file named in latest is then also linked (a hard link, a copy where
// links are not possible) as weights/<name>, so that weights/model.gguf is always the latest
// model; older step directories, leftovers of interrupted saves and the first layout's
// optimizer.gguf are removed last.
//
// The state of a training run at a given step is the same whenever it is saved, so when the
// run's checkpoint already is at step, SaveCheckpoint keeps it and writes nothing.
func (r *Run) SaveCheckpoint(step int, write func(dir string) error, latest ...string) (*Checkpoint, error) {
	if step < 0 {
		return nil, fmt.Errorf("runs: %s: checkpoint at step %d", r.ID, step)
	}
	if r.follower {
		return nil, fmt.Errorf("runs: %s: checkpoint: the run was opened to follow another process's writing (Follow)", r.ID)
	}
	weights := r.WeightsDir()
	if err := os.MkdirAll(weights, 0o755); err != nil {
		return nil, fmt.Errorf("runs: %s: checkpoint: %w", r.ID, err)
	}
	if cur, err := r.readManifest(); err == nil && cur.Step == step {
		if _, err := os.Stat(filepath.Join(weights, cur.Dir)); err == nil {
			return cur, nil
		}
	}
	fail := func(err error) (*Checkpoint, error) {
		return nil, fmt.Errorf("runs: %s: checkpoint at step %d: %w", r.ID, step, err)
	}
	name := stepDir(step)
	tmp, err := mkdirTemp(weights, "."+name+".tmp-")
	if err != nil {
		return fail(err)
	}
	committed := false
	defer func() {
		if !committed {
			os.RemoveAll(tmp)
		}
	}()
	if err := write(tmp); err != nil {
		return fail(err)
	}
	c := &Checkpoint{Step: step, RunID: r.ID, Dir: name, weights: weights}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return fail(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		fe, err := hashFile(filepath.Join(tmp, e.Name()), true)
		if err != nil {
			return fail(err)
		}
		fe.Name = e.Name()
		c.Files = append(c.Files, fe)
	}
	if len(c.Files) == 0 {
		return fail(errors.New("no file was written"))
	}
	syncDir(tmp)
	final := filepath.Join(weights, name)
	// A step directory no manifest names (a save cut off before its manifest) is stale.
	if err := os.RemoveAll(final); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fail(err)
	}
	committed = true
	syncDir(weights)
	manifest, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fail(err)
	}
	if err := AtomicWriteFile(filepath.Join(weights, CheckpointFile), func(w io.Writer) error {
		_, err := w.Write(append(manifest, '\n'))
		return err
	}); err != nil {
		os.RemoveAll(final)
		return fail(err)
	}
	// The checkpoint is committed; what follows only tidies up.
	for _, n := range latest {
		if err := linkOrCopy(filepath.Join(final, n), filepath.Join(weights, n)); err != nil {
			return fail(fmt.Errorf("link the latest %s: %w", n, err))
		}
	}
	r.removeStale(name)
	return c, nil
}

// removeStale removes every step directory but keep, the temporary files and directories of
// saves that did not finish, and the first layout's optimizer state (superseded by the
// manifest's).
func (r *Run) removeStale(keep string) {
	weights := r.WeightsDir()
	entries, _ := os.ReadDir(weights)
	for _, e := range entries {
		n := e.Name()
		switch {
		case !e.IsDir() && (n == legacyOptimizer || strings.HasPrefix(n, ".") && (strings.Contains(n, ".tmp") || strings.Contains(n, ".link-"))):
			os.Remove(filepath.Join(weights, n))
		case !e.IsDir() || n == keep:
		case strings.HasPrefix(n, "step-"), strings.HasPrefix(n, ".step-") && strings.Contains(n, ".tmp-"):
			os.RemoveAll(filepath.Join(weights, n))
		}
	}
	syncDir(weights)
}

// The first layout's files, in the weights directory itself.
const legacyModel, legacyOptimizer = "model.gguf", "optimizer.gguf"

// readManifest reads and parses weights/checkpoint.json, without checking the files.
func (r *Run) readManifest() (*Checkpoint, error) {
	path := filepath.Join(r.WeightsDir(), CheckpointFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if c.Dir == "" || c.Dir != filepath.Base(c.Dir) || c.Dir == "." || c.Dir == ".." || c.Step < 0 || len(c.Files) == 0 {
		return nil, fmt.Errorf("%s: not a checkpoint manifest (dir %q, step %d, %d files)", path, c.Dir, c.Step, len(c.Files))
	}
	for _, f := range c.Files {
		if err := checkID(f.Name); err != nil {
			return nil, fmt.Errorf("%s: bad file name %q", path, f.Name)
		}
	}
	c.weights = r.WeightsDir()
	return &c, nil
}

// LatestCheckpoint returns the run's checkpoint, checked: the manifest must name this run, and
// every file it lists must be there with its size and SHA-256. A run of the first layout
// (weights/model.gguf and weights/optimizer.gguf, no manifest) gives a Legacy checkpoint
// holding those of the two files that exist. A run that saved nothing gives ErrNoCheckpoint.
func (r *Run) LatestCheckpoint() (*Checkpoint, error) {
	c, err := r.readManifest()
	if errors.Is(err, fs.ErrNotExist) {
		return r.legacyCheckpoint()
	}
	if err != nil {
		return nil, fmt.Errorf("runs: %s: %w", r.ID, err)
	}
	if c.RunID != r.ID {
		return nil, fmt.Errorf("runs: %s: the checkpoint in %s was saved by run %q, not this one", r.ID, r.WeightsDir(), c.RunID)
	}
	for _, want := range c.Files {
		got, err := hashFile(c.Path(want.Name), false)
		if err != nil {
			return nil, fmt.Errorf("runs: %s: checkpoint at step %d: %w", r.ID, c.Step, err)
		}
		if got.Size != want.Size || got.SHA256 != want.SHA256 {
			return nil, fmt.Errorf("runs: %s: checkpoint at step %d: %s is not the file the manifest names (%d bytes, sha256 %.12s…; want %d bytes, %.12s…)",
				r.ID, c.Step, c.Path(want.Name), got.Size, got.SHA256, want.Size, want.SHA256)
		}
	}
	return c, nil
}

func (r *Run) legacyCheckpoint() (*Checkpoint, error) {
	c := &Checkpoint{Dir: ".", Legacy: true, weights: r.WeightsDir()}
	for _, n := range []string{legacyModel, legacyOptimizer} {
		st, err := os.Stat(filepath.Join(r.WeightsDir(), n))
		if err != nil {
			continue
		}
		c.Files = append(c.Files, CheckpointEntry{Name: n, Size: st.Size()})
	}
	if len(c.Files) == 0 {
		return nil, fmt.Errorf("runs: %s: %w (nothing in %s)", r.ID, ErrNoCheckpoint, r.WeightsDir())
	}
	return c, nil
}

// Has reports whether the checkpoint holds a file called name.
func (c *Checkpoint) Has(name string) bool {
	for _, f := range c.Files {
		if f.Name == name {
			return true
		}
	}
	return false
}

// hashFile returns the size and SHA-256 of a file, fsyncing it first when sync is set.
func hashFile(path string, sync bool) (CheckpointEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return CheckpointEntry{}, err
	}
	defer f.Close()
	if sync {
		if err := f.Sync(); err != nil {
			return CheckpointEntry{}, err
		}
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return CheckpointEntry{}, fmt.Errorf("%s: %w", path, err)
	}
	return CheckpointEntry{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// mkdirTemp makes a new directory in dir named prefix and a random number, with mode 0777 less
// the umask (os.MkdirTemp makes 0700).
func mkdirTemp(dir, prefix string) (string, error) {
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		err := os.Mkdir(name, 0o777)
		if errors.Is(err, fs.ErrExist) && try < 10000 {
			continue
		}
		return name, err
	}
}

// linkOrCopy atomically replaces dst with a hard link to src, or a copy of it where the file
// system cannot link.
func linkOrCopy(src, dst string) error {
	dir := filepath.Dir(dst)
	tmp := filepath.Join(dir, "."+filepath.Base(dst)+".link-"+strconv.FormatUint(uint64(rand.Uint32()), 10))
	if err := os.Link(src, tmp); err != nil {
		return AtomicWriteFile(dst, func(w io.Writer) error {
			f, err := os.Open(src)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(w, f)
			return err
		})
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	syncDir(dir)
	return nil
}
