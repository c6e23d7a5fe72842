package transformer

import (
	"fmt"
	"strings"

	"github.com/toyml/toy/ggml"
)

// FitFile checks the tensors the architecture implies against the open file f before anything
// is sized by the header's counts. First the count: the file must hold at least as many
// tensors as block_count asks for, so that the tensor table (whose length the count sets) is
// bounded by the file — a block_count of 2³¹−1 once made the loader ask for 532 GB; a count
// the file cannot hold is an error naming a tensor it lacks, found in the first blocks. Then
// each tensor must be present with its shape, so every width, head count, vocabulary and
// expert count that sizes a weight is the file's own, and the weights take no more memory than
// the file holds (f32Only: as f32, a training checkpoint's; otherwise in a type ggml computes
// with, norms and biases f32). what names the kind of file in errors ("gguf", "checkpoint").
func (a *Architecture) FitFile(f *ggml.GGUF, what string, f32Only bool) error {
	missing := func(name string) error {
		return fmt.Errorf("%s %s: %s: tensor %q is missing", what, f.Path(), a.Name, name)
	}
	one, none := *a, *a
	one.NLayers, none.NLayers = 1, 0
	outside := none.TensorSpecs()
	var block []TensorSpec // block 0's, named blk.0.*
	for _, s := range one.TensorSpecs() {
		if strings.HasPrefix(s.Name, "blk.0.") {
			block = append(block, s)
		}
	}
	perBlock, have := int64(len(block)), int64(len(f.Tensors()))
	if need := int64(len(outside)) + perBlock*int64(a.NLayers); need > have {
		// The file's distinct names cannot fill more than have/perBlock blocks: unless a tensor
		// outside the blocks is missing, one of the first blocks lacks one.
		names := func(yield func(string) bool) {
			for _, s := range outside {
				if !yield(s.Name) {
					return
				}
			}
			for il := int64(0); il <= have/perBlock && il < int64(a.NLayers); il++ {
				for _, s := range block {
					if !yield(fmt.Sprintf("blk.%d.%s", il, strings.TrimPrefix(s.Name, "blk.0."))) {
						return
					}
				}
			}
		}
		for name := range names {
			if _, ok := f.Tensor(name); !ok {
				return fmt.Errorf("%w (block_count %d asks for %d tensors, %d a block; the file holds %d)", missing(name), a.NLayers, need, perBlock, have)
			}
		}
		return fmt.Errorf("%s %s: %s: block_count %d asks for %d tensors (%d a block), but the file holds %d",
			what, f.Path(), a.Name, a.NLayers, need, perBlock, have)
	}
	for _, s := range a.TensorSpecs() {
		info, ok := f.Tensor(s.Name)
		if !ok {
			return missing(s.Name)
		}
		want := [4]int64{1, 1, 1, 1}
		copy(want[:], s.Ne)
		if info.Ne != want {
			return fmt.Errorf("%s %s: %s: tensor %q has shape %v, want %v", what, f.Path(), a.Name, s.Name, info.Ne[:info.NDims], s.Ne)
		}
		switch {
		case f32Only && info.Type != ggml.F32:
			return fmt.Errorf("%s %s: tensor %q is %s, want f32", what, f.Path(), s.Name, ggml.TypeName(info.Type))
		case s.Role.multiplied() && !Computable(info.Type):
			return fmt.Errorf("%s %s: tensor %q has type %s, which ggml cannot multiply", what, f.Path(), s.Name, ggml.TypeName(info.Type))
		case !s.Role.multiplied() && info.Type != ggml.F32:
			return fmt.Errorf("%s %s: tensor %q has type %s, want f32 (norms, biases and RoPE factors)", what, f.Path(), s.Name, ggml.TypeName(info.Type))
		}
	}
	return nil
}

// TensorRole is what a tensor is for: it decides the types a file may store it in, how the
// training engine initialises it and whether weight decay applies.
type TensorRole int

