// Package kernelrt is the start-up side of the generated kernel tables (generated/kernels): it
// resolves the table entry for a loaded model, audits the kernel lookups toy's dispatch makes,
// and checks a GPU's compute capability against a target's arch.
package kernelrt

import (
	"errors"
	"fmt"
	"slices"
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

// Need is one lookup a run makes in the kernel table: a kernel and, for a kernel that declares
// the ggml types of the data it takes (toy's CPU operations: a weight matrix's, a cache's), the
// type it is asked to read. Type is "" for a kernel looked up whatever it reads.
type Need struct {
	Kernel kernels.KernelID
	Type   string
}

// String writes n as MODEL.toml's and HARDWARE.toml's [expected_absent] do: module.kernel, or
// module.kernel[type].
func (n Need) String() string {
	if n.Type == "" {
		return n.Kernel.String()
	}
	return n.Kernel.String() + "[" + n.Type + "]"
}

// Needs makes lookups of kernels whatever they read.
func Needs(ks ...kernels.KernelID) []Need {
	ns := make([]Need, len(ks))
	for i, k := range ks {
		ns[i] = Need{Kernel: k}
	}
	return ns
}

// Absent is an unresolved lookup the model's MODEL.toml or its target's HARDWARE.toml expects,
// with its reason.
type Absent struct {
	Lookup Need
	Reason string
}

// Report is the start-up audit of one model entry.
type Report struct {
	Target, Model string
	// Shadowed lists, per common/ module the model replaced, the kernels the replacement dropped.
	Shadowed []kernels.Shadowed
	// Resolved lookups, in the order asked: what the run may dispatch to toy's kernels.
	Resolved []Need
	// ExpectedAbsent are unresolved lookups the model or its target declares may be absent:
	// ggml's own operation runs for them.
	ExpectedAbsent []Absent
	// Unresolved are lookups that neither resolve nor are expected absent.
	Unresolved []Need
}

// ErrUnresolved is wrapped by Report.Err when a lookup is unresolved.
var ErrUnresolved = errors.New("unresolved kernel lookups")

// Audit checks every lookup in needs against the model's effective modules on t (common/ with
// the model's own files replacing their namesakes) and the types their kernels take. A nil m
// (a model the table does not declare) resolves nothing and expects nothing absent: every
// lookup is unresolved.
func Audit(t *kernels.Target, m *kernels.Model, needs []Need) Report {
	r := Report{Target: t.Name, Model: "(none: the table declares no entry for this model)"}
	if m != nil {
		r.Model, r.Shadowed = m.Name, m.Shadowed
	}
	seen := map[Need]bool{}
	for _, n := range needs {
		if seen[n] {
			continue
		}
		seen[n] = true
		if m == nil {
			r.Unresolved = append(r.Unresolved, n)
			continue
		}
		if Resolves(t, m, n) {
			r.Resolved = append(r.Resolved, n)
			continue
		}
		if reason, ok := expectedAbsent(t, m, n); ok {
			r.ExpectedAbsent = append(r.ExpectedAbsent, Absent{Lookup: n, Reason: reason})
			continue
		}
		r.Unresolved = append(r.Unresolved, n)
	}
	return r
}

// Resolves says whether n resolves for m on t: its kernel is among m's effective modules
// (Lookup) and, when n asks for a type, the kernel declares that type.
func Resolves(t *kernels.Target, m *kernels.Model, n Need) bool {
	id, ok := Lookup(t, m, n.Kernel)
	if !ok {
		return false
	}
	if n.Type == "" {
		return true
	}
	for _, ty := range t.Module(id).Types[n.Kernel.Name()] {
		if ty == n.Type {
			return true
		}
	}
	return false
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

// expectedAbsent finds n among m's and then t's expected-absent lookups: written as n is, or,
// for a lookup of a type its kernel does not declare, as the kernel's [*] (every type it does
// not take). A type the kernel declares is not covered by [*]: where it fails to resolve, the
// model's entry lacks the module (or a namesake of the model's own dropped the kernel).
func expectedAbsent(t *kernels.Target, m *kernels.Model, n Need) (string, bool) {
	star := n.Type != "" && !declaresType(t, n)
	for _, as := range [][]kernels.ExpectedAbsent{m.ExpectedAbsent, t.ExpectedAbsent} {
		for _, a := range as {
			if a.Lookup == n.String() || star && a.Lookup == n.Kernel.String()+"[*]" {
				return a.Reason, true
			}
		}
	}
	return "", false
}

// declaresType says whether n's kernel, in its own module on t, declares n's type.
func declaresType(t *kernels.Target, n Need) bool {
	mod := t.Module(n.Kernel.Module())
	return mod != nil && slices.Contains(mod.Types[n.Kernel.Name()], n.Type)
}

// Err is nil when every lookup resolved or is expected absent; otherwise it names the
// unresolved lookups, unless allowUnresolved (--dangerously-allow-unresolved-kernel-lookups).
func (r Report) Err(allowUnresolved bool) error {
	if len(r.Unresolved) == 0 || allowUnresolved {
		return nil
	}
	return fmt.Errorf("kernels: target %s, model %s: %w: %s (not in the model's modules and not in its or the target's [expected_absent]; "+
		"--dangerously-allow-unresolved-kernel-lookups runs anyway, with ggml's operations)", r.Target, r.Model, ErrUnresolved, joinNeeds(r.Unresolved))
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

// Summary is the report in one line: how many lookups resolved, which are expected absent and
// which are unresolved, and which common modules the model's own shadow, with the kernels that
// dropped.
func (r Report) Summary() string {
	s := fmt.Sprintf("target %s, model %s: %d resolved", r.Target, r.Model, len(r.Resolved))
	if len(r.Resolved) > 0 {
		s += " (" + joinNeeds(r.Resolved) + ")"
	}
	for _, sh := range r.Shadowed {
		s += "; module " + sh.Module + " shadowed by the model's own"
		if len(sh.Kernels) > 0 {
			s += " (dropped: " + strings.Join(sh.Kernels, ", ") + ")"
		}
	}
	if len(r.ExpectedAbsent) > 0 {
		abs := make([]Need, len(r.ExpectedAbsent))
		for i, a := range r.ExpectedAbsent {
			abs[i] = a.Lookup
		}
		s += "; expected absent (ggml runs them): " + joinNeeds(abs)
	}
	if len(r.Unresolved) > 0 {
		s += "; UNRESOLVED: " + joinNeeds(r.Unresolved)
	}
	return s
}

// joinNeeds writes lookups as a comma-separated list.
func joinNeeds(ns []Need) string {
	ss := make([]string, len(ns))
	for i, n := range ns {
		ss[i] = n.String()
	}
	return strings.Join(ss, ", ")
}

// Dispatch is what one run of a command looks up through toy's own GPU kernel dispatch (package
// cuda), beside the CPU kernels a model's decoders or trainer look up (their KernelNeeds).
type Dispatch struct {
	// Argmax is greedy token sampling on the device (toy generate -temp 0 in a GPU build).
	Argmax bool
	// Sample is drawn token sampling on the device (toy generate with a temperature, with the
	// filters the kernel computes; see cuda.DeviceSampling).
	Sample bool
}

// EveryDispatch is every lookup some command makes: what toy kernels audits.
var EveryDispatch = Dispatch{Argmax: true, Sample: true}

// DispatchNeeds lists the kernels a run dispatching d looks up on backend b: none but on cuda,
// the sampling kernels d uses. toy's fused AdamW kernel (adamw_f32) is not among them: training
// steps with ggml's optimizer, and only the GPU checks (scripts/gpu-check.sh) run adamw_f32.
func DispatchNeeds(b kernels.Backend, d Dispatch) []Need {
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
	return Needs(ks...)
}

// BuildTarget is the kernel table's target of backend b compiled into this build, or nil.
func BuildTarget(b kernels.Backend) *kernels.Target {
	for _, t := range kernels.Compiled() {
		if t.Backend == b {
			return t
		}
	}
	return nil
}

// Builtin returns the lookups of needs that t's own modules resolve, whatever model runs: what
// a library user who runs no gate gets (the kernels this build compiled, for the types they
// take). A nil t resolves nothing.
func Builtin(t *kernels.Target, needs []Need) []Need {
	if t == nil {
		return nil
	}
	all := &kernels.Model{Name: "(the target's own modules)"}
	for _, m := range t.Modules {
		all.Modules = append(all.Modules, m.ID)
	}
	return Audit(t, all, needs).Resolved
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

// Preflight checks t's arch against the device before anything runs: an empty arch (metal) or
// a cpu target's (the instruction set its build compiled for) is skipped; a cuda arch must be
// compatible with dev.
func Preflight(t *kernels.Target, dev Capability) error {
	if t.Arch == "" || t.Backend == kernels.BackendCPU {
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

// cpuArchISA is the vector unit toy's CPU kernels compile to under each cpu target's arch (the
// -march its HARDWARE.toml declares; empty: this machine's, any).
var cpuArchISA = map[string]string{
	"x86-64-v3":              "avx2",
	"armv8.2-a+dotprod+fp16": "scalar",
}

// CheckCPUBuild says whether t, a cpu target compiled into this build, describes the build:
// toy's CPU kernels compiled for isa (ggml.CPUKernelsISA) must be what t's arch compiles them
// to. A mismatch is a build whose tags and C flags disagree (-tags toy_portable without
// -march=x86-64-v3, say).
func CheckCPUBuild(t *kernels.Target, isa string) error {
	if t == nil || t.Backend != kernels.BackendCPU {
		return nil
	}
	if want, ok := cpuArchISA[t.Arch]; ok && want != isa {
		return fmt.Errorf("kernels: target %s (arch %s) is compiled in, but toy's CPU kernels were compiled for %s, not %s: build with make portable=1 (or without -tags toy_portable)", t.Name, t.Arch, isa, want)
	}
	return nil
}
