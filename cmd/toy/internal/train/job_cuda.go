//go:build cuda

package train

import (
	"github.com/toyml/toy/cuda"
	"github.com/toyml/toy/engines/recipes"
	"github.com/toyml/toy/mpi"
)

// onDevices gives a rank of a cuda build NCCL on its GPU (device 0 of the one it sees): the
// trainer then sums its gradients where ggml computes them, and waits for the device through
// the driver before the AdamW step.
func onDevices(w *mpi.World) (recipes.Replicas, func() error, error) {
	dev, err := cuda.Open(0)
	if err != nil {
		return nil, nil, err
	}
	dw, err := w.OnDevices(dev.Synchronize)
	if err != nil {
		dev.Close()
		return nil, nil, err
	}
	return dw, func() error {
		err := dw.Close()
		dev.Close()
		return err
	}, nil
}
