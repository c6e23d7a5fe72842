// Package training trains transformers on ggml: a Model (New for llama, NewGPT2, NewViT, or
// FromGGUF for a full fine-tune of a loaded checkpoint) holds f32 weights laid out by the
// architecture's tensor table, and a Trainer builds the training step once — the shared
// forward pass (engines/transformer), cross-entropy over the head in chunks, the backward with
// toy's own GEMM gradients of every weight product, recompute of the first blocks, and one
// AdamW step per trained tensor — and reuses it, so memory stays flat however many steps run.
// An Evaluator runs the same forward without training; an Adapter trains LoRA matrices on a
// frozen decoding.GGUFModel and saves them as llama.cpp's LoRA GGUF; data-parallel replicas
// sum their gradients through a GradientReducer. Checkpoints (Model.Save, Load) are GGUF
// files llama.cpp can load; SaveState and LoadState keep the optimizer's moments for resumed
// runs. The ViT classifier trains on the same Trainer (NewClassifierTrainer).
//
// Training follows the ggml notes: split SwiGLU, unfused attention, the 7-float AdamW
// parameters, and the RMS_NORM_BACK/SOFT_MAX_BACK fix ggml.Graph.BuildBackward applies; see
// docs/TRAINING.md.
package training
