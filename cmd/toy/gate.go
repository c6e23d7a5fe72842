package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/toyml/toy/cuda"
	"github.com/toyml/toy/engines/kernelrt"
	"github.com/toyml/toy/engines/llama"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
)

// The kernel gate. Every command that runs a model resolves the kernel table's entry for it and
// audits the lookups of toy's own kernels that the run will make (kernelrt.Dispatch); an
// unresolved one refuses the run unless --dangerously-allow-unresolved-kernel-lookups. Only what
// the run dispatches is audited: toy generate's device sampling in a cuda build; perplexity,
// bench, train, finetune and serve run ggml's graphs (and ggml's optimizer) alone, so their
// gate passes whatever the table lacks.

// allowUnresolvedFlag is the gate's override.
const allowUnresolvedFlag = "dangerously-allow-unresolved-kernel-lookups"

// registerGate adds the gate's override to a command's flags.
func registerGate(fs *flag.FlagSet) *bool {
	return fs.Bool(allowUnresolvedFlag, false, "run even when a kernel lookup this command makes does not resolve (toy's own kernels: in a cuda build, toy generate's device sampling)")
}

// buildTarget is the kernel table's target the gate audits: compiledTarget, replaced by tests.
var buildTarget = compiledTarget

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

// modelRef is what the kernel table resolves a loaded model by.
func modelRef(m *llama.GGUFModel, path, modelName string) kernelrt.Ref {
	name, _ := m.Meta["general.name"].(string)
	return kernelrt.Ref{ModelType: m.Arch.Name, HiddenSize: m.Arch.DModel, Names: []string{path, modelName, name}}
}

// resolveEntry finds t's entry for ref. A model the table does not declare runs with toy's
// defaults (nil entry), after a note on stderr. named says whether the entry names the model
// (kernelrt.NamedBy), which it must to supply defaults (modelBehaviour, applyPreset).
func resolveEntry(stderr io.Writer, t *kernels.Target, ref kernelrt.Ref) (entry *kernels.Model, named bool) {
	if t == nil {
		return nil, false
	}
	entry, err := kernelrt.Resolve(t, ref)
	if err != nil {
		fmt.Fprintf(stderr, "toy: %v; using toy's defaults\n", err)
		return nil, false
	}
	return entry, kernelrt.NamedBy(entry, ref)
}

// gate audits the lookups of d, what the run dispatches, against entry's modules on t (a nil
// entry: the target's own modules) and refuses an unresolved one unless allow.
func gate(t *kernels.Target, entry *kernels.Model, d kernelrt.Dispatch, allow bool) (kernelrt.Report, error) {
	if t == nil {
		return kernelrt.Report{}, nil
	}
	if entry == nil {
		entry = &kernels.Model{Name: "(no entry: the target's own modules)"}
		for _, m := range t.Modules {
			entry.Modules = append(entry.Modules, m.ID)
		}
	}
	r := kernelrt.Audit(t, entry, kernelrt.DispatchNeeds(t.Backend, d))
	return r, r.Err(allow)
}

// gateModel resolves the entry of a command's model and runs the gate for a run that
// dispatches d.
func gateModel(stderr io.Writer, ref kernelrt.Ref, d kernelrt.Dispatch, allow bool) (entry *kernels.Model, named bool, err error) {
	t := buildTarget()
	entry, named = resolveEntry(stderr, t, ref)
	if _, err := gate(t, entry, d, allow); err != nil {
		return nil, false, err
	}
	return entry, named, nil
}

// gateFile runs the gate of a command that runs the GGUF model at path without loading it
// (bench, finetune), for a run that dispatches nothing of toy's own.
func gateFile(stderr io.Writer, path string, allow bool) error {
	ref, err := ggufRef(path, "")
	if err != nil {
		return err
	}
	_, _, err = gateModel(stderr, ref, kernelrt.Dispatch{}, allow)
	return err
}

// deviceSampler opens device 0 for toy generate's sampling with s's parameters, the kernel
// looked up in the model's entry on the device's target (the one cuda.Open picked for the
// device; the gate audits it again where it is not buildTarget's). Where the device does not
// open, or the kernel does not resolve (a run the override let through), it says so on stderr
// and returns no device: sampling runs on the host.
func deviceSampler(stderr io.Writer, ref kernelrt.Ref, s *sample.Sampler, allow bool) (*cuda.Device, *cuda.TokenSampler, error) {
	dev, err := cuda.Open(0)
	if err != nil {
		fmt.Fprintf(stderr, "toy generate: sampling on the host: %v\n", err)
		return nil, nil, nil
	}
	t := dev.Target()
	entry, _ := resolveEntry(io.Discard, t, ref)
	if t != buildTarget() {
		if _, err := gate(t, entry, cuda.DeviceSampling(s.Params()), allow); err != nil {
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
