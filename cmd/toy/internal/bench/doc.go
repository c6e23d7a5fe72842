// Package bench is toy bench and its benchmarks: matmul (matmul.go), model (model.go, with its
// memory-bandwidth line in dram.go), dram (dram.go: that line's DRAM measure on its own), train
// (train.go), finetune (finetune.go) and serve (serve.go, which starts toy serve's server
// in-process through cli.ServeFlags). Run, in bench.go, dispatches the benchmark named by its
// first argument; common.go holds what the benchmarks share: the weight types, random models of
// a preset's shape, the cores' peak, the resident memory and a training step's profile. See
// docs/PERFORMANCE.md.
package bench