const (
	// roleEmbedding is token_embd: gathered per token, and the output projection when tied.
	roleEmbedding TensorRole = iota
	// roleMatrix is a projection, multiplied with MulMat (or MulMatID for experts).
	roleMatrix
	// RoleResidualOut is a projection whose output joins the residual stream (attn_output,
	// ffn_down): initialised smaller, as GPT-2 does.
	RoleResidualOut
	// RoleNorm is a norm's scale.
	RoleNorm
	// RoleBias is a projection's bias.
	RoleBias
	// RoleRopeFreqs is rope_freqs: llama 3's RoPE frequency factors.
	RoleRopeFreqs
)

// multiplied reports whether tensors of the role are multiplied or gathered, and so may be
// stored in any type ggml computes with; the others are f32.
func (r TensorRole) multiplied() bool {
	return r == roleEmbedding || r == roleMatrix || r == RoleResidualOut
}

// IsMatrix reports whether the role is a projection: weight decay applies to it, and the
// trainer computes its gradient as a GEMM.
func (r TensorRole) IsMatrix() bool { return r == roleMatrix || r == RoleResidualOut }

// TensorSpec is one tensor the architecture needs: its name, its shape (ne, innermost first),
// its role and the slot of a weights struct it binds to.
type TensorSpec struct {
	Name string
	Ne   []int64
	Role TensorRole
	Slot **ggml.Tensor
}

// TensorSpecs lists every tensor of the architecture, in llama.cpp's order and names.
func (a *Architecture) TensorSpecs() []TensorSpec { return a.TensorTable(&Weights{}) }

