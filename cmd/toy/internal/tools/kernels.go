package tools

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/cuda"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// RunKernels is `toy kernels [flags] [GGUF]`: the compiled-in kernel targets, their modules and
// kernels and the models they declare; given a GGUF file, the entry that resolves for it and the
// start-up audit of its kernel lookups.
func RunKernels(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kernels", flag.ContinueOnError)
	modelName := fs.String("model-name", "", "a name that breaks ties between model entries (matched against their match_names)")
	allow := fs.Bool(cli.AllowUnresolvedFlag, false, "report unresolved kernel lookups instead of failing")
	cc := fs.String("compute-capability", "", "check each GPU target's arch against this compute capability (e.g. 9.0); default: device 0's, in a cuda build on a machine with one")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: toy kernels [flags] [model.gguf]\n\n"+
			"Lists the kernel targets compiled into this build (cpu always; cuda and metal with their build\n"+
			"tags), their modules, kernels and model declarations. Given a GGUF file it resolves the model\n"+
			"entry (general.architecture, <arch>.embedding_length, general.name) and audits the kernel\n"+
			"lookups its decoders make on the CPU (toy's own CPU operations, for its weights' types and an\n"+
			"f16 cache; -fa and -ctk change the cache's) and, in a cuda build, toy generate's device sampling.\n\n")
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return cli.Usagef("at most one GGUF file")
	}
	var dev *kernelrt.Capability
	if *cc != "" {
		c, err := kernelrt.ParseCapability(*cc)
		if err != nil {
			return cli.Usagef("-compute-capability: %w", err)
		}
		dev = &c
	}
	if dev == nil && ggml.BackendKind == "cuda" {
		// A cuda build asks the driver: the preflight then judges the real device.
		if d, err := cuda.Open(0); err != nil {
			fmt.Fprintf(stdout, "no CUDA device for the arch preflight: %v\n\n", err)
		} else {
			c := d.Capability()
			dev = &c
			fmt.Fprintf(stdout, "device 0: %s, compute capability %s, %d MiB, driver CUDA %d.%d; toy's kernels run from target %s\n\n",
				d.Name(), c, d.Memory()>>20, d.DriverVersion()/1000, d.DriverVersion()%1000/10, d.Target().Name)
			d.Close()
		}
	}
	// A GGUF named is read before anything is printed: a bad file is an error and nothing else.
	var ref kernelrt.Ref
	var cpuNeeds []kernelrt.Need
	if fs.NArg() == 1 {
		var err error
		if ref, err = ggufRef(fs.Arg(0), *modelName); err != nil {
			return err
		}
		if cpuNeeds, err = decoderNeeds(fs.Arg(0), ref.ModelType); err != nil {
			fmt.Fprintf(stdout, "(no audit of toy's CPU operations: %v)\n\n", err)
		}
	}
	targets := kernels.Compiled()
	for _, t := range targets {
		printTarget(stdout, t)
	}
	for _, twin := range []func() (*kernels.Target, error){kernels.CUDASm90a, kernels.CUDASm80, kernels.Metal} {
		if _, err := twin(); err != nil {
			fmt.Fprintf(stdout, "(%v)\n", err)
			break
		}
	}
	var failed []string
	if dev != nil {
		fmt.Fprintf(stdout, "\narch preflight for compute capability %s:\n", dev)
		for _, t := range targets {
			if t.Arch == "" {
				fmt.Fprintf(stdout, "  %s: skipped (no arch)\n", t.Name)
				continue
			}
			if t.Backend == kernels.BackendCPU {
				fmt.Fprintf(stdout, "  %s: skipped (%s is the instruction set this build compiled for)\n", t.Name, t.Arch)
				continue
			}
			if err := kernelrt.Preflight(t, *dev); err != nil {
				fmt.Fprintf(stdout, "  %s: %v\n", t.Name, err)
			} else {
				fmt.Fprintf(stdout, "  %s: %s runs on %s\n", t.Name, t.Arch, dev)
			}
		}
	}
	if fs.NArg() == 0 {
		return nil
	}
	fmt.Fprintf(stdout, "\n%s: model type %s, hidden size %d, names %q\n", fs.Arg(0), ref.ModelType, ref.HiddenSize, ref.Names)
	for _, t := range targets {
		m, err := kernelrt.Resolve(t, ref)
		if err != nil {
			fmt.Fprintf(stdout, "  %s: %v\n", t.Name, err)
			failed = append(failed, t.Name)
			continue
		}
		fmt.Fprintf(stdout, "  %s: resolves to %s\n", t.Name, m.Name)
		printModel(stdout, "    ", t, m)
		needs := kernelrt.DispatchNeeds(t.Backend, kernelrt.EveryDispatch)
		if t.Backend == kernels.BackendCPU {
			needs = cpuNeeds
		}
		r := kernelrt.Audit(t, m, needs)
		if len(r.Lines()) == 0 {
			fmt.Fprintf(stdout, "    audit: no kernel lookups (ggml's kernels run this model)\n")
		}
		for _, l := range r.Lines() {
			fmt.Fprintf(stdout, "    audit: %s\n", l)
		}
		if err := r.Err(*allow); err != nil {
			fmt.Fprintf(stdout, "    %v\n", err)
			failed = append(failed, t.Name)
		} else if len(r.Unresolved) > 0 {
			fmt.Fprintf(stdout, "    audit: %d unresolved lookups allowed by --dangerously-allow-unresolved-kernel-lookups\n", len(r.Unresolved))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("kernels: %s: no usable entry on %s", fs.Arg(0), strings.Join(failed, ", "))
	}
	return nil
}

