// Package bench is toy bench and its benchmarks: matmul and model (bench.go, with model's
// memory-bandwidth line in dram.go), train (train.go), finetune (finetune.go) and serve
// (serve.go, which starts toy serve's server in-process through cli.ServeFlags). Run
// dispatches the benchmark named by its first argument. See docs/PERFORMANCE.md.
package bench
