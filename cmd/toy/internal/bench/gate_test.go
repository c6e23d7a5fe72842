package bench

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
)

// TestKernelGateBench runs bench train, bench finetune (a LoRA mode and a full mode, each as
// the child process runs it) and bench matmul against cpu tables that fail them: one whose
// entries lack cont's and rms_norm's modules, one that declares no entry at all, and one that
// describes another build (an arch whose kernels are scalar). The training benches refuse the
// first two, naming the lookup and the override, and all three refuse the third; with
// --dangerously-allow-unresolved-kernel-lookups each runs, and the first step's loss is the
// full table's (ggml's operations compute the same model where toy's did not resolve). bench
// matmul, which looks up none of toy's kernels, runs under the first two.
func TestKernelGateBench(t *testing.T) {
	if !ggml.CPUKernelsFast() {
		t.Skip("toy's CPU kernels are compiled scalar in this build: nothing is looked up")
	}
	c, err := config.LlamaPreset("tiny")
	require.NoError(t, err)
	dir := t.TempDir()
	bases := map[string]string{}
	for _, typ := range []ggml.Type{ggml.F16, ggml.F32} {
		p := filepath.Join(dir, ggml.TypeName(typ)+".gguf")
		require.NoError(t, transformer.WriteRandomGGUF(p, transformer.ArchitectureFromConfig(c), typ, 1))
		bases[ggml.TypeName(typ)] = p
	}
	commands := map[string][]string{
		"bench train": {"bench", "train", "-preset", "tiny", "-seq", "16", "-steps", "1", "-t", "1", "-ceiling=false"},
		"bench finetune lora": {"bench", "finetune", "-preset", "tiny", "-mode", "lora-f16", "-base", bases["f16"],
			"-seq", "16", "-steps", "1", "-t", "1"},
		"bench finetune full": {"bench", "finetune", "-preset", "tiny", "-mode", "full-f32", "-base", bases["f32"],
			"-seq", "16", "-steps", "1", "-t", "1"},
		"bench matmul": {"bench", "matmul", "-types", "f32", "-shapes", "64x8x64", "-time", "1ms", "-nodes", "0", "-t", "1"},
	}
	training := []string{"bench train", "bench finetune lora", "bench finetune full"}
	// firstLoss is the loss of the first (warm-up) step a training bench printed.
	firstLoss := func(name, out string) float64 {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			switch {
			case name == "bench train" && len(f) >= 3 && f[0] == "tiny" && f[1] == "0":
				l, err := strconv.ParseFloat(f[2], 64)
				require.NoError(t, err, line)
				return l
			case strings.HasPrefix(name, "bench finetune") && len(f) >= 5 && f[1] == "step" && f[2] == "0:":
				l, err := strconv.ParseFloat(strings.TrimSuffix(f[4], ","), 64)
				require.NoError(t, err, line)
				return l
			}
		}
		t.Fatalf("%s printed no first step:\n%s", name, out)
		return 0
	}
	full := clitest.BuildCPU(t)
	want := map[string]float64{}
	for name, args := range commands {
		out, errOut, code := runToy(args...)
		require.Equal(t, 0, code, "%s: %s", name, errOut)
		if name == "bench matmul" {
			assert.Contains(t, errOut, "toy bench matmul: kernels: target "+full.Name+": ggml's operations alone, none of toy's kernels looked up")
			continue
		}
		assert.Regexp(t, `toy bench (train|finetune): kernels: target `+regexp.QuoteMeta(full.Name)+`, model llama: \d+ resolved \(mul_mat_packed.mul_mat_packed\[f32\]`, errOut, name)
		want[name] = firstLoss(name, out)
	}

	noEntry := *full
	noEntry.Models = nil
	other := *full
	other.Name, other.Arch = "cpu-arm64", "armv8.2-a+dotprod+fp16" // whose kernels are scalar
	for table, tc := range map[string]struct {
		target  *kernels.Target
		refused []string // the commands that refuse
		want    string   // what their refusal says
	}{
		"lacks modules":   {clitest.WithoutModules(full, kernels.ModuleCPUCont, kernels.ModuleCPURmsNorm), training, "unresolved kernel lookups: cont.cont_f32"},
		"lacks an entry":  {&noEntry, training, "declares no entry for this model"},
		"another build's": {&other, append([]string{"bench matmul"}, training...), "toy's CPU kernels were compiled for " + ggml.CPUKernelsISA()},
	} {
		t.Run(table, func(t *testing.T) {
			clitest.WithCPUTarget(t, tc.target)
			for name, args := range commands {
				refused := false
				for _, r := range tc.refused {
					refused = refused || r == name
				}
				out, errOut, code := runToy(args...)
				if !refused {
					require.Equal(t, 0, code, "%s: %s", name, errOut)
					continue
				}
				assert.Equal(t, 1, code, "%s: %s", name, errOut)
				assert.Contains(t, errOut, tc.want, name)
				assert.Contains(t, errOut, cli.AllowUnresolvedFlag, name)
				assert.NotContains(t, out, "step 1", name)

				out, errOut, code = runToy(append(args, "--"+cli.AllowUnresolvedFlag)...)
				require.Equal(t, 0, code, "%s: %s", name, errOut)
				if table != "another build's" || name == "bench matmul" {
					assert.Contains(t, errOut, "UNRESOLVED", name)
				}
				if w, ok := want[name]; ok {
					assert.InDelta(t, w, firstLoss(name, out), 1e-3, "%s: the first step's loss with ggml's operations", name)
				}
			}
		})
	}
}
