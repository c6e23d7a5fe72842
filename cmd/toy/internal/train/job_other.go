//go:build !cuda

package train

import (
	"errors"

	"github.com/toyml/toy/engines/recipes"
	"github.com/toyml/toy/mpi"
)

// onDevices is for cuda builds: others reduce in host memory over MPI.
func onDevices(*mpi.World) (recipes.Replicas, func() error, error) {
	return nil, nil, errors.New("toy: NCCL is for cuda builds")
}
