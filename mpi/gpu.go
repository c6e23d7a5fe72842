package mpi

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// VisibleDevices is the CUDA variable that lists the GPUs a process sees.
const VisibleDevices = "CUDA_VISIBLE_DEVICES"

// PinGPU gives this rank one GPU of its machine, chosen by its local rank (its index among
// the ranks mpirun started on the machine, OMPI_COMM_WORLD_LOCAL_RANK): the local-th entry of
// CUDA_VISIBLE_DEVICES when that is set, else GPU number local-rank. It sets
// CUDA_VISIBLE_DEVICES to that GPU alone, so the rank sees it as device 0, and returns it. CUDA
// reads the variable once: call it before anything starts CUDA.
func PinGPU() (string, error) {
	gpu, err := localGPU(os.Getenv("OMPI_COMM_WORLD_LOCAL_RANK"), os.Getenv(VisibleDevices))
	if err != nil {
		return "", err
	}
	return gpu, os.Setenv(VisibleDevices, gpu)
}

// localGPU is PinGPU's choice for local rank local among the GPUs visible lists.
func localGPU(local, visible string) (string, error) {
	i, err := strconv.Atoi(local)
	if err != nil || i < 0 {
		return "", fmt.Errorf("mpi: OMPI_COMM_WORLD_LOCAL_RANK=%q: mpirun did not say which rank of its machine this is", local)
	}
	if visible == "" {
		return strconv.Itoa(i), nil
	}
	gpus := strings.Split(visible, ",")
	if i >= len(gpus) {
		return "", fmt.Errorf("mpi: local rank %d has no GPU: %s=%s lists %d; start at most one rank per GPU on each machine", i, VisibleDevices, visible, len(gpus))
	}
	return strings.TrimSpace(gpus[i]), nil
}
