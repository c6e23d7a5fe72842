//go:build cuda

package ggml

const gpuKind = "cuda"
