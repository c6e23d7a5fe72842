package engines

// Vit is the shape of a ViT image classifier (Dosovitskiy et al., "An Image is Worth 16x16
// Words"; timm's vit_tiny_patch16_224) as toy train's flags, presets and run bundles name it:
// the image is cut into patch_size² patches, each flattened (channel-last) and projected to
// d_model by a matmul, a learned class token is prepended, learned position embeddings are
// added, pre-norm blocks (LayerNorm, non-causal multi-head attention with a fused QKV
// projection, GELU MLP, biases everywhere) follow, and a final LayerNorm and a linear head read
// the class token: the Transformer spec's vit family on the one core
// (engines/training.NewViT). Its fields are the Llama shape's that the vit family's choices
// take. llama.cpp has no ViT classifier architecture, so the keys are toy's own
// (general.architecture "vit"): the core's (Llama's and Family's, {arch} = vit, the image's
// and the classes' among Family's; training options under toy.vit.*); the tensor names are
// listed in docs/TRAINING.md.
//
//kernelgen:config
//kernelgen:view Llama vit
//kernelgen:preset vit-tiny image_size=224 patch_size=16 channels=3 d_model=192 n_heads=3 d_ff=768 n_layers=12 classes=1000 layer_norm_eps=1e-6
//kernelgen:preset vit-mnist image_size=28 patch_size=7 channels=1 d_model=64 n_heads=4 d_ff=128 n_layers=4 classes=10 layer_norm_eps=1e-6
type Vit struct{}
