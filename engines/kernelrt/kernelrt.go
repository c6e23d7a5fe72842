// Package kernelrt is the start-up side of the generated kernel tables (generated/kernels): it
// resolves the table entry for a loaded model, audits the kernel lookups toy's dispatch makes,
// and checks a GPU's compute capability against a target's arch.
package kernelrt

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/toyml/toy/generated/kernels"
)

// Ref is what is known of a loaded checkpoint.
type Ref struct {
	// ModelType is GGUF general.architecture (llama, qwen2, ...).
	ModelType string
	// HiddenSize is <arch>.embedding_length; 0 when unknown.
	HiddenSize int
	// Names are the references a match name may occur in: the file path, --model-name and GGUF
	// general.name (empty ones are ignored).
	Names []string
}

// Resolve picks the model entry of t for ref: the entries declaring exactly (ModelType,
// HiddenSize) first; those declaring ModelType with no hidden size (wildcards) only when no entry
// declares the exact size. One candidate is the answer; between several, the one whose match
// names occur (case-insensitively) in ref.Names wins, the longest occurring match name breaking
// a remaining tie. Anything else is an error naming the candidates.
func Resolve(t *kernels.Target, ref Ref) (*kernels.Model, error) {
	var exact, wild []*kernels.Model
	for i := range t.Models {
		m := &t.Models[i]
		for _, ty := range m.Types {
			if ty.ModelType != ref.ModelType {
				continue
			}
			switch {
			case ty.HiddenSize == 0:
				wild = append(wild, m)
			case ty.HiddenSize == ref.HiddenSize:
				exact = append(exact, m)
			}
		}
	}
	cands, kind := exact, "exactly"
	if len(cands) == 0 {
		cands, kind = wild, "as a wildcard"
	}
	switch len(cands) {
	case 0:
		return nil, fmt.Errorf("kernels: target %s declares no model for model type %q with hidden size %d (declared: %s)",
			t.Name, ref.ModelType, ref.HiddenSize, declared(t))
	case 1:
		return cands[0], nil
	}
	var lowered []string
	for _, n := range ref.Names {
		if n != "" {
			lowered = append(lowered, strings.ToLower(n))
		}
	}
	best, bestLen, tied := (*kernels.Model)(nil), 0, false
	for _, m := range cands {
		l := longestMatch(m.MatchNames, lowered)
		switch {
		case l == 0:
		case l > bestLen:
			best, bestLen, tied = m, l, false
		case l == bestLen:
			tied = true
		}
	}
	if best != nil && !tied {
		return best, nil
	}
	var names []string
	for _, m := range cands {
		names = append(names, fmt.Sprintf("%s (match names %s)", m.Name, strings.Join(m.MatchNames, ", ")))
	}
	why := "none of their match names occurs in"
	if tied {
		why = "more than one matches equally well"
	}
	return nil, fmt.Errorf("kernels: target %s: model type %q with hidden size %d is declared %s by %s, and %s %q; pass --model-name to choose",
		t.Name, ref.ModelType, ref.HiddenSize, kind, strings.Join(names, " and "), why, ref.Names)
}

// NamedBy says whether one of m's match names occurs (case-insensitively) in ref.Names: the
// entry then describes this very model, not merely its architecture or shape. Only such an
// entry may impose its [behaviour] (BOS rule, chat template, stop strings) and sampling presets
// on a model; an entry that resolves by model type and hidden size alone names no model.
func NamedBy(m *kernels.Model, ref Ref) bool {
	var lowered []string
	for _, n := range ref.Names {
		if n != "" {
			lowered = append(lowered, strings.ToLower(n))
		}
	}
	return longestMatch(m.MatchNames, lowered) > 0
}

func longestMatch(matchNames, names []string) int {
	best := 0
	for _, mn := range matchNames {
		for _, n := range names {
			if strings.Contains(n, strings.ToLower(mn)) && len(mn) > best {
				best = len(mn)
			}
		}
	}
	return best
}

func declared(t *kernels.Target) string {
	var ds []string
	for _, m := range t.Models {
		for _, ty := range m.Types {
			if ty.HiddenSize == 0 {
				ds = append(ds, fmt.Sprintf("%s/* (%s)", ty.ModelType, m.Name))
			} else {
				ds = append(ds, fmt.Sprintf("%s/%d (%s)", ty.ModelType, ty.HiddenSize, m.Name))
			}
		}
	}
	if len(ds) == 0 {
		return "none"
	}
	sort.Strings(ds)
	return strings.Join(ds, ", ")
}

