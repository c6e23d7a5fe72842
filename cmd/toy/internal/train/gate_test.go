package train

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
)

// TestKernelGateTraining runs every command that trains a model against cpu tables that fail
// it: one whose entries lack toy's dense copy (cont.cont_f32, which every training graph looks
// up) and RMS norm (which train -recipe dflash's target decoders look up), and one that declares
// no entry at all. train (llama, GPT-2 and ViT), finetune and train -recipe dflash refuse, naming
// the lookup and the override, and write no run; with
// --dangerously-allow-unresolved-kernel-lookups each trains (with ggml's operations where
// toy's did not resolve), and the audit line says what resolved. classify, whose graph looks
// up none of toy's kernels, refuses a model the build's table has no entry for.
func TestKernelGateTraining(t *testing.T) {
	if !ggml.CPUKernelsFast() {
		t.Skip("toy's CPU kernels are compiled scalar in this build: nothing is looked up")
	}
	model := clitest.TinyCheckpoint(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("func main() { return nil }\nif err != nil { return err }\n", 40)), 0o644))
	shapes := filepath.Join(dir, "shapes")
	require.NoError(t, data.WriteShapesFolder(shapes, 45, 16, 1))
	vitFlags := []string{"-held", "9", "-batch", "4", "-image-size", "16", "-patch-size", "4", "-channels", "1", "-d-model", "16",
		"-n-heads", "2", "-d-ff", "32", "-n-layers", "1", "-classes", "3"}

	runs := t.TempDir()
	commands := map[string]func() []string{
		"train": func() []string {
			return []string{"train", "-preset", "tiny", "-vocab", "300", "-c", "16", "-seq", "16", "-batch", "2", "-steps", "1",
				"-eval-batches", "1", "-sample", "0", "-text", text, "-runs", runs, "-t", "1"}
		},
		"train gpt2": func() []string {
			return []string{"train", "-arch", "gpt2", "-vocab", "300", "-c", "16", "-d-model", "32", "-n-heads", "4", "-d-ff", "64",
				"-n-layers", "1", "-seq", "16", "-batch", "2", "-steps", "1", "-eval-batches", "1", "-sample", "0", "-text", text, "-runs", runs, "-t", "1"}
		},
		"train vit": func() []string {
			return append([]string{"train", "-arch", "vit", "-data", shapes, "-steps", "1", "-t", "1", "-runs", runs}, vitFlags...)
		},
		"finetune": func() []string {
			return []string{"finetune", "-m", model, "-data", text, "-steps", "1", "-batch", "2", "-seq", "16", "-eval-batches", "1", "-runs", runs, "-t", "1"}
		},
		"train dflash": func() []string {
			return []string{"train", "-recipe", "dflash", "-target", model, "-data", text, "-steps", "1", "-seqs", "1", "-seq", "16",
				"-anchors", "2", "-layers", "1", "-t", "1", "-o", filepath.Join(dir, "drafter.gguf")}
		},
	}
	training := []string{"train", "train gpt2", "train vit", "finetune"}
	full := clitest.BuildCPU(t)
	for name, args := range commands {
		_, errOut, code := runToy(args()...)
		require.Equal(t, 0, code, "%s: %s", name, errOut)
		if slices.Contains(training, name) {
			assert.Regexp(t, `toy (train|finetune): kernels: target `+regexp.QuoteMeta(full.Name)+`, model (llama|gpt2|vit): \d+ resolved \(mul_mat_packed.mul_mat_packed\[f32\], soft_max.soft_max, cont.cont_f32`, errOut, name)
		}
	}
	noEntry := *full
	noEntry.Models = nil
	for table, tc := range map[string]struct {
		target *kernels.Target
		want   map[string]string
	}{
		"lacks modules": {clitest.WithoutModules(full, kernels.ModuleCPUCont, kernels.ModuleCPURmsNorm), map[string]string{
			"train": "unresolved kernel lookups: cont.cont_f32", "train gpt2": "unresolved kernel lookups: cont.cont_f32",
			"train vit": "unresolved kernel lookups: cont.cont_f32", "finetune": "unresolved kernel lookups: cont.cont_f32",
			"train dflash": "unresolved kernel lookups: rms_norm.rms_norm_mul"}},
		"lacks an entry": {&noEntry, nil},
	} {
		t.Run(table, func(t *testing.T) {
			clitest.WithCPUTarget(t, tc.target)
			before, err := os.ReadDir(runs)
			require.NoError(t, err)
			for name, args := range commands {
				_, errOut, code := runToy(args()...)
				assert.Equal(t, 1, code, "%s: %s", name, errOut)
				want := "declares no entry for this model"
				if tc.want != nil {
					want = tc.want[name]
				}
				assert.Contains(t, errOut, want, name)
				assert.Contains(t, errOut, cli.AllowUnresolvedFlag, name)
			}
			after, err := os.ReadDir(runs)
			require.NoError(t, err)
			assert.Equal(t, len(before), len(after), "a refused run leaves no run directory")
			for name, args := range commands {
				_, errOut, code := runToy(append(args(), "--"+cli.AllowUnresolvedFlag)...)
				require.Equal(t, 0, code, "%s: %s", name, errOut)
				assert.Contains(t, errOut, "UNRESOLVED", name)
			}
		})
	}

	vit, err := filepath.Glob(filepath.Join(runs, "*", "weights", "model.gguf"))
	require.NoError(t, err)
	var classifier string
	for _, p := range vit {
		if f, err := ggml.OpenGGUF(p); err == nil {
			if arch, _ := f.String("general.architecture"); arch == transformer.ViTArch {
				classifier = p
			}
			f.Close()
		}
	}
	require.NotEmpty(t, classifier)
	imgs, err := filepath.Glob(filepath.Join(shapes, "circle", "*.png"))
	require.NoError(t, err)
	require.NotEmpty(t, imgs)
	img := imgs[0]
	_, errOut, code := runToy("classify", "-m", classifier, img)
	require.Equal(t, 0, code, errOut)
	clitest.WithTarget(t, &noEntry)
	_, errOut, code = runToy("classify", "-m", classifier, img)
	assert.Equal(t, 1, code, errOut)
	assert.Contains(t, errOut, "declares no model for model type \"vit\"")
	assert.Contains(t, errOut, cli.AllowUnresolvedFlag)
	out, errOut, code := runToy("classify", "-m", classifier, "--"+cli.AllowUnresolvedFlag, img)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, img)
}
