package engines

// Gpt2 is the shape of a GPT-2 sequence model as toy train's flags, presets and run bundles
// name it; the model is the Transformer spec's gpt2 family (LayerNorm with biases, learned
// absolute position embeddings, a fused QKV projection, biases on every projection and a GELU
// MLP) on the one core (engines/training.NewGPT2). Its checkpoints store nothing of their own:
// the core's keys (Llama's and Family's, {arch} = gpt2) are those llama.cpp's gpt2 loader reads
// (gpt2.*), and the training options are under toy.gpt2.*.
//
//kernelgen:config
//kernelgen:preset gpt2-small vocab=50257 d_model=768 d_ff=3072 n_heads=12 n_layers=12 context=1024 layer_norm_eps=1e-5 tied_output=true
//kernelgen:preset gpt2-demo vocab=2048 d_model=192 d_ff=768 n_heads=6 n_layers=4 context=256 layer_norm_eps=1e-5 tied_output=true
type Gpt2 struct {
	// Vocab is the number of tokens.
	Vocab int `json:"vocab" gguf:"-" default:"50257" min:"2" max:"1048576"`
	// DModel is the width of the residual stream (embedding length).
	DModel int `json:"d_model" gguf:"-" default:"768" min:"1" max:"65536" multipleof:"n_heads"`
	// DFF is the hidden width of the GELU feed-forward block (4·d_model in GPT-2).
	DFF int `json:"d_ff" gguf:"-" default:"3072" min:"1" max:"262144"`
	// NHeads is the number of attention heads.
	NHeads int `json:"n_heads" gguf:"-" default:"12" min:"1" max:"1024"`
	// NLayers is the number of transformer blocks.
	NLayers int `json:"n_layers" gguf:"-" default:"12" min:"1" max:"1024"`
	// Context is the number of learned positions: the longest sequence the model reads.
	Context int `json:"context" gguf:"-" default:"1024" min:"1" max:"1048576" alias:"c"`
	// LayerNormEps is the epsilon of LayerNorm.
	LayerNormEps float32 `json:"layer_norm_eps" gguf:"-" default:"1e-5" min:"0" max:"0.1"`
	// TiedOutput shares the token embedding with the output projection (no output.weight).
	TiedOutput bool `json:"tied_output" gguf:"-" default:"true"`
	// InitScale is the standard deviation of the initial weights, as GPT-2 scales it per part.
	InitScale float32 `json:"init_scale" gguf:"-" default:"0.02" min:"0" max:"1"`
	// Seed makes the random initialisation reproducible.
	Seed int `json:"seed" gguf:"-" default:"1" min:"0" flag:"-"`
}
