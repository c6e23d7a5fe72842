package engines

// Vit is the shape of a ViT image classifier (Dosovitskiy et al., "An Image is Worth 16x16
// Words"; timm's vit_tiny_patch16_224) as toy train's flags, presets and run bundles name it:
// the image is cut into patch_size² patches, each flattened (channel-last) and projected to
// d_model by a matmul, a learned class token is prepended, learned position embeddings are
// added, pre-norm blocks (LayerNorm, non-causal multi-head attention with a fused QKV
// projection, GELU MLP, biases everywhere) follow, and a final LayerNorm and a linear head read
// the class token: the Transformer spec's vit family on the one core
// (engines/training.NewViT). llama.cpp has no ViT classifier architecture, so the keys are
// toy's own (general.architecture "vit"): the image's and the classes' are declared here, the
// rest are the core's (Llama's and Family's, {arch} = vit; training options under toy.vit.*);
// the tensor names are listed in docs/TRAINING.md.
//
//kernelgen:config
//kernelgen:preset vit-tiny image_size=224 patch_size=16 channels=3 d_model=192 n_heads=3 d_ff=768 n_layers=12 classes=1000 layer_norm_eps=1e-6
//kernelgen:preset vit-mnist image_size=28 patch_size=7 channels=1 d_model=64 n_heads=4 d_ff=128 n_layers=4 classes=10 layer_norm_eps=1e-6
type Vit struct {
	// ImageSize is the side of the square input image in pixels.
	ImageSize int `json:"image_size" gguf:"vit.image_size" default:"224" min:"1" max:"4096" multipleof:"patch_size" required:"true"`
	// PatchSize is the side of a square patch in pixels; the image has (image_size/patch_size)² patches.
	PatchSize int `json:"patch_size" gguf:"vit.patch_size" default:"16" min:"1" max:"256" required:"true"`
	// Channels is the number of colour channels: 1 (grayscale) or 3 (RGB).
	Channels int `json:"channels" gguf:"vit.channels" default:"3" min:"1" max:"4" required:"true"`
	// DModel is the width of the residual stream (embedding length).
	DModel int `json:"d_model" gguf:"-" default:"192" min:"1" max:"65536" multipleof:"n_heads"`
	// NHeads is the number of attention heads.
	NHeads int `json:"n_heads" gguf:"-" default:"3" min:"1" max:"1024"`
	// DFF is the hidden width of the GELU MLP.
	DFF int `json:"d_ff" gguf:"-" default:"768" min:"1" max:"262144"`
	// NLayers is the number of transformer blocks.
	NLayers int `json:"n_layers" gguf:"-" default:"12" min:"1" max:"1024"`
	// Classes is the number of classes the head scores.
	Classes int `json:"classes" gguf:"vit.class_count" default:"1000" min:"2" max:"1048576" required:"true"`
	// LayerNormEps is the epsilon of LayerNorm.
	LayerNormEps float32 `json:"layer_norm_eps" gguf:"-" default:"1e-6" min:"0" max:"0.1"`
	// InitScale is the standard deviation of the initial weights (the head starts at zero, as timm's).
	InitScale float32 `json:"init_scale" gguf:"-" default:"0.02" min:"0" max:"1"`
	// Seed makes the random initialisation reproducible.
	Seed int `json:"seed" gguf:"-" default:"1" min:"0" flag:"-"`
}
