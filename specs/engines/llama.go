// Package engines declares the typed parameters of toy's model engines. cmd/kernelgen turns each
// struct marked //kernelgen:config into a runtime config type in generated/config, with
// defaults, presets, Validate, GGUF conversion and JSON. See docs/SPECS.md.
package engines

// Llama is the shape of toy's transformers, declared once for every family toy trains: its
// widths, heads, layers, positions, norms' epsilons, an image model's input and classes, and
// the options of initialising it. Each field's for tag names the Transformer choices it applies
// under (RoPE's fields positions=rope, rms_eps norm=rms, layer_norm_eps norm=layer, n_kv_heads
// where queries, keys and values are not one fused projection, the image's fields
// input=patches), so a family's parameters, flags, presets and validation follow from its
// Transformer preset: this type holds the llama family's (a LLaMA/SmolLM2 sequence model), and
// the views Gpt2 and Vit hold gpt2's and vit's. GGUF keys follow llama.cpp, so checkpoints load
// in llama.cpp and ollama; options only toy uses are stored under toy.*. {arch} in a key is the
// file's general.architecture: the decoder reads these keys of every llama-family GGUF (llama,
// qwen2, qwen3, gemma2, gemma3 and their MoE variants) through this one description, and the
// other families' keys beside them through Family's (gguf:"-" here: declared there, once).
//
//kernelgen:config
//kernelgen:shape Transformer llama
//kernelgen:preset smollm2-135m vocab=49152 d_model=576 d_ff=1536 n_heads=9 n_kv_heads=3 n_layers=30 context=2048 rope_base=100000 rms_eps=1e-5 tied_output=true
//kernelgen:preset smollm2-360m vocab=49152 d_model=960 d_ff=2560 n_heads=15 n_kv_heads=5 n_layers=32 context=2048 rope_base=100000 rms_eps=1e-5 tied_output=true
//kernelgen:preset smollm2-1.7b vocab=49152 d_model=2048 d_ff=8192 n_heads=32 n_kv_heads=32 n_layers=24 context=2048 rope_base=130000 rms_eps=1e-5 tied_output=true
//kernelgen:preset llama3.2-1b vocab=128256 d_model=2048 d_ff=8192 n_heads=32 n_kv_heads=8 n_layers=16 context=8192 rope_base=500000 rms_eps=1e-5 tied_output=true
//kernelgen:preset demo vocab=2048 d_model=192 d_ff=512 n_heads=6 n_kv_heads=2 n_layers=4 context=256 rope_base=10000 rms_eps=1e-5 tied_output=true
//kernelgen:preset tiny vocab=64 d_model=32 d_ff=64 n_heads=4 n_kv_heads=2 n_layers=2 context=32 rope_base=10000 rms_eps=1e-5 tied_output=true
type Llama struct {
	// ImageSize is the side of the square input image in pixels.
	ImageSize int `json:"image_size" gguf:"-" default:"224" min:"1" max:"4096" multipleof:"patch_size" for:"input=patches"`
	// PatchSize is the side of a square patch in pixels; the image has (image_size/patch_size)² patches.
	PatchSize int `json:"patch_size" gguf:"-" default:"16" min:"1" max:"256" for:"input=patches"`
	// Channels is the number of colour channels: 1 (grayscale) or 3 (RGB).
	Channels int `json:"channels" gguf:"-" default:"3" min:"1" max:"4" for:"input=patches"`
	// Vocab is the number of tokens.
	Vocab int `json:"vocab" gguf:"{arch}.vocab_size" default:"49152" min:"2" max:"1048576" for:"head=lm"`
	// DModel is the width of the residual stream (embedding length).
	DModel int `json:"d_model" gguf:"{arch}.embedding_length" default:"576" min:"1" max:"65536" multipleof:"n_heads" required:"true"`
	// DFF is the hidden width of the SwiGLU feed-forward block.
	//
	//kernelgen:doc gpt2 DFF is the hidden width of the GELU feed-forward block (4·d_model in GPT-2).
	//kernelgen:doc vit DFF is the hidden width of the GELU MLP.
	DFF int `json:"d_ff" gguf:"{arch}.feed_forward_length" default:"1536" min:"1" max:"262144"`
	// NHeads is the number of attention (query) heads.
	//
	//kernelgen:doc gpt2 NHeads is the number of attention heads.
	//kernelgen:doc vit NHeads is the number of attention heads.
	NHeads int `json:"n_heads" gguf:"{arch}.attention.head_count" default:"9" min:"1" max:"1024" multipleof:"n_kv_heads" required:"true"`
	// NKVHeads is the number of key/value heads (grouped-query attention when fewer than NHeads).
	NKVHeads int `json:"n_kv_heads" gguf:"{arch}.attention.head_count_kv" default:"3" min:"1" max:"1024" for:"fused_qkv=false"`
	// NLayers is the number of transformer blocks.
	NLayers int `json:"n_layers" gguf:"{arch}.block_count" default:"30" min:"1" max:"1024" required:"true"`
	// Classes is the number of classes the head scores.
	Classes int `json:"classes" gguf:"-" default:"1000" min:"2" max:"1048576" for:"head=class_token"`
	// Context is the longest sequence the model is trained for.
	//
	//kernelgen:doc gpt2 Context is the number of learned positions: the longest sequence the model reads.
	Context int `json:"context" gguf:"{arch}.context_length" default:"2048" min:"1" max:"1048576" alias:"c" for:"input=tokens|features"`
	// RopeBase is the base θ of the rotary embedding's frequencies.
	RopeBase float32 `json:"rope_base" gguf:"{arch}.rope.freq_base" default:"10000" min:"1" for:"positions=rope"`
	// RopeScaling stretches positions beyond the trained context: none, linear or yarn.
	RopeScaling string `json:"rope_scaling" gguf:"{arch}.rope.scaling.type" default:"none" enum:"none,linear,yarn" for:"positions=rope"`
	// RopeScaleFactor is the context extension factor for linear and YaRN scaling.
	RopeScaleFactor float32 `json:"rope_scale_factor" gguf:"{arch}.rope.scaling.factor" default:"1" min:"1" max:"1024" for:"positions=rope"`
	// RopeOrigContext is the context the model was first trained with (YaRN).
	RopeOrigContext int `json:"rope_orig_context" gguf:"{arch}.rope.scaling.original_context_length" default:"0" min:"0" max:"1048576" omitzero:"true" for:"positions=rope"`
	// RMSEps is the epsilon of RMSNorm.
	RMSEps float32 `json:"rms_eps" gguf:"{arch}.attention.layer_norm_rms_epsilon" default:"1e-5" min:"0" max:"0.1" for:"norm=rms"`
	// LayerNormEps is the epsilon of LayerNorm.
	LayerNormEps float32 `json:"layer_norm_eps" gguf:"-" default:"1e-5" min:"0" max:"0.1" for:"norm=layer"`
	// TiedOutput shares the token embedding with the output projection (no output.weight).
	TiedOutput bool `json:"tied_output" gguf:"toy.{arch}.tied_output" default:"true" for:"head=lm"`
	// QKVBias adds a bias to the query, key and value projections (as Qwen2 does).
	QKVBias bool `json:"qkv_bias" gguf:"toy.{arch}.qkv_bias" default:"false" for:"qkv_bias=false"`
	// WeightType is the element type of the trained matrices: f32 (ggml's backward and AdamW
	// step are f32 only).
	WeightType string `json:"weight_type" gguf:"toy.{arch}.weight_type" default:"f32" enum:"f32" for:"family=llama"`
	// InitScale is the standard deviation of the random initial weights.
	//
	//kernelgen:doc gpt2 InitScale is the standard deviation of the initial weights, as GPT-2 scales it per part.
	//kernelgen:doc vit InitScale is the standard deviation of the initial weights (the head starts at zero, as timm's).
	InitScale float32 `json:"init_scale" gguf:"toy.{arch}.init_scale" default:"0.02" min:"0" max:"1"`
	// Seed makes the random initialisation reproducible.
	Seed int `json:"seed" gguf:"toy.{arch}.seed" default:"1" min:"0" flag:"-"`
}

