package kernelrt

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/generated/kernels"
)

// table is a target of the cuda source tree, its modules in the tree's order.
func table() *kernels.Target {
	return &kernels.Target{
		Name:    "test",
		Sources: kernels.ModuleCUDASampling.Tree(),
		Modules: []kernels.Module{
			{ID: kernels.ModuleCUDAAdamw, Name: "adamw", Dir: "common", Kernels: []string{"adamw_f32"}},
			{ID: kernels.ModuleCUDASampling, Name: "sampling", Dir: "common", Kernels: []string{"argmax_f32", "sample_f32"}},
		},
		Models: []kernels.Model{
			{Name: "llama", MatchNames: []string{"llama"}, Types: []kernels.ModelType{{ModelType: "llama"}},
				Modules: []kernels.ModuleID{kernels.ModuleCUDAAdamw}},
			{Name: "smollm2", MatchNames: []string{"smollm2", "smollm"}, Types: []kernels.ModelType{{ModelType: "llama", HiddenSize: 576}},
				Modules: []kernels.ModuleID{kernels.ModuleCUDAAdamw, kernels.ModuleCUDASampling}},
			{Name: "smol-tune", MatchNames: []string{"smollm2-tune"}, Types: []kernels.ModelType{{ModelType: "llama", HiddenSize: 576}},
				Modules: []kernels.ModuleID{kernels.ModuleCUDAAdamw, kernels.ModuleCUDASampling}},
			{Name: "qwen-a", MatchNames: []string{"qwen"}, Types: []kernels.ModelType{{ModelType: "qwen2"}}},
			{Name: "qwen-b", MatchNames: []string{"qwen"}, Types: []kernels.ModelType{{ModelType: "qwen2"}}},
			{Name: "gemma", Types: []kernels.ModelType{{ModelType: "gemma2", HiddenSize: 2304}}},
		},
	}
}

func TestModuleByID(t *testing.T) {
	tb := table()
	for i := range tb.Modules {
		assert.Same(t, &tb.Modules[i], tb.Module(tb.Modules[i].ID))
	}
	assert.Nil(t, (&kernels.Target{Name: "cpu"}).Module(kernels.ModuleCUDASampling), "another tree's id")
	assert.Nil(t, tb.Module(kernels.ModuleID(-1)))
	assert.Equal(t, "sampling.argmax_f32", kernels.KernelCUDASamplingArgmaxF32.String())
	assert.Equal(t, kernels.ModuleCUDASampling, kernels.KernelCUDASamplingArgmaxF32.Module())
}

