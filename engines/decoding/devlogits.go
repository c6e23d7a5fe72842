package decoding

import "github.com/toyml/toy/ggml"

// SetDeviceLogits says whether Prompt and Next leave their logits in the graph's output tensor
// (LastLogits) instead of copying them to the host: on, they return nil, and a device kernel
// reads the logits in place (cuda.TokenSampler samples from them in a cuda build). Logits and
// Append copy theirs either way. Off by default.
func (d *Decoder) SetDeviceLogits(on bool) { d.deviceLogits = on }

// LastLogits is the output tensor of the decoder's last step: after Prompt or Next, the last
// token's logits (Vocab float32 values) in the backend's memory (device memory on a GPU),
// valid until the decoder's next step; nil before the first.
func (d *Decoder) LastLogits() *ggml.Tensor { return d.last }
