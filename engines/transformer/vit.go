package transformer

import (
	"fmt"

	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// ViTArch is the GGUF general.architecture of toy's ViT classifier checkpoints. llama.cpp has
// no such architecture: the keys (vit.*: the core's, the image's and the classes' among specs/engines' Family) and the tensor names
// (patch_embd, cls_token, position_embd, the gpt2 block names, output_norm, output with a
// bias) are toy's own, documented in docs/TRAINING.md.
const ViTArch = "vit"

// ValidateViT checks a ViT configuration against its spec's bounds.
func ValidateViT(c config.Vit) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("vit config: %w", err)
	}
	return nil
}

// ArchitectureFromViT is the architecture of a ViT of configuration c (toy train's flags,
// presets and run bundles): the vit family's description (Family) — gpt2's pre-norm blocks,
// non-causal (the classifier's mask is all zeros), on a patch embedding with a class token, and
// a head on the class token — with the classes in the vocabulary's place (the head's rows) and
// the class token and the patches as the context.
func ArchitectureFromViT(c config.Vit) Architecture { return ArchitectureOf(ViTArch, c.Shape()) }

// ViTConfig is the configuration toy train names a ViT of architecture a by, with its
// initialisation: the inverse of ArchitectureFromViT.
func ViTConfig(a *Architecture, init Init) config.Vit { return ShapeOf(a, init).Vit() }

// PixelsPerImage is the number of floats of one input image of c: ImageSize²·Channels.
func PixelsPerImage(c config.Vit) int { return c.ImageSize * c.ImageSize * c.Channels }

// patchify appends the patches of img — ImageSize² pixels row by row, each pixel's Channels
// values together ([C, W, H] in ggml's order, "HWC") — to dst, patch by patch in row order,
// each flattened as [C, P, P] (channel fastest, then x, then y): the rows patch_embd.weight
// multiplies.
func (a *Architecture) patchify(dst, img []float32) []float32 {
	size, p, ch := a.ImageSize, a.PatchSize, a.Channels
	n := size / p
	for py := 0; py < n; py++ {
		for px := 0; px < n; px++ {
			for dy := 0; dy < p; dy++ {
				row := ((py*p+dy)*size + px*p) * ch
				dst = append(dst, img[row:row+p*ch]...)
			}
		}
	}
	return dst
}

// ImageInputs are the per-step inputs of a classification graph over B images: the
// flattened patches, the class labels, and two constants (the zeros the class token and the
// patch embeddings are placed in with ACC, which has a backward where CONCAT has none, and
// the all-zero attention mask: every token sees every token).
type ImageInputs struct {
	a         *Architecture
	B         int
	pixels    *ggml.Tensor // f32 [PatchDim, Patches·B]
	Labels    *ggml.Tensor // f32 [classes, B]: one-hot
	base      *ggml.Tensor // f32 [d, Patches+1, B]: zero
	Mask      *ggml.Tensor // f32 [T, T, 1, B]: zero
	pixelsBuf []float32
}

func NewImageInputs(s *ggml.Context, a *Architecture, B int) *ImageInputs {
	t, b := int64(a.Context), int64(B)
	return &ImageInputs{a: a, B: B,
		pixels: s.NewTensor(ggml.F32, int64(a.PatchDim()), int64(a.Patches())*b).SetName("in.patches"),
		Labels: s.NewTensor(ggml.F32, int64(a.Vocab), b).SetName("in.labels"),
		base:   s.NewTensor(ggml.F32, int64(a.DModel), t, b).SetName("in.zeros"),
		Mask:   s.NewTensor(ggml.F32, t, t, 1, b).SetName("in.mask"),
	}
}

// SetConstants zeroes the constants once the tensors are allocated.
func (in *ImageInputs) SetConstants() error {
	if err := in.base.SetF32(make([]float32, in.base.Len())); err != nil {
		return err
	}
	return in.Mask.SetF32(make([]float32, in.Mask.Len()))
}

// Upload checks a batch against the graph (B images of the model's size and channels, labels
// among its classes) and sets the patches and labels.
func (in *ImageInputs) Upload(b *train.ClassificationBatch) error {
	a := in.a
	switch {
	case b == nil:
		return fmt.Errorf("vit: no batch")
	case b.N != in.B:
		return fmt.Errorf("vit: a batch of %d images for a graph of %d", b.N, in.B)
	case b.PixelsPerImage != a.ImageSize*a.ImageSize*a.Channels:
		return fmt.Errorf("vit: images of %d floats, want %d×%d×%d = %d", b.PixelsPerImage, a.ImageSize, a.ImageSize, a.Channels, a.ImageSize*a.ImageSize*a.Channels)
	case b.Classes > a.Vocab:
		return fmt.Errorf("vit: a batch of %d classes for a model of %d", b.Classes, a.Vocab)
	}
	in.pixelsBuf = in.pixelsBuf[:0]
	for i := 0; i < b.N; i++ {
		in.pixelsBuf = a.patchify(in.pixelsBuf, b.Pixels[i*b.PixelsPerImage:(i+1)*b.PixelsPerImage])
	}
	if err := in.pixels.SetF32(in.pixelsBuf); err != nil {
		return err
	}
	labels := make([]float32, a.Vocab*b.N)
	for i, l := range b.Labels {
		labels[i*a.Vocab+int(l)] = 1
	}
	return in.Labels.SetF32(labels)
}

// Classify is the image model's forward: the patch embedding (patch_embd·patches + bias), the
// class token placed before each image's patches and the patch embeddings after it (ACC into
// zeros: a concatenation with a backward), learned positions, the blocks, and the final norm
// and head on each image's class token.
func (f *ForwardPass) Classify(in *ImageInputs) *ggml.Tensor {
	ctx, a, w := f.Ctx, f.A, f.W
	d, np, t, b := int64(a.DModel), int64(a.Patches()), int64(a.Context), int64(in.B)
	nb1 := int(d) * ggml.TypeSize(ggml.F32)
	nb2 := nb1 * int(t)
	e := f.addBias(f.Linear(w.patchEmbd, in.pixels), w.patchEmbdB) // [d, Patches·B]
	x := ctx.Acc(in.base, ctx.Reshape(e, d, np, b), nb1, nb2, nb2*int(b), nb1)
	slots := ctx.View(in.base, []int64{d, 1, b}, []int{nb1, nb2}, 0) // the class tokens' shape
	x = ctx.Acc(x, ctx.Repeat(ctx.Reshape(w.clsToken, d, 1, 1), slots), nb1, nb2, nb2*int(b), 0)
	x = ctx.Add(x, w.PosEmbd) // [d, T] over each image
	x = f.blocks(ctx.Reshape(x, d, t*b), t*b)
	x = ctx.Cont(ctx.View(x, []int64{d, b}, []int{nb2}, 0)) // the class tokens
	x = f.norm(x, w.OutNorm, w.outNormB)
	return f.addBias(f.Linear(w.Output, x), w.outputB)
}