// Absent is an unresolved lookup the model's MODEL.toml expects, with its reason.
type Absent struct {
	Lookup kernels.KernelID
	Reason string
}

// Report is the start-up audit of one model entry.
type Report struct {
	Target, Model string
	// Shadowed lists, per common/ module the model replaced, the kernels the replacement dropped.
	Shadowed []kernels.Shadowed
	// Resolved lookups, in the order asked.
	Resolved []kernels.KernelID
	// ExpectedAbsent are unresolved lookups the model declares may be absent.
	ExpectedAbsent []Absent
	// Unresolved are lookups that neither resolve nor are expected absent.
	Unresolved []kernels.KernelID
}

// ErrUnresolved is wrapped by Report.Err when a lookup is unresolved.
var ErrUnresolved = errors.New("unresolved kernel lookups")

// Audit checks every kernel in needs against the model's effective modules (common/ with the
// model's own files replacing their namesakes).
func Audit(t *kernels.Target, m *kernels.Model, needs []kernels.KernelID) Report {
	r := Report{Target: t.Name, Model: m.Name, Shadowed: m.Shadowed}
	for _, k := range needs {
		if _, ok := Lookup(t, m, k); ok {
			r.Resolved = append(r.Resolved, k)
			continue
		}
		if reason, ok := expectedAbsent(m, k); ok {
			r.ExpectedAbsent = append(r.ExpectedAbsent, Absent{Lookup: k, Reason: reason})
			continue
		}
		r.Unresolved = append(r.Unresolved, k)
	}
	return r
}

// Lookup finds kernel k among m's effective modules on t: k's own module, or the model's own
// module that replaces it (its namesake), when that one still has k. It returns the module to
// load k from; ok is false when k does not resolve. The start-up audit and package cuda's
// dispatch both look kernels up through it, so that what the gate checks is what runs.
func Lookup(t *kernels.Target, m *kernels.Model, k kernels.KernelID) (module kernels.ModuleID, ok bool) {
	want := k.Module()
	if want.Tree() != t.Sources {
		return module, false
	}
	for _, id := range m.Modules {
		mod := t.Module(id)
		if mod == nil || id != want && id.Name() != want.Name() {
			continue
		}
		for _, name := range mod.Kernels {
			if name == k.Name() {
				return id, true
			}
		}
	}
	return module, false
}

func expectedAbsent(m *kernels.Model, k kernels.KernelID) (string, bool) {
	for _, a := range m.ExpectedAbsent {
		if a.Lookup == k.String() {
			return a.Reason, true
		}
	}
	return "", false
}

// Err is nil when every lookup resolved or is expected absent; otherwise it names the
// unresolved lookups, unless allowUnresolved (--dangerously-allow-unresolved-kernel-lookups).
func (r Report) Err(allowUnresolved bool) error {
	if len(r.Unresolved) == 0 || allowUnresolved {
		return nil
	}
	var ls []string
	for _, l := range r.Unresolved {
		ls = append(ls, l.String())
	}
	return fmt.Errorf("kernels: target %s, model %s: %w: %s (not in the model's modules and not in its [expected_absent]; "+
		"--dangerously-allow-unresolved-kernel-lookups runs anyway)", r.Target, r.Model, ErrUnresolved, strings.Join(ls, ", "))
}

// Lines renders the report for people, one fact a line.
func (r Report) Lines() []string {
	var out []string
	for _, s := range r.Shadowed {
		if len(s.Kernels) == 0 {
			out = append(out, fmt.Sprintf("module %s: replaced by the model's own; nothing dropped by shadowing", s.Module))
		} else {
			out = append(out, fmt.Sprintf("module %s: dropped by shadowing: %s", s.Module, strings.Join(s.Kernels, ", ")))
		}
	}
	for _, l := range r.Resolved {
		out = append(out, "resolved: "+l.String())
	}
	for _, a := range r.ExpectedAbsent {
		out = append(out, fmt.Sprintf("expected absent: %s (%s)", a.Lookup, a.Reason))
	}
	for _, l := range r.Unresolved {
		out = append(out, "UNRESOLVED: "+l.String())
	}
	return out
}

// Dispatch is what one run of a command looks up through toy's own kernel dispatch (package
// cuda). ggml's own kernels (compiled in, or loaded with its backend library) are not looked up,
// so a command that only runs ggml graphs (perplexity, bench, train, finetune, serve) dispatches
// nothing and its gate passes whatever the table lacks.
type Dispatch struct {
	// Argmax is greedy token sampling on the device (toy generate -temp 0 in a GPU build).
	Argmax bool
	// Sample is drawn token sampling on the device (toy generate with a temperature, with the
	// filters the kernel computes; see cuda.DeviceSampling).
	Sample bool
}

