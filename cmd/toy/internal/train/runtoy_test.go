package train

import "github.com/toyml/toy/cmd/toy/internal/clitest"

// runToy runs this package's commands with args as toy does and returns what they wrote to
// standard output and standard error, and the exit status.
func runToy(args ...string) (stdout, stderr string, code int) {
	return clitest.Toy(map[string]clitest.Command{"train": Run, "train-vit": RunViT, "classify": RunClassify, "finetune": RunFinetune}, args...)
}
