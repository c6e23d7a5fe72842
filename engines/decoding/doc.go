// Package decoding runs GGUF checkpoints of any architecture engines/transformer describes,
// with any weight type ggml's CPU backend computes. OpenModel detects the Architecture and
// reads or memory-maps the weights (GGUFModel), applying LoRA adapters as llama.cpp does at run
// time and resolving the lookups of toy's own CPU kernels against the kernel table
// (KernelNeeds, UseKernels). A Decoder keeps a key/value cache and reuses its step graphs; a
// BatchDecoder runs several sequences per graph (engines/serve's continuous batching). Around
// them: hidden states and embeddings, the target captures a DFlash drafter reads, device-side
// logits, Perplexity, MergeLoRA and conversion between weight types, and Bench, which
// measures prompt processing and generation as llama-bench does.
//
// It imports only engines/transformer among the engines; training (engines/training) and
// speculative decoding (engines/speculative) build on it. decodingtest holds the loading
// helpers the tests of those packages share.
package decoding
