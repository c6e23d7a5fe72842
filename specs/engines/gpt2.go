package engines

// Gpt2 is the shape of a GPT-2 sequence model as toy train's flags, presets and run bundles
// name it; the model is the Transformer spec's gpt2 family (LayerNorm with biases, learned
// absolute position embeddings, a fused QKV projection, biases on every projection and a GELU
// MLP) on the one core (engines/training.NewGPT2). Its fields are the Llama shape's that the
// gpt2 family's choices take. Its checkpoints store nothing of their own: the core's keys
// (Llama's and Family's, {arch} = gpt2) are those llama.cpp's gpt2 loader reads (gpt2.*), and
// the training options are under toy.gpt2.*.
//
//kernelgen:config
//kernelgen:view Llama gpt2
//kernelgen:preset gpt2-small vocab=50257 d_model=768 d_ff=3072 n_heads=12 n_layers=12 context=1024 layer_norm_eps=1e-5 tied_output=true
//kernelgen:preset gpt2-demo vocab=2048 d_model=192 d_ff=768 n_heads=6 n_layers=4 context=256 layer_norm_eps=1e-5 tied_output=true
type Gpt2 struct{}