func TestResolve(t *testing.T) {
	tb := table()
	for _, c := range []struct {
		name string
		ref  Ref
		want string // model name, or a regexp the error must match when it starts with "!"
	}{
		{"wildcard when no exact size is declared", Ref{ModelType: "llama", HiddenSize: 4096}, "llama"},
		{"the wildcard ignores names", Ref{ModelType: "llama", HiddenSize: 4096, Names: []string{"/m/SmolLM2.gguf"}}, "llama"},
		{"exact beats wildcard", Ref{ModelType: "llama", HiddenSize: 576, Names: []string{"SmolLM2-135M-Instruct"}}, "smollm2"},
		{"tie broken by match names, case-insensitive", Ref{ModelType: "llama", HiddenSize: 576, Names: []string{"", "x/SMOLLM2-TUNE-v1.gguf"}}, "smol-tune"},
		{"tie without a matching name", Ref{ModelType: "llama", HiddenSize: 576, Names: []string{"model.gguf"}}, `!declared exactly by smollm2 .* and smol-tune .*none of their match names occurs`},
		{"exact size hides the wildcard even when names do not match", Ref{ModelType: "llama", HiddenSize: 576, Names: []string{"llama"}}, `!declared exactly`},
		{"equal matches are ambiguous", Ref{ModelType: "qwen2", HiddenSize: 896, Names: []string{"qwen2.5-0.5b"}}, `!declared as a wildcard by qwen-a .* and qwen-b .*more than one matches equally well`},
		{"single exact candidate needs no names", Ref{ModelType: "gemma2", HiddenSize: 2304}, "gemma"},
		{"unknown type", Ref{ModelType: "gpt2", HiddenSize: 768}, `!declares no model for model type "gpt2" with hidden size 768 \(declared: gemma2/2304 \(gemma\), llama/\* \(llama\)`},
		{"declared size but not this one, no wildcard", Ref{ModelType: "gemma2", HiddenSize: 3584}, `!declares no model for model type "gemma2"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := Resolve(tb, c.ref)
			if pat, ok := strings.CutPrefix(c.want, "!"); ok {
				require.Error(t, err)
				assert.Regexp(t, regexp.MustCompile(pat), err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, m.Name)
		})
	}
}

func TestAudit(t *testing.T) {
	tb := table()
	needs := DispatchNeeds(kernels.BackendCUDA, EveryDispatch)
	require.Equal(t, Needs(kernels.KernelCUDASamplingArgmaxF32, kernels.KernelCUDASamplingSampleF32), needs)

	smol := &tb.Models[1]
	r := Audit(tb, smol, needs)
	assert.Equal(t, needs, r.Resolved)
	assert.Empty(t, r.Unresolved)
	require.NoError(t, r.Err(false))

	// A model without the sampling module resolves none of its kernels.
	r = Audit(tb, &tb.Models[0], needs)
	assert.Equal(t, needs, r.Unresolved)

	// llama's own sampling.cu replaced common's and dropped sample_f32: its effective modules
	// hold the replacement, which has argmax_f32 only.
	tb.Modules[1].Kernels = []string{"argmax_f32"}
	llama := &tb.Models[0]
	llama.Modules = []kernels.ModuleID{kernels.ModuleCUDAAdamw, kernels.ModuleCUDASampling}
	llama.Shadowed = []kernels.Shadowed{{Module: "sampling", Kernels: []string{"sample_f32"}}}
	r = Audit(tb, llama, needs)
	assert.Equal(t, []kernels.Shadowed{{Module: "sampling", Kernels: []string{"sample_f32"}}}, r.Shadowed)
	assert.Equal(t, Needs(kernels.KernelCUDASamplingSampleF32), r.Unresolved)
	err := r.Err(false)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrUnresolved))
	assert.Contains(t, err.Error(), "sampling.sample_f32")
	assert.Contains(t, err.Error(), "--dangerously-allow-unresolved-kernel-lookups")
	assert.NoError(t, r.Err(true), "the dangerous flag lets it run")
	assert.Contains(t, strings.Join(r.Lines(), "\n"), "module sampling: dropped by shadowing: sample_f32")

	// Declared expected-absent: not an error, and the reason is reported.
	llama.ExpectedAbsent = []kernels.ExpectedAbsent{{Lookup: "sampling.sample_f32", Reason: "greedy only"}}
	r = Audit(tb, llama, needs)
	assert.Empty(t, r.Unresolved)
	assert.Equal(t, []Absent{{Need{Kernel: kernels.KernelCUDASamplingSampleF32}, "greedy only"}}, r.ExpectedAbsent)
	assert.NoError(t, r.Err(false))

	// A target of another tree resolves nothing of cuda's.
	r = Audit(&kernels.Target{Name: "metal"}, smol, needs)
	assert.Equal(t, needs, r.Unresolved)

	// Nothing is looked up on cpu, nor by a run that samples on the host.
	assert.Empty(t, DispatchNeeds(kernels.BackendCPU, EveryDispatch))
	assert.Empty(t, DispatchNeeds(kernels.BackendCUDA, Dispatch{}))
	assert.Equal(t, Needs(kernels.KernelCUDASamplingArgmaxF32), DispatchNeeds(kernels.BackendCUDA, Dispatch{Argmax: true}))

	// Lookup names the module a kernel loads from: the model's replacement when it has one.
	mod, ok := Lookup(tb, llama, kernels.KernelCUDASamplingArgmaxF32)
	assert.True(t, ok)
	assert.Equal(t, kernels.ModuleCUDASampling, mod)
	_, ok = Lookup(tb, llama, kernels.KernelCUDASamplingSampleF32)
	assert.False(t, ok)
}

func TestArchCompatible(t *testing.T) {
	for _, c := range []struct {
		arch string
		dev  Capability
		ok   bool
	}{
		{"sm_90a", Capability{9, 0}, true},
		{"sm_90a", Capability{10, 0}, false},
		{"sm_90a", Capability{8, 9}, false},
		{"sm_90", Capability{9, 0}, true},
		{"sm_90", Capability{12, 1}, true},
		{"sm_90", Capability{8, 9}, false},
		{"sm_80", Capability{8, 6}, true},
		{"sm_80", Capability{7, 5}, false},
		{"sm_100f", Capability{10, 3}, true},
		{"sm_100f", Capability{10, 0}, true},
		{"sm_103f", Capability{10, 0}, false},
		{"sm_100f", Capability{12, 0}, false},
		{"sm_121f", Capability{12, 1}, true},
		{"sm_121a", Capability{12, 0}, false},
	} {
		ok, reason, err := ArchCompatible(c.arch, c.dev)
		require.NoError(t, err, c.arch)
		assert.Equal(t, c.ok, ok, "%s on %s", c.arch, c.dev)
		assert.Equal(t, c.ok, reason == "", "%s on %s: %s", c.arch, c.dev, reason)
	}
	for _, bad := range []string{"", "sm90", "sm_9", "gfx1151", "sm_90x", "sm_"} {
		_, _, err := ArchCompatible(bad, Capability{9, 0})
		assert.Error(t, err, bad)
	}
	c, suffix, err := ParseArch("sm_121f")
	require.NoError(t, err)
	assert.Equal(t, Capability{12, 1}, c)
	assert.Equal(t, byte('f'), suffix)
}

func TestPreflight(t *testing.T) {
	assert.NoError(t, Preflight(&kernels.Target{Name: "cpu"}, Capability{}), "an empty arch is skipped")
	h := &kernels.Target{Name: "cuda-sm90a", Arch: "sm_90a"}
	assert.NoError(t, Preflight(h, Capability{9, 0}))
	err := Preflight(h, Capability{8, 9})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "runs only on compute capability 9.0, not 8.9")
	_, err = ParseCapability("9")
	assert.Error(t, err)
	cc, err := ParseCapability("12.1")
	require.NoError(t, err)
	assert.Equal(t, Capability{12, 1}, cc)
}

// TestCompiledTables checks the real tables of this build: each names a target, its models
// resolve their own declarations, its expected-absent lookups are sorted, each once (a cpu
// table's are merged from those every cpu target shares and its own), and every kernel a table
// names is an entry of its embedded blob (.entry in PTX; a kernel function in Metal source).
func TestCompiledTables(t *testing.T) {
	ts := kernels.Compiled()
	require.NotEmpty(t, ts)
	for _, tb := range ts {
		for _, m := range tb.Models {
			for _, ty := range m.Types {
				size := ty.HiddenSize
				if size == 0 {
					size = 123457 // a size no entry declares, so the wildcard applies
				}
				got, err := Resolve(tb, Ref{ModelType: ty.ModelType, HiddenSize: size, Names: m.MatchNames})
				require.NoError(t, err, "%s/%s %v", tb.Name, m.Name, ty)
				assert.Equal(t, m.Name, got.Name, "%s: %v", tb.Name, ty)
			}
			for _, id := range m.Modules {
				require.NotNil(t, tb.Module(id), "%s/%s: module %s", tb.Name, m.Name, id)
			}
		}
		for i := 1; i < len(tb.ExpectedAbsent); i++ {
			assert.Less(t, tb.ExpectedAbsent[i-1].Lookup, tb.ExpectedAbsent[i].Lookup, "%s: expected-absent lookups", tb.Name)
		}
		for i := range tb.Modules {
			mod := &tb.Modules[i]
			assert.Same(t, mod, tb.Module(mod.ID), "%s: module %s is not where its id says", tb.Name, mod.Source)
			assert.Equal(t, mod.Name, mod.ID.Name())
			if tb.Backend == kernels.BackendCPU {
				assert.Empty(t, mod.Blob)
				continue
			}
			require.NotEmpty(t, mod.Blob, "%s: module %s has no blob", tb.Name, mod.Source)
			for _, k := range mod.Kernels {
				var re *regexp.Regexp
				if tb.Backend == kernels.BackendCUDA {
					re = regexp.MustCompile(`(?m)^\s*(\.visible\s+)?\.entry\s+` + regexp.QuoteMeta(k) + `\s*\(`)
				} else {
					re = regexp.MustCompile(`kernel\s+void\s+` + regexp.QuoteMeta(k) + `\s*\(`)
				}
				assert.Regexp(t, re, mod.Blob, "%s: kernel %s is not an entry of %s's blob", tb.Name, k, mod.Source)
			}
		}
	}
}

// TestNamedBy checks when an entry describes the model itself (a match name in its names) rather
// than its architecture or shape.
func TestNamedBy(t *testing.T) {
	tb := table()
	smol := &tb.Models[1]
	assert.True(t, NamedBy(smol, Ref{ModelType: "llama", HiddenSize: 576, Names: []string{"", "models/SmolLM2-135M.gguf"}}))
	assert.False(t, NamedBy(smol, Ref{ModelType: "llama", HiddenSize: 576, Names: []string{"ckpt/model.gguf", "", "toy"}}),
		"a hidden size alone names no model")
	assert.False(t, NamedBy(&tb.Models[5], Ref{ModelType: "gemma2", HiddenSize: 2304, Names: []string{"gemma.gguf"}}),
		"no match names: never named")
}

// TestCompiledBehaviours checks that no compiled entry declaring a whole architecture (a
// wildcard type) carries a [behaviour]: a BOS rule or a chat template is a fact about one
// model, and an architecture-wide entry would impose it on every model of that architecture.
func TestCompiledBehaviours(t *testing.T) {
	for _, tb := range kernels.Compiled() {
		for _, m := range tb.Models {
			if m.Behaviour == nil {
				continue
			}
			assert.NotEmpty(t, m.MatchNames, "%s/%s: a behaviour needs match names", tb.Name, m.Name)
			for _, ty := range m.Types {
				if ty.ModelType == "llama" {
					assert.NotZero(t, ty.HiddenSize, "%s/%s: a behaviour for every llama model", tb.Name, m.Name)
				}
			}
		}
	}
}

// TestAuditTypes audits lookups of toy's CPU operations on the cpu target this build compiled
// (cpu, or under toy_portable cpu-x86-64-v3 or cpu-arm64), as generated: a kernel resolves for
// the ggml types its toy:kernel line declares, a type it does not take is expected absent
// through the target's [*] entry (ggml runs it), a model's own entry takes precedence, a model
// without an entry resolves nothing, and a target without the [*] entry leaves the type
// unresolved.
func TestAuditTypes(t *testing.T) {
	cpu := BuildTarget(kernels.BackendCPU) // the cpu target this build compiled: cpu's, or a portable one's
	require.NotNil(t, cpu)
	m, err := Resolve(cpu, Ref{ModelType: "llama", HiddenSize: 4096, Names: []string{"x.gguf"}})
	require.NoError(t, err)
	cols := func(ty string) Need { return Need{Kernel: kernels.KernelCPUMulMatColsMulMatCols, Type: ty} }
	norm := Need{Kernel: kernels.KernelCPURmsNormRmsNormMul}
	needs := []Need{cols("q8_0"), cols("q4_K"), norm, cols("q8_0")}
	assert.Equal(t, "mul_mat_cols.mul_mat_cols[q4_K]", cols("q4_K").String())

	r := Audit(cpu, m, needs)
	assert.Equal(t, []Need{cols("q8_0"), norm}, r.Resolved, "each lookup once, in the order asked")
	require.Len(t, r.ExpectedAbsent, 1)
	assert.Equal(t, cols("q4_K"), r.ExpectedAbsent[0].Lookup)
	assert.Contains(t, r.ExpectedAbsent[0].Reason, "ggml's mul_mat runs")
	assert.Empty(t, r.Unresolved)
	assert.Contains(t, r.Summary(), "expected absent (ggml runs them): mul_mat_cols.mul_mat_cols[q4_K]")

	own := *m
	own.ExpectedAbsent = []kernels.ExpectedAbsent{{Lookup: "mul_mat_cols.mul_mat_cols[q4_K]", Reason: "the model's own reason"}}
	r = Audit(cpu, &own, needs)
	assert.Equal(t, "the model's own reason", r.ExpectedAbsent[0].Reason)

	r = Audit(cpu, nil, needs)
	assert.Equal(t, []Need{cols("q8_0"), cols("q4_K"), norm}, r.Unresolved)
	require.Error(t, r.Err(false))
	assert.Contains(t, r.Err(false).Error(), "declares no entry")

	bare := *cpu
	bare.ExpectedAbsent = nil
	r = Audit(&bare, m, needs)
	assert.Equal(t, []Need{cols("q4_K")}, r.Unresolved)
	assert.Equal(t, []Need{cols("q8_0"), norm}, Builtin(&bare, needs), "the build's own modules, whatever the entry")
	assert.Nil(t, Builtin(nil, needs))
}

// TestCheckCPUBuild: a portable cpu target describes a build whose kernels were compiled for
// its arch's vector unit and no other; the target of this machine's build (no arch) takes any;
// a GPU target is not a cpu build's; and Preflight leaves cpu targets, whose arch is no GPU's,
// alone.
func TestCheckCPUBuild(t *testing.T) {
	v3 := &kernels.Target{Name: "cpu-x86-64-v3", Backend: kernels.BackendCPU, Arch: "x86-64-v3"}
	require.NoError(t, CheckCPUBuild(v3, "avx2"))
	err := CheckCPUBuild(v3, "avx512")
	require.ErrorContains(t, err, "target cpu-x86-64-v3 (arch x86-64-v3) is compiled in, but toy's CPU kernels were compiled for avx512, not avx2")
	require.ErrorContains(t, err, "make portable=1")
	arm := &kernels.Target{Name: "cpu-arm64", Backend: kernels.BackendCPU, Arch: "armv8.2-a+dotprod+fp16"}
	require.NoError(t, CheckCPUBuild(arm, "scalar"))
	require.Error(t, CheckCPUBuild(arm, "avx2"))
	native := &kernels.Target{Name: "cpu", Backend: kernels.BackendCPU}
	for _, isa := range []string{"avx512", "avx2", "scalar"} {
		require.NoError(t, CheckCPUBuild(native, isa))
	}
	require.NoError(t, CheckCPUBuild(&kernels.Target{Name: "cuda-sm80", Backend: kernels.BackendCUDA, Arch: "sm_80"}, "scalar"))
	require.NoError(t, Preflight(v3, Capability{9, 0}), "a cpu arch is no GPU's")
}

// TestExpectedAbsentStarCoversUndeclaredTypes: a kernel's [*] expected-absent line (the cpu
// target's, for the types toy's kernels do not take) covers a type the kernel does not declare,
// and not one it declares: under an entry that lacks the kernel's module, a declared type's
// lookup is unresolved, so the gate refuses it.
func TestExpectedAbsentStarCoversUndeclaredTypes(t *testing.T) {
	cpu := BuildTarget(kernels.BackendCPU)
	require.NotNil(t, cpu)
	entry, err := Resolve(cpu, Ref{ModelType: "llama", HiddenSize: 64, Names: []string{"llama"}})
	require.NoError(t, err)
	declared := cpu.Module(kernels.ModuleCPUMulMatCols).Types["mul_mat_cols"]
	require.Contains(t, declared, "q8_0")
	q8 := Need{Kernel: kernels.KernelCPUMulMatColsMulMatCols, Type: "q8_0"}
	q4K := Need{Kernel: kernels.KernelCPUMulMatColsMulMatCols, Type: "q4_K"}
	require.NotContains(t, declared, q4K.Type)

	r := Audit(cpu, entry, []Need{q8, q4K})
	assert.Equal(t, []Need{q8}, r.Resolved)
	require.Len(t, r.ExpectedAbsent, 1)
	assert.Equal(t, q4K, r.ExpectedAbsent[0].Lookup)

	lacking := *entry
	lacking.Modules = nil
	for _, id := range entry.Modules {
		if id != kernels.ModuleCPUMulMatCols {
			lacking.Modules = append(lacking.Modules, id)
		}
	}
	r = Audit(cpu, &lacking, []Need{q8, q4K})
	assert.Empty(t, r.Resolved)
	assert.Equal(t, []Need{q8}, r.Unresolved, "a declared type the entry cannot resolve is not expected absent")
	require.Len(t, r.ExpectedAbsent, 1)
	assert.Equal(t, q4K, r.ExpectedAbsent[0].Lookup)
	assert.Error(t, r.Err(false))
}
