package decoding

import (
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

// MatrixBytesPerToken is the bytes of weights the decoder multiplies for each token it
// generates: every projection of every block (attention and feed-forward; of a mixture of
// experts, the router and the experts' tensors scaled by the experts used over the experts),
// and the output head (the token embeddings when tied), each its ggml byte size. Norms and
// biases, and the one embedding row a token gathers, are left out. Generation reads each once
// per token, so it is the memory traffic a token's products cannot avoid.
func (m *GGUFModel) MatrixBytesPerToken() int64 {
	var n float64
	for _, s := range m.Arch.TensorTable(&transformer.Weights{}) {
		if !s.Role.IsMatrix() {
			continue
		}
		t := m.mapped.Tensor(s.Name)
		if t == nil {
			continue
		}
		share := 1.0
		if len(s.Ne) == 3 && m.Arch.NExperts > 0 { // [in, out, experts]
			share = float64(m.Arch.NExpertsUsed) / float64(m.Arch.NExperts)
		}
		n += share * float64(t.Bytes())
	}
	if m.Output == nil && m.TokEmbd != nil {
		n += float64(m.TokEmbd.Bytes())
	}
	return int64(n)
}

// KVBytesRead is the mean bytes of key/value cache of type kv that each of tokens generated
// tokens reads after depth tokens: the token at position p attends to the keys and values of
// positions 0..p (the last SlidingWindow of them in a sliding-window layer), each layer's keys
// NKVHeads·HeadDimK and values NKVHeads·HeadDimV elements a position, in kv's row size.
func (m *GGUFModel) KVBytesRead(kv KVCacheType, depth, tokens int) float64 {
	a := &m.Arch
	k, errK := ggml.RowSize(kv.ggmlType(), int64(a.NKVHeads*a.HeadDimK))
	v, errV := ggml.RowSize(kv.ggmlType(), int64(a.NKVHeads*a.HeadDimV))
	if errK != nil || errV != nil || tokens <= 0 { // a q8_0 cache of heads not of 32: none opens
		return 0
	}
	var total float64
	for p := depth; p < depth+tokens; p++ {
		for il := range a.NLayers {
			seen := p + 1
			if a.IsSliding(il) {
				seen = min(seen, a.SlidingWindow)
			}
			total += float64(seen) * float64(k+v)
		}
	}
	return total / float64(tokens)
}
