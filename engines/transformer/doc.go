// Package transformer is the one model description and forward pass that toy's training and
// decoding share. An Architecture says what a checkpoint's transformer is — the family
// (llama/SmolLM2, mistral-style sliding windows, qwen2, qwen3, gemma2, gemma3, qwen2moe,
// qwen3moe, gpt2, and the vit image classifier) as a set of choices: norm kind, positions
// (RoPE with its scalings, or learned), feed-forward shape, fused or split QKV, biases, tied
// output, tokens or image patches in, a language-model or class-token head. Its tensor table
// (Architecture.TensorTable) names, shapes and places every weight as llama.cpp's GGUF files
// do, so that one Weights struct serves the training model (engines/training) and the loaded
// checkpoint (engines/decoding), and one ForwardPass builds both the training graph and each
// decode step; they differ only in the hooks (how a weight multiplies, how queries attend).
// A DFlash drafter (engines/speculative) is the same forward pass over its own tensors and its
// target's embeddings, RoPE and head, its attention reading per block the keys and values of
// the target's projected hidden states too (Features, KeysValues, AttendBlocks).
//
// Tensor names and shapes follow llama.cpp's GGUF convention (token_embd.weight,
// blk.N.attn_q.weight, ...; ne[0] is a matrix's input width), so checkpoints load in llama.cpp
// and ollama. RoPE is mode 0 (adjacent pairs), as llama.cpp uses for the llama architecture.
//
// Besides: the llama, gpt2 and vit configurations generated from specs/engines (Config,
// Validate, ConfigFromGGUF, ArchitectureFromConfig, ArchitectureFromGPT2, ArchitectureFromViT),
// DetectArchitecture for a GGUF file's metadata and tensors, GGUF metadata helpers, and
// WriteRandomGGUF, which writes random models of any architecture for tests and benchmarks.
// transformertest holds the float64 reference of the forward pass the engines' tests compare
// against.
package transformer
