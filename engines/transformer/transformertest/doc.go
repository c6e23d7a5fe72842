// Package transformertest holds what the engines' tests share to check a transformer against
// an independent reference: float64 implementations of the forward pass (RefInfer, for every
// architecture transformer.Architecture describes, and RefModel, the llama training model's),
// tiny models of every architecture and variant (TinyArch, written by WriteTiny as random GGUF
// files), and small helpers (RandomTokens, RelErr, Rewrite for editing a GGUF file's header).
// Only tests import it.
package transformertest
