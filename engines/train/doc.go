// Package train holds the engine-independent pieces of a training loop that drives ggml:
// the AdamW hyper-parameters and the 7-float parameter tensor that ggml_opt_step_adamw
// reads, learning-rate schedules, dense one-hot label tensors for ggml_cross_entropy_loss
// (fixed-target and class labels), validated token and image batches, and a unigram
// baseline loss that a trained language model has to beat.
//
// Nothing here touches ggml itself: the package computes the host-side values (parameter
// floats, flattened inputs, label rows) that an engine copies into its input tensors.
//
// Conventions used throughout:
//   - Optimizer steps are 0-indexed: step 0 is the first parameter update.
//   - Label tensors are ggml [V, N] tensors in row-major Go slices: row i (the label of
//     position i) is labels[i*V : (i+1)*V], V contiguous floats summing to 1.
//   - Token batches are sequence-major: the flattened index of sequence b, position t is
//     b*T + t.
package train