// Family holds what the other architectures toy decodes add to Llama's parameters, as their
// GGUF keys: the llama family's (qwen2, qwen3, gemma2, gemma3, mistral-style sliding windows,
// mixtures of experts), gpt2's and vit's (the image and the classes, toy's own keys). The decoder reads them with Llama's, and the random-model
// writer writes them. Zero is "absent": the decoder then derives the value from Llama's (head
// sizes d_model/n_heads, RoPE over the whole head) or leaves the part out (no window, no
// soft-cap, no experts).
//
//kernelgen:config noflags
type Family struct {
	// KeyLength is the size of a query/key head when it is not d_model/n_heads (qwen3, gemma).
	KeyLength int `json:"key_length" gguf:"{arch}.attention.key_length" default:"0" min:"0" max:"65536" omitzero:"true"`
	// ValueLength is the size of a value head (default: KeyLength).
	ValueLength int `json:"value_length" gguf:"{arch}.attention.value_length" default:"0" min:"0" max:"65536" omitzero:"true"`
	// RopeDims is the number of leading elements of each head that RoPE rotates.
	RopeDims int `json:"rope_dims" gguf:"{arch}.rope.dimension_count" default:"0" min:"0" max:"65536" omitzero:"true"`
	// SlidingWindow is the number of recent positions a sliding-window layer attends to.
	SlidingWindow int `json:"sliding_window" gguf:"{arch}.attention.sliding_window" default:"0" min:"0" max:"1048576" omitzero:"true"`
	// QueryPreAttnScalar scales queries by 1/√QueryPreAttnScalar instead of 1/√KeyLength (gemma).
	QueryPreAttnScalar float32 `json:"query_pre_attn_scalar" gguf:"{arch}.attention.query_pre_attn_scalar" default:"0" min:"0" omitzero:"true"`
	// AttnSoftcap caps attention logits to cap·tanh(s/cap) (gemma2).
	AttnSoftcap float32 `json:"attn_softcap" gguf:"{arch}.attn_logit_softcapping" default:"0" min:"0" omitzero:"true"`
	// FinalSoftcap caps the output logits likewise.
	FinalSoftcap float32 `json:"final_softcap" gguf:"{arch}.final_logit_softcapping" default:"0" min:"0" omitzero:"true"`
	// Experts is the number of experts of a mixture-of-experts feed-forward block.
	Experts int `json:"experts" gguf:"{arch}.expert_count" default:"0" min:"0" max:"65536" omitzero:"true"`
	// ExpertsUsed is the number of experts each token is routed to.
	ExpertsUsed int `json:"experts_used" gguf:"{arch}.expert_used_count" default:"0" min:"0" max:"65536" omitzero:"true"`
	// ExpertFFN is the hidden width of one expert (default: d_ff).
	ExpertFFN int `json:"expert_ffn" gguf:"{arch}.expert_feed_forward_length" default:"0" min:"0" max:"262144" omitzero:"true"`
	// LayerNormEps is the epsilon of LayerNorm, in the architectures that use it (gpt2).
	LayerNormEps float32 `json:"layer_norm_eps" gguf:"{arch}.attention.layer_norm_epsilon" default:"0" min:"0" max:"0.1" omitzero:"true"`
	// SharedExpertFFN is the hidden width of the always-on shared expert (qwen2moe).
	SharedExpertFFN int `json:"shared_expert_ffn" gguf:"{arch}.expert_shared_feed_forward_length" default:"0" min:"0" max:"262144" omitzero:"true"`
	// ImageSize is the side of an image model's square input image in pixels (vit).
	ImageSize int `json:"image_size" gguf:"{arch}.image_size" default:"0" min:"0" max:"4096" omitzero:"true"`
	// PatchSize is the side of an image model's square patch in pixels.
	PatchSize int `json:"patch_size" gguf:"{arch}.patch_size" default:"0" min:"0" max:"256" omitzero:"true"`
	// Channels is the number of an image model's colour channels.
	Channels int `json:"channels" gguf:"{arch}.channels" default:"0" min:"0" max:"4" omitzero:"true"`
	// ClassCount is the number of classes an image model's head scores: its vocabulary.
	ClassCount int `json:"class_count" gguf:"{arch}.class_count" default:"0" min:"0" max:"1048576" omitzero:"true"`
}

// Shape holds every field of the Llama shape, of whichever family: what a family's view and
// the llama family's type convert through (their Shape method and Shape's Gpt2, Vit and Llama),
// where the core turns a shape into an architecture and back (engines/transformer.ShapeOf).
//
//kernelgen:config noflags
//kernelgen:view Llama
type Shape struct{}
