package engines

// Transformer is what a family of transformers chooses on toy's one core: what the model
// reads, how positions enter, the norm, the feed-forward block, which projections have
// biases, the optional norms and scales, sliding windows, experts and the head. Each family is
// a preset, named as its checkpoints' general.architecture; the shape (widths, heads, layers,
// RoPE's base, epsilons, an image model's image and classes) comes from Llama's and Family's
// keys, and the fields of Llama, the one shape, name in for tags the choices they apply under
// (toy train's Gpt2 and Vit are its views for those families). A file's general.architecture implies these choices, so none is stored; the
// architecture the trainer, the decoder and the tensor table build from
// (engines/transformer.Architecture) is the family's preset with the file's shape. Adding a
// family is a preset here, plus whatever it needs that no field says (a new kind of block).
// dflash is a DFlash drafter (engines/speculative): llama-style blocks over a target's hidden
// states, whose embeddings, RoPE and head are the target's; its tensors are the tensor table's
// and its forward pass the core's, whose attention also reads, per block, the keys and values
// of the target's projected context rows before the block's own.
//
//kernelgen:config noflags
//kernelgen:preset llama sliding_pattern=0 norm_top_k=true
//kernelgen:preset qwen2 rope_mode=neox qkv_bias=true
//kernelgen:preset qwen3 rope_mode=neox qk_norm=true
//kernelgen:preset qwen2moe rope_mode=neox qkv_bias=true experts=true shared_expert=true
//kernelgen:preset qwen3moe rope_mode=neox qk_norm=true experts=true norm_top_k=true
//kernelgen:preset gemma2 rope_mode=neox ffn=geglu embed_scale=true post_norms=true sliding_pattern=2
//kernelgen:preset gemma3 rope_mode=neox ffn=geglu embed_scale=true post_norms=true qk_norm=true sliding_pattern=6 local_rope_base=10000
//kernelgen:preset gpt2 positions=learned norm=layer ffn=gelu fused_qkv=true qkv_bias=true all_biases=true
//kernelgen:preset vit input=patches head=class_token positions=learned norm=layer ffn=gelu fused_qkv=true qkv_bias=true all_biases=true
//kernelgen:preset dflash input=features
type Transformer struct {
	// Input is what the model reads: token ids (token_embd), image patches, projected by
	// patch_embd and preceded by a learned class token (cls_token), or a target model's hidden
	// states, projected to the width (fc) and normalised (hidden_norm), beside the target's
	// token embeddings (a DFlash drafter, whose blocks attend to those rows beside their own).
	Input string `json:"input" gguf:"-" default:"tokens" enum:"tokens,patches,features"`
	// Positions is how positions enter: rotary embeddings of queries and keys, or a learned
	// embedding of each absolute position (position_embd) added to the input.
	Positions string `json:"positions" gguf:"-" default:"rope" enum:"rope,learned"`
	// RopeMode is RoPE's pairing: normal (adjacent pairs; llama, whose converter permutes Q
	// and K for it) or neox (halves).
	RopeMode string `json:"rope_mode" gguf:"-" default:"normal" enum:"normal,neox"`
	// Norm is the normalisation: RMSNorm with a scale, or LayerNorm with a scale and a bias.
	Norm string `json:"norm" gguf:"-" default:"rms" enum:"rms,layer"`
	// FFN is the feed-forward block: swiglu (down(silu(gate·x)⊙up·x)), geglu (gelu_tanh in
	// silu's place) or gelu (down(gelu_tanh(up·x)), no gate).
	FFN string `json:"ffn" gguf:"-" default:"swiglu" enum:"swiglu,geglu,gelu"`
	// FusedQKV makes queries, keys and values with one projection (attn_qkv).
	FusedQKV bool `json:"fused_qkv" gguf:"-" default:"false"`
	// QKVBias requires biases on the query, key and value projections (without it a file
	// may still have them: attn_q.bias decides).
	QKVBias bool `json:"qkv_bias" gguf:"-" default:"false"`
	// AllBiases puts biases on the attention output and both feed-forward projections too.
	AllBiases bool `json:"all_biases" gguf:"-" default:"false"`
	// QKNorm requires per-head RMS norms of queries and keys before RoPE (attn_q_norm,
	// attn_k_norm; without it attn_q_norm in a file decides).
	QKNorm bool `json:"qk_norm" gguf:"-" default:"false"`
	// PostNorms adds RMS norms of the attention and feed-forward outputs before they join the
	// residual stream (post_attention_norm, post_ffw_norm).
	PostNorms bool `json:"post_norms" gguf:"-" default:"false"`
	// EmbedScale multiplies the token embeddings by √d_model.
	EmbedScale bool `json:"embed_scale" gguf:"-" default:"false"`
	// SlidingPattern says which layers use the file's sliding window: -1 none (the key is
	// ignored), 0 every layer, n layer i when i mod n < n-1.
	SlidingPattern int `json:"sliding_pattern" gguf:"-" default:"-1" min:"-1" max:"1024"`
	// LocalRopeBase is the RoPE base of sliding-window layers, which do not scale positions
	// (0: the global base and scaling).
	LocalRopeBase float32 `json:"local_rope_base" gguf:"-" default:"0" min:"0"`
	// Experts requires a mixture-of-experts feed-forward block (without it, experts in a file
	// with a router are used as mixtral's).
	Experts bool `json:"experts" gguf:"-" default:"false"`
	// SharedExpert adds the file's always-on shared expert, gated by a sigmoid.
	SharedExpert bool `json:"shared_expert" gguf:"-" default:"false"`
	// NormTopK renormalises the chosen experts' weights to sum to 1.
	NormTopK bool `json:"norm_top_k" gguf:"-" default:"false"`
	// Head is what the output head computes: next-token logits at every position (lm), or
	// class logits from the class token through output.weight and output.bias (class_token).
	Head string `json:"head" gguf:"-" default:"lm" enum:"lm,class_token"`
}