func printTarget(w io.Writer, t *kernels.Target) {
	arch := "no arch"
	if t.Arch != "" {
		arch = fmt.Sprintf("arch %s (%s)", t.Arch, t.ArchBase)
	}
	fmt.Fprintf(w, "target %s: backend %s, %s\n", t.Name, t.Backend, arch)
	if t.Description != "" {
		fmt.Fprintf(w, "  %s\n", t.Description)
	}
	if t.Backend == kernels.BackendCPU {
		fmt.Fprintf(w, "  toy's CPU kernels in this build: %s\n", ggml.CPUKernelsISA())
		if err := kernelrt.CheckCPUBuild(t, ggml.CPUKernelsISA()); err != nil {
			fmt.Fprintf(w, "  %v\n", err)
		}
	}
	if len(t.Link) > 0 {
		fmt.Fprintf(w, "  links: %s\n", strings.Join(t.Link, "; "))
	}
	if len(t.Modules) == 0 {
		fmt.Fprintf(w, "  modules: none\n")
	}
	for _, m := range t.Modules {
		from := ""
		if m.Compiler != "" {
			from = ", built by " + m.Compiler
			if m.PTXTarget != "" {
				from += " for " + m.PTXTarget
			}
		}
		var ks []string
		for _, k := range m.Kernels {
			if ts := m.Types[k]; len(ts) > 0 {
				k += " [" + strings.Join(ts, " ") + "]"
			}
			ks = append(ks, k)
		}
		size := ""
		if m.Blob != "" {
			size = fmt.Sprintf(", %d bytes", len(m.Blob))
		}
		fmt.Fprintf(w, "  module %s (%s%s%s): %s\n", m.Name, m.Source, from, size, strings.Join(ks, ", "))
	}
	for _, a := range t.ExpectedAbsent {
		fmt.Fprintf(w, "  expected absent for every model: %s (%s)\n", a.Lookup, a.Reason)
	}
	for i := range t.Models {
		m := &t.Models[i]
		var types []string
		for _, ty := range m.Types {
			if ty.HiddenSize == 0 {
				types = append(types, ty.ModelType+"/*")
			} else {
				types = append(types, fmt.Sprintf("%s/%d", ty.ModelType, ty.HiddenSize))
			}
		}
		fmt.Fprintf(w, "  model %s: %s; match names %s\n", m.Name, strings.Join(types, ", "), strings.Join(m.MatchNames, ", "))
	}
}

func printModel(w io.Writer, indent string, t *kernels.Target, m *kernels.Model) {
	for _, pr := range m.Presets {
		p := config.DefaultSampling() // the keys a preset leaves out keep the defaults
		pr.Sampling.Apply(&p)
		fmt.Fprintf(w, "%ssampling %s: temperature %g, top-k %d, top-p %g, min-p %g, repeat penalty %g (last %d), seed %d\n",
			indent, pr.Name, p.Temperature, p.TopK, p.TopP, p.MinP, p.RepeatPenalty, p.RepeatLastN, p.Seed)
	}
	if b := m.Behaviour; b != nil {
		fmt.Fprintf(w, "%sbehaviour: add BOS %v, add EOS %v, chat template %q, stop %q\n", indent, b.AddBOS, b.AddEOS, b.ChatTemplate, b.Stop)
	}
	if d := m.DFlash; d != nil {
		fmt.Fprintf(w, "%sdflash: draft %s, gamma %d, window %d, mask token %d, target layers %v\n",
			indent, d.DraftModel, d.Gamma, d.WindowSize, d.MaskTokenID, d.TargetLayerIDs)
	}
	var mods []string
	for _, id := range m.Modules {
		if mod := t.Module(id); mod != nil {
			mods = append(mods, mod.Source)
		}
	}
	if len(mods) > 0 {
		fmt.Fprintf(w, "%smodules: %s\n", indent, strings.Join(mods, ", "))
	}
}

// ggufRef reads what resolution needs from a GGUF file's metadata.
func ggufRef(path, modelName string) (kernelrt.Ref, error) {
	f, err := ggml.OpenGGUF(path)
	if err != nil {
		return kernelrt.Ref{}, fmt.Errorf("kernels: %w", err)
	}
	defer f.Close()
	arch, err := f.String("general.architecture")
	if err != nil {
		return kernelrt.Ref{}, fmt.Errorf("kernels: %s: no general.architecture: %w", path, err)
	}
	ref := kernelrt.Ref{ModelType: arch, Names: []string{path, modelName}}
	if v, err := f.Value(arch + ".embedding_length"); err == nil {
		switch x := v.(type) {
		case uint32:
			ref.HiddenSize = int(x)
		case int32:
			ref.HiddenSize = int(x)
		case uint64:
			ref.HiddenSize = int(x)
		case int64:
			ref.HiddenSize = int(x)
		default:
			return ref, fmt.Errorf("kernels: %s: %s.embedding_length is a %T, not an integer", path, arch, v)
		}
	}
	if name, err := f.String("general.name"); err == nil {
		ref.Names = append(ref.Names, name)
	}
	return ref, nil
}

// decoderNeeds lists the lookups of toy's CPU operations that the decoders of the GGUF model at
// path make with an f16 cache outside flash attention (toy generate's defaults): none for an
// architecture toy does not decode (a ViT classifier). The weights are memory-mapped, not read.
func decoderNeeds(path, arch string) ([]kernelrt.Need, error) {
	if !slices.Contains(transformer.SupportedArchitectures(), arch) {
		return nil, nil
	}
	m, err := decoding.OpenModel(path, decoding.ModelOptions{Threads: 1, Mmap: true})
	if err != nil {
		return nil, fmt.Errorf("kernels: %w", err)
	}
	defer m.Close()
	return m.KernelNeeds(decoding.KVF16, false), nil
}