// EveryDispatch is every lookup some command makes: what toy kernels audits.
var EveryDispatch = Dispatch{Argmax: true, Sample: true}

// DispatchNeeds lists the kernels a run dispatching d looks up on backend b: none on cpu
// (ggml's kernels are compiled in, and toy dispatches none of its own); on cuda, the sampling
// kernels d uses. toy's fused AdamW kernel (adamw_f32) is not among them: training steps with
// ggml's optimizer, and only the GPU checks (scripts/gpu-check.sh) run adamw_f32.
func DispatchNeeds(b kernels.Backend, d Dispatch) []kernels.KernelID {
	if b != kernels.BackendCUDA {
		return nil
	}
	var ks []kernels.KernelID
	if d.Argmax {
		ks = append(ks, kernels.KernelCUDASamplingArgmaxF32)
	}
	if d.Sample {
		ks = append(ks, kernels.KernelCUDASamplingSampleF32)
	}
	return ks
}

// Capability is a CUDA compute capability, e.g. {9, 0}.
type Capability struct{ Major, Minor int }

func (c Capability) String() string { return fmt.Sprintf("%d.%d", c.Major, c.Minor) }

// ParseCapability reads "9.0" or "12.1".
func ParseCapability(s string) (Capability, error) {
	maj, min, ok := strings.Cut(s, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if !ok || err1 != nil || err2 != nil || a < 0 || b < 0 {
		return Capability{}, fmt.Errorf("compute capability %q: want MAJOR.MINOR, e.g. 9.0", s)
	}
	return Capability{a, b}, nil
}

// ParseArch reads a CUDA arch written verbatim: sm_90a → (9.0, 'a'), sm_121f → (12.1, 'f'),
// sm_80 → (8.0, 0).
func ParseArch(arch string) (Capability, byte, error) {
	rest, ok := strings.CutPrefix(arch, "sm_")
	var suffix byte
	if n := len(rest); ok && n > 0 && (rest[n-1] == 'a' || rest[n-1] == 'f') {
		suffix, rest = rest[n-1], rest[:n-1]
	}
	v, err := strconv.Atoi(rest)
	if !ok || err != nil || len(rest) < 2 || v < 0 {
		return Capability{}, 0, fmt.Errorf("arch %q: want sm_XY with an optional a or f suffix", arch)
	}
	return Capability{v / 10, v % 10}, suffix, nil
}

// ArchCompatible says whether code built for arch runs on a device of capability dev: an a
// suffix (sm_90a) runs only on that exact capability; an f suffix (sm_100f) on the same family,
// that is the same major version at the same or a later minor; no suffix (sm_80) on that
// capability and every later one, through the driver's PTX JIT. The reason explains a refusal.
func ArchCompatible(arch string, dev Capability) (ok bool, reason string, err error) {
	c, suffix, err := ParseArch(arch)
	if err != nil {
		return false, "", err
	}
	switch suffix {
	case 'a':
		if dev == c {
			return true, "", nil
		}
		return false, fmt.Sprintf("%s is architecture-specific: it runs only on compute capability %s, not %s", arch, c, dev), nil
	case 'f':
		if dev.Major == c.Major && dev.Minor >= c.Minor {
			return true, "", nil
		}
		return false, fmt.Sprintf("%s is family-specific: it runs on compute capability %d.x from %s, not %s", arch, c.Major, c, dev), nil
	}
	if dev.Major > c.Major || dev.Major == c.Major && dev.Minor >= c.Minor {
		return true, "", nil
	}
	return false, fmt.Sprintf("%s needs compute capability %s or later, not %s", arch, c, dev), nil
}

// Preflight checks t's arch against the device before anything runs: an empty arch (cpu,
// metal) is skipped; a cuda arch must be compatible with dev.
func Preflight(t *kernels.Target, dev Capability) error {
	if t.Arch == "" {
		return nil
	}
	ok, reason, err := ArchCompatible(t.Arch, dev)
	if err != nil {
		return fmt.Errorf("kernels: target %s: %w", t.Name, err)
	}
	if !ok {
		return fmt.Errorf("kernels: target %s cannot run on this GPU: %s", t.Name, reason)
	}
	return nil
}
