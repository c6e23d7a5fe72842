package cli

import (
	"flag"
	"fmt"
	"io"

	"github.com/toyml/toy/cuda"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/recipes"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// The kernel gate. Every command that runs a model resolves the kernel table's entry for it and
// audits the lookups the run will make: those of toy's own CPU operations that the model's
// decoders make (decoding.GGUFModel.KernelNeeds: generate, perplexity, bench model, bench serve,
// serve) and, in a cuda build, toy generate's device sampling (kernelrt.Dispatch). A model the
// table declares no entry for, or a lookup that neither resolves nor is expected absent, refuses
// the run unless --dangerously-allow-unresolved-kernel-lookups; the model's decoders then run
// toy's kernels for what resolved and ggml's operations for the rest. train (a language
// model's and ViT's) and finetune audit the lookups their training graphs make
// (training.TrainNeeds, through the recipes' KernelGate: TrainGate) the same way, and their graphs
// run toy's kernels for what resolved; train -recipe dflash audits its target's decoders
// (GateDecoders); classify, whose graph runs none of toy's kernels, refuses a model the table
// declares no entry for (GateEntry). bench train and bench finetune audit their training graphs'
// lookups as train and finetune do (GateTrainable), and bench train's toy's-GEMM ceiling runs only
// where the first model's packed f32 product resolved; bench matmul, which times ggml's
// product alone and looks up none of toy's kernels, refuses a cpu table that does not describe
// the build (GateNoLookups).

// AllowUnresolvedFlag is the gate's override.
const AllowUnresolvedFlag = "dangerously-allow-unresolved-kernel-lookups"

// RegisterGate adds the gate's override to a command's flags.
func RegisterGate(fs *flag.FlagSet) *bool {
	return fs.Bool(AllowUnresolvedFlag, false, "run even when a kernel lookup this command makes does not resolve (toy's own kernels: in a cuda build, toy generate's device sampling)")
}

// BuildTarget is the kernel table's target the gate audits: compiledTarget, replaced by tests.
var BuildTarget = compiledTarget

// compiledTarget is the kernel table's target of this build's backend, or nil.
func compiledTarget() *kernels.Target {
	var target *kernels.Target
	for _, t := range kernels.Compiled() {
		if string(t.Backend) == ggml.BackendKind {
			target = t
		}
	}
	return target
}

// ModelRef is what the kernel table resolves a loaded model by.
func ModelRef(m *decoding.GGUFModel, path, modelName string) kernelrt.Ref {
	name, _ := m.Meta["general.name"].(string)
	return kernelrt.Ref{ModelType: m.Arch.Name, HiddenSize: m.Arch.DModel, Names: []string{path, modelName, name}}
}

// resolveEntry finds t's entry for ref. For a model the table does not declare it returns a nil
// entry, after a note on stderr: the gate then resolves none of the run's lookups, and a run the
// override lets through runs with toy's defaults and ggml's operations. named says whether the
// entry names the model (kernelrt.NamedBy), which it must to supply defaults (ModelBehaviour,
// ApplyPreset).
func resolveEntry(stderr io.Writer, t *kernels.Target, ref kernelrt.Ref) (entry *kernels.Model, named bool) {
	if t == nil {
		return nil, false
	}
	entry, err := kernelrt.Resolve(t, ref)
	if err != nil {
		fmt.Fprintf(stderr, "toy: %v\n", err)
		return nil, false
	}
	return entry, kernelrt.NamedBy(entry, ref)
}

// Gate audits needs and the lookups of d, what the run dispatches, against entry's modules on t
// (a nil entry, a model the table does not declare, resolves nothing) and refuses an unresolved
// one unless allow.
func Gate(t *kernels.Target, entry *kernels.Model, needs []kernelrt.Need, d kernelrt.Dispatch, allow bool) (kernelrt.Report, error) {
	if t == nil {
		return kernelrt.Report{}, nil
	}
	r := kernelrt.Audit(t, entry, append(append([]kernelrt.Need(nil), needs...), kernelrt.DispatchNeeds(t.Backend, d)...))
	return r, r.Err(allow)
}

// CPUTarget is the cpu kernel table, whose entries govern toy's own CPU operations in every
// build (a model on the CPU backend runs them): kernelrt.BuildTarget's, replaced by tests.
var CPUTarget = func() *kernels.Target { return kernelrt.BuildTarget(kernels.BackendCPU) }

// auditCPU runs the gate over the lookups of toy's CPU operations that m's decoders make with o
// (none on a GPU backend): the cpu table's entry for ref, an unresolved lookup refused unless
// allow, and m given what resolved. The report is empty where nothing was looked up.
func auditCPU(m *decoding.GGUFModel, ref kernelrt.Ref, o decoding.DecoderOptions, allow bool) (kernelrt.Report, error) {
	r, err := auditCPUNeeds(ref, m.KernelNeeds(o.KVType, o.FlashAttention), allow)
	if err == nil {
		m.UseKernels(r.Resolved)
	}
	return r, err
}

// auditCPUNeeds runs the gate over needs, lookups of toy's CPU operations, against the cpu
// table's entry for ref, an unresolved lookup refused unless allow, as is a cpu table that
// does not describe the build (kernelrt.CheckCPUBuild). The report is empty where nothing is
// looked up.
func auditCPUNeeds(ref kernelrt.Ref, needs []kernelrt.Need, allow bool) (kernelrt.Report, error) {
	t := CPUTarget()
	if len(needs) == 0 || t == nil {
		return kernelrt.Report{}, nil
	}
	if err := kernelrt.CheckCPUBuild(t, ggml.CPUKernelsISA()); err != nil && !allow {
		return kernelrt.Report{}, fmt.Errorf("%w (--%s runs anyway)", err, AllowUnresolvedFlag)
	}
	entry, _ := resolveEntry(io.Discard, t, ref)
	return Gate(t, entry, needs, kernelrt.Dispatch{}, allow)
}

// TrainGate is the boot gate of a command that trains (the recipes' KernelGate, which they
// call with the model they built: a resumed run's too): it audits the lookups the run's
// training graphs make against the cpu table's entry for the model, prints the audit on one
// line of stderr (prefixed "toy cmd: kernels:"), and refuses an unresolved lookup unless allow.
func TrainGate(stderr io.Writer, cmd string, allow bool) recipes.KernelGate {
	return func(ref kernelrt.Ref, needs []kernelrt.Need) ([]kernelrt.Need, error) {
		r, err := auditCPUNeeds(ref, needs, allow)
		if len(r.Resolved)+len(r.ExpectedAbsent)+len(r.Unresolved) > 0 {
			fmt.Fprintf(stderr, "toy %s: kernels: %s\n", cmd, r.Summary())
		}
		return r.Resolved, err
	}
}

// GateTrainable is the boot gate of a command that trains m, of architecture a, itself (bench
// train, bench finetune): the cpu table's entry for a (names: the files and names the table may
// match) audits the lookups m's training graphs make (TrainGate), and m comes back with what
// resolved (training.WithKernels).
func GateTrainable(stderr io.Writer, cmd string, a *transformer.Architecture, names []string, m training.Trainable, allow bool) (training.Trainable, []kernelrt.Need, error) {
	var resolved []kernelrt.Need
	g := TrainGate(stderr, cmd, allow)
	tm, err := recipes.Gated(func(ref kernelrt.Ref, needs []kernelrt.Need) ([]kernelrt.Need, error) {
		r, err := g(ref, needs)
		resolved = r
		return r, err
	}, a, names, m)
	return tm, resolved, err
}

// GateNoLookups is the gate of a command that runs ggml's operations alone, on no model (bench
// matmul): a cpu table that does not describe the build (kernelrt.CheckCPUBuild) is refused
// unless allow, and the audit line says nothing is looked up.
func GateNoLookups(stderr io.Writer, cmd string, allow bool) error {
	t := CPUTarget()
	if t == nil {
		return nil
	}
	if err := kernelrt.CheckCPUBuild(t, ggml.CPUKernelsISA()); err != nil {
		if !allow {
			return fmt.Errorf("%w (--%s runs anyway)", err, AllowUnresolvedFlag)
		}
		fmt.Fprintf(stderr, "toy %s: kernels: UNRESOLVED: %v\n", cmd, err)
	}
	fmt.Fprintf(stderr, "toy %s: kernels: target %s: ggml's operations alone, none of toy's kernels looked up\n", cmd, t.Name)
	return nil
}

// GateEntry is the gate of a command whose graph looks up none of toy's kernels (classify): the
// build's table must declare an entry for the model ref names, or allow must be set.
func GateEntry(stderr io.Writer, cmd string, ref kernelrt.Ref, allow bool) error {
	t := BuildTarget()
	if t == nil {
		return nil
	}
	if _, err := kernelrt.Resolve(t, ref); err != nil && !allow {
		return fmt.Errorf("%w (--%s runs anyway, with toy's defaults)", err, AllowUnresolvedFlag)
	}
	fmt.Fprintf(stderr, "toy %s: kernels: target %s: the model's graph looks up none of toy's kernels\n", cmd, t.Name)
	return nil
}

// GateDecoders is the boot gate of a command that decodes with m: it resolves the build's
// table's entry for m (path and modelName are matched against the entries' names), audits the
// lookups of toy's CPU operations m's decoders make with o (auditCPU), prints the audit on one
// line of stderr (prefixed "toy cmd: kernels:"), and refuses an unresolved lookup unless allow.
// It returns the entry (nil where the table has none) and whether it names the model.
func GateDecoders(stderr io.Writer, cmd string, m *decoding.GGUFModel, path, modelName string, o decoding.DecoderOptions, allow bool) (*kernels.Model, bool, error) {
	ref := ModelRef(m, path, modelName)
	entry, named := resolveEntry(stderr, BuildTarget(), ref)
	r, err := auditCPU(m, ref, o, allow)
	if len(r.Resolved)+len(r.ExpectedAbsent)+len(r.Unresolved) > 0 {
		fmt.Fprintf(stderr, "toy %s: kernels: %s\n", cmd, r.Summary())
	}
	if err != nil {
		return nil, false, err
	}
	return entry, named, nil
}

// DeviceSampler opens device 0 for toy generate's sampling with s's parameters, the kernel
// looked up in the model's entry on the device's target (the one cuda.Open picked for the
// device; the gate audits it again where it is not BuildTarget's). Where the device does not
// open, or the kernel does not resolve (a run the override let through), it says so on stderr
// and returns no device: sampling runs on the host.
func DeviceSampler(stderr io.Writer, ref kernelrt.Ref, s *sample.Sampler, allow bool) (*cuda.Device, *cuda.TokenSampler, error) {
	dev, err := cuda.Open(0)
	if err != nil {
		fmt.Fprintf(stderr, "toy generate: sampling on the host: %v\n", err)
		return nil, nil, nil
	}
	t := dev.Target()
	entry, _ := resolveEntry(io.Discard, t, ref)
	if t != BuildTarget() {
		if _, err := Gate(t, entry, nil, cuda.DeviceSampling(s.Params()), allow); err != nil {
			dev.Close()
			return nil, nil, err
		}
	}
	ts, err := dev.NewTokenSampler(entry, s)
	if err != nil {
		dev.Close()
		fmt.Fprintf(stderr, "toy generate: sampling on the host: %v\n", err)
		return nil, nil, nil
	}
	return dev, ts, nil
}
