//go:build metal && !cuda

package ggml

const gpuKind = "metal"
