package recipes

import (
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/kernelrt"
)

// KernelGate is the boot gate of a training run (toy train and finetune run cmd/toy's): the
// recipe calls it once its model is built, before the run writes its start, with what the
// kernel table resolves the model by (ref: its architecture, width and, for a fine-tune, the
// base's file and name) and the lookups of toy's CPU operations the run's graphs make
// (training.TrainNeeds). It returns the lookups that resolved, which the run's Trainer and
// Evaluators then run toy's kernels for (training.WithKernels; ggml's operations for the others),
// or an error that stops the run. A nil gate resolves every lookup the build's own cpu table
// resolves.
type KernelGate func(ref kernelrt.Ref, needs []kernelrt.Need) (resolved []kernelrt.Need, err error)

// Gated is m, of architecture a (names: the files and names the table may match), with the
// kernels g resolved for it (m itself when g is nil).
func Gated(g KernelGate, a *transformer.Architecture, names []string, m training.Trainable) (training.Trainable, error) {
	if g == nil {
		return m, nil
	}
	resolved, err := g(kernelrt.Ref{ModelType: a.Name, HiddenSize: a.DModel, Names: names}, training.TrainNeeds(m))
	if err != nil {
		return nil, err
	}
	return training.WithKernels(m, resolved), nil
}