// TensorTable is the architecture's one tensor table: every tensor, in llama.cpp's order and
// names, each bound to its slot in w (whose layers it sizes). The training model, the GGUF
// loader, the checkpoint writer and the random-model writer all read it.
func (a *Architecture) TensorTable(w *Weights) []TensorSpec {
	d, v := int64(a.DModel), int64(a.Vocab)
	qd, kd, vd := int64(a.NHeads*a.HeadDimK), int64(a.NKVHeads*a.HeadDimK), int64(a.NKVHeads*a.HeadDimV)
	od := int64(a.NHeads * a.HeadDimV)
	var specs []TensorSpec
	add := func(slot **ggml.Tensor, name string, role TensorRole, ne ...int64) {
		specs = append(specs, TensorSpec{Name: name, Ne: ne, Role: role, Slot: slot})
	}
	switch a.Input {
	case InputPatches:
		add(&w.patchEmbd, "patch_embd.weight", roleMatrix, int64(a.PatchDim()), d)
		add(&w.patchEmbdB, "patch_embd.bias", RoleBias, d)
		add(&w.clsToken, "cls_token.weight", roleEmbedding, d)
	case InputFeatures:
		add(&w.FeatProj, "fc.weight", roleMatrix, int64(a.Features), d)
		add(&w.FeatNorm, "hidden_norm.weight", RoleNorm, d)
	default:
		add(&w.TokEmbd, "token_embd.weight", roleEmbedding, d, v)
	}
	if a.Positions == PosLearned {
		add(&w.PosEmbd, "position_embd.weight", roleEmbedding, d, int64(a.Context))
	}
	// norm adds a norm's scale, and its bias with LayerNorm.
	norm := func(scale, bias **ggml.Tensor, name string, ne int64) {
		add(scale, name+".weight", RoleNorm, ne)
		if a.Norm == NormLayer {
			add(bias, name+".bias", RoleBias, ne)
		}
	}
	if a.RopeFreqs {
		add(&w.RopeFreqs, "rope_freqs.weight", RoleRopeFreqs, int64(a.RopeDims/2))
	}
	w.Layers = make([]blockWeights, a.NLayers)
	for i := range w.Layers {
		l, p := &w.Layers[i], fmt.Sprintf("blk.%d.", i)
		norm(&l.AttnNorm, &l.attnNormB, p+"attn_norm", d)
		switch {
		case a.FusedQKV:
			add(&l.Wqkv, p+"attn_qkv.weight", roleMatrix, d, qd+kd+vd)
			if a.QKVBias {
				add(&l.bqkv, p+"attn_qkv.bias", RoleBias, qd+kd+vd)
			}
		default:
			add(&l.Wq, p+"attn_q.weight", roleMatrix, d, qd)
			add(&l.Wk, p+"attn_k.weight", roleMatrix, d, kd)
			add(&l.Wv, p+"attn_v.weight", roleMatrix, d, vd)
			if a.QKVBias {
				add(&l.bq, p+"attn_q.bias", RoleBias, qd)
				add(&l.bk, p+"attn_k.bias", RoleBias, kd)
				add(&l.bv, p+"attn_v.bias", RoleBias, vd)
			}
		}
		if a.QKNorm == QKNormHeadRMS {
			add(&l.qNorm, p+"attn_q_norm.weight", RoleNorm, int64(a.HeadDimK))
			add(&l.kNorm, p+"attn_k_norm.weight", RoleNorm, int64(a.HeadDimK))
		}
		add(&l.Wo, p+"attn_output.weight", RoleResidualOut, od, d)
		if a.OutBias {
			add(&l.bo, p+"attn_output.bias", RoleBias, d)
		}
		if a.PostNorms {
			add(&l.postAttnNorm, p+"post_attention_norm.weight", RoleNorm, d)
		}
		norm(&l.FFNNorm, &l.ffnNormB, p+"ffn_norm", d)
		switch {
		case a.FFN == FFNGELU:
			ff := int64(a.DFF)
			add(&l.Up, p+"ffn_up.weight", roleMatrix, d, ff)
			if a.FFNBias {
				add(&l.upB, p+"ffn_up.bias", RoleBias, ff)
			}
			add(&l.Down, p+"ffn_down.weight", RoleResidualOut, ff, d)
			if a.FFNBias {
				add(&l.downB, p+"ffn_down.bias", RoleBias, d)
			}
		case a.IsMoE():
			e, ff := int64(a.NExperts), int64(a.ExpertFFN)
			add(&l.router, p+"ffn_gate_inp.weight", roleMatrix, d, e)
			add(&l.gateExps, p+"ffn_gate_exps.weight", roleMatrix, d, ff, e)
			add(&l.upExps, p+"ffn_up_exps.weight", roleMatrix, d, ff, e)
			add(&l.downExps, p+"ffn_down_exps.weight", RoleResidualOut, ff, d, e)
			if a.SharedExpertFFN > 0 {
				sf := int64(a.SharedExpertFFN)
				add(&l.shGateInp, p+"ffn_gate_inp_shexp.weight", roleMatrix, d)
				add(&l.shGate, p+"ffn_gate_shexp.weight", roleMatrix, d, sf)
				add(&l.shUp, p+"ffn_up_shexp.weight", roleMatrix, d, sf)
				add(&l.shDown, p+"ffn_down_shexp.weight", RoleResidualOut, sf, d)
			}
		default:
			ff := int64(a.DFF)
			add(&l.Gate, p+"ffn_gate.weight", roleMatrix, d, ff)
			add(&l.Up, p+"ffn_up.weight", roleMatrix, d, ff)
			add(&l.Down, p+"ffn_down.weight", RoleResidualOut, ff, d)
		}
		if a.PostNorms {
			add(&l.postFFNNorm, p+"post_ffw_norm.weight", RoleNorm, d)
		}
	}
	norm(&w.OutNorm, &w.outNormB, "output_norm", d)
	if !a.TiedOutput {
		add(&w.Output, "output.weight", roleMatrix, d, v)
	}
	if a.Head == HeadClassToken {
		add(&w.outputB, "output.bias", RoleBias, v)
	}
	return specs
}
