package decoding

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
)

// FileType is a model file's weight type as llama-quantize names it and llama.cpp numbers it
// (enum llama_ftype, the value of general.file_type): a plain type (Q8_0, F16, ...) or a mix
// (Q4_K_M, ...) in which some tensors get more bits than the rest.
type FileType uint32

// The file types toy export writes: every llama.cpp file type that needs no importance matrix
// (all but IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ3_XXS and Q2_K_S, whose mixes hold
// types ggml or llama-quantize will not quantize without one).
const (
	FileTypeF32       FileType = 0
	FileTypeF16       FileType = 1
	FileTypeQ4_0      FileType = 2
	FileTypeQ4_1      FileType = 3
	FileTypeQ8_0      FileType = 7
	FileTypeQ5_0      FileType = 8
	FileTypeQ5_1      FileType = 9
	FileTypeQ2_K      FileType = 10
	FileTypeQ3_K_S    FileType = 11
	FileTypeQ3_K_M    FileType = 12
	FileTypeQ3_K_L    FileType = 13
	FileTypeQ4_K_S    FileType = 14
	FileTypeQ4_K_M    FileType = 15
	FileTypeQ5_K_S    FileType = 16
	FileTypeQ5_K_M    FileType = 17
	FileTypeQ6_K      FileType = 18
	FileTypeIQ3_XS    FileType = 22
	FileTypeIQ4_NL    FileType = 25
	FileTypeIQ3_S     FileType = 26
	FileTypeIQ3_M     FileType = 27
	FileTypeIQ4_XS    FileType = 30
	FileTypeBF16      FileType = 32
	FileTypeTQ1_0     FileType = 36
	FileTypeTQ2_0     FileType = 37
	FileTypeMXFP4_MOE FileType = 38
)

// QuantizationVersion is the version of ggml's block formats a quantized file declares
// (general.quantization_version), as llama.cpp writes it.
const QuantizationVersion = 2

// fileTypeInfo is a file type's name and the type of the tensors its mix does not single out.
type fileTypeInfo struct {
	name string
	base ggml.Type
}

var fileTypes = map[FileType]fileTypeInfo{
	FileTypeF32: {"F32", ggml.F32}, FileTypeF16: {"F16", ggml.F16}, FileTypeBF16: {"BF16", ggml.BF16},
	FileTypeQ4_0: {"Q4_0", ggml.Q4_0}, FileTypeQ4_1: {"Q4_1", ggml.Q4_1}, FileTypeQ5_0: {"Q5_0", ggml.Q5_0},
	FileTypeQ5_1: {"Q5_1", ggml.Q5_1}, FileTypeQ8_0: {"Q8_0", ggml.Q8_0},
	FileTypeQ2_K: {"Q2_K", ggml.Q2_K}, FileTypeQ3_K_S: {"Q3_K_S", ggml.Q3_K}, FileTypeQ3_K_M: {"Q3_K_M", ggml.Q3_K},
	FileTypeQ3_K_L: {"Q3_K_L", ggml.Q3_K}, FileTypeQ4_K_S: {"Q4_K_S", ggml.Q4_K}, FileTypeQ4_K_M: {"Q4_K_M", ggml.Q4_K},
	FileTypeQ5_K_S: {"Q5_K_S", ggml.Q5_K}, FileTypeQ5_K_M: {"Q5_K_M", ggml.Q5_K}, FileTypeQ6_K: {"Q6_K", ggml.Q6_K},
	FileTypeIQ4_NL: {"IQ4_NL", ggml.IQ4_NL}, FileTypeIQ4_XS: {"IQ4_XS", ggml.IQ4_XS},
	FileTypeIQ3_XS: {"IQ3_XS", ggml.IQ3_S}, FileTypeIQ3_S: {"IQ3_S", ggml.IQ3_S}, FileTypeIQ3_M: {"IQ3_M", ggml.IQ3_S},
	FileTypeTQ1_0: {"TQ1_0", ggml.TQ1_0}, FileTypeTQ2_0: {"TQ2_0", ggml.TQ2_0}, FileTypeMXFP4_MOE: {"MXFP4_MOE", ggml.MXFP4},
}

// fileTypeAliases are llama-quantize's other names: a k-quant's bare name is its medium mix.
var fileTypeAliases = map[string]FileType{"Q3_K": FileTypeQ3_K_M, "Q4_K": FileTypeQ4_K_M, "Q5_K": FileTypeQ5_K_M}

// String is the name llama-quantize gives the file type (Q4_K_M), or its number.
func (f FileType) String() string {
	if i, ok := fileTypes[f]; ok {
		return i.name
	}
	return "file type " + strconv.Itoa(int(f))
}

// BaseType is the type of the tensors the mix does not single out (q4_K for Q4_K_M).
func (f FileType) BaseType() ggml.Type { return fileTypes[f].base }

// IsMix reports whether the file type chooses types tensor by tensor (every block-quantized
// one does, unless the export is pure); F32, F16 and BF16 store every matrix as the type.
func (f FileType) IsMix() bool { return ggml.IsQuantized(f.BaseType()) }

// ParseFileType reads a file type as llama-quantize users type it, in any case: a name
// (Q4_K_M, q8_0, F16), llama-quantize's aliases (Q4_K is Q4_K_M), or llama.cpp's number (15).
func ParseFileType(s string) (FileType, bool) {
	up := strings.ToUpper(s)
	if f, ok := fileTypeAliases[up]; ok {
		return f, true
	}
	for f, i := range fileTypes {
		if i.name == up {
			return f, true
		}
	}
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		if _, ok := fileTypes[FileType(n)]; ok {
			return FileType(n), true
		}
	}
	return 0, false
}

// FileTypeNames lists the names ParseFileType reads, in llama.cpp's order, aliases last.
func FileTypeNames() []string {
	var fs []FileType
	for f := range fileTypes {
		fs = append(fs, f)
	}
	slices.Sort(fs)
	var names []string
	for _, f := range fs {
		names = append(names, f.String())
	}
	return append(names, "Q3_K", "Q4_K", "Q5_K")
}

// quantHParams are what a mix's choices depend on besides a tensor's name and shape.
type quantHParams struct {
	arch                   string
	layers, heads, kvHeads int
	experts                int
}

func hparamsOf(a transformer.Architecture) quantHParams {
	return quantHParams{arch: a.Name, layers: a.NLayers, heads: a.NHeads, kvHeads: a.NKVHeads, experts: a.NExperts}
}

// gqa is the number of query heads per key/value head (0 without key/value heads).
func (h quantHParams) gqa() int {
	if h.kvHeads == 0 {
		return 0
	}
	return h.heads / h.kvHeads
}

// is70B reports whether llama.cpp takes the model for a 70B one, whose attn_v gets more bits:
// a llama of 80 layers with grouped-query attention (not a mixture of 8 experts), or a
// qwen2 of 80 layers.
func (h quantHParams) is70B() bool {
	switch h.arch {
	case "llama":
		return h.experts != 8 && h.layers == 80 && h.heads != h.kvHeads
	case "qwen2":
		return h.layers == 80
	}
	return false
}

// quantizedTensor reports whether a conversion stores the tensor in the file type's types, as
// llama-quantize decides: the weights of two or more dimensions, less the norms, a mixture's
// router, the learned positions and token types, and a few small tensors of architectures toy
// does not run (listed so that the rule is llama-quantize's whole).
func quantizedTensor(name string, ne []int64) bool {
	if !strings.HasSuffix(name, "weight") || nDims(ne) < 2 {
		return false
	}
	switch name {
	case "position_embd.weight", "token_types.weight":
		return false
	}
	for _, s := range []string{"_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj",
		"ssm_conv1d.weight", "shortconv.conv.weight", "attn_rel_b.weight", ".position_embd."} {
		if strings.Contains(name, s) {
			return false
		}
	}
	for _, s := range []string{"first", "w0", "w1", "w2", "v0", "v1", "v2", "a0", "a1", "a2", "g1", "g2", "decay_w1", "decay_w2", "lerp_fused"} {
		if strings.Contains(name, "time_mix_"+s+".weight") {
			return false
		}
	}
	return true
}

// nDims is ggml's number of dimensions of a tensor: up to its last dimension above 1.
func nDims(ne []int64) int {
	for i := len(ne) - 1; i >= 1; i-- {
		if ne[i] > 1 {
			return i + 1
		}
	}
	return 1
}

// blockLayer is the layer number of a tensor named blk.N.…, or -1.
func blockLayer(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(rest[:end])
	if err != nil {
		return -1
	}
	return n
}

// typeChoice is the type a conversion gives one tensor.
type typeChoice struct {
	typ ggml.Type
	// fellBack is the type the mix wanted where the rows do not split into its blocks and typ
	// is llama-quantize's fallback (0 otherwise).
	fellBack ggml.Type
	// converts: the tensor is one a conversion stores in the file type's types (its type
	// may be its own already)
	converts bool
}

// chooseTypes gives each tensor (by index into ts) the type a conversion to ft stores it in,
// or its own type where the tensor is not converted: llama-quantize's choices (llama.cpp's
// llama_tensor_get_type), in toy's own words:
//
//   - Plain float types (F32, F16, BF16), and every type with pure, store every converted
//     tensor as the type. A mix starts each one from its base type and then:
//   - The head (output.weight; the token embeddings where the head is tied to them) gets q6_K,
//     or q8_0 in a Q8_0 or MXFP4_MOE file or where its rows do not split into the base type's
//     blocks. MXFP4_MOE stores a mixture's experts as mxfp4 and every other tensor as q8_0; the
//     TQ types store untied token embeddings as q4_K.
//   - attn_v: q6_K in Q4_K_M and Q5_K_M on the layers "more bits" picks (the first and last
//     eighth of them and every third between); q5_K on Q4_K_S's first four; q4_K (q3_K with
//     fewer than 4 query heads per key head) in Q2_K; q5_K/q4_K by layer in Q3_K_M, q5_K in
//     Q3_K_L, q5_K in IQ4_NL/IQ4_XS with 4+ query heads per key head; q5_K where a 70B model
//     would get q3_K or q4_K; q4_K in IQ3_M, and in IQ3_XS/IQ3_S with 4+ query heads per key
//     head; q8_0 in a mixture of 8 experts.
//   - attn_k: q8_0 in a mixture of 8 experts; iq3_xxs in IQ3_XS, as attn_q.
//   - ffn_down: q6_K on the "more bits" layers in Q4_K_M and Q5_K_M; q5_K on the first
//     eighth in Q4_K_S, IQ4_NL and IQ4_XS; q3_K in Q2_K; q5_K in Q3_K_L; in Q3_K_M q5_K on the
//     first sixteenth, q4_K on the rest; q4_K on IQ3_M's first eighth (and its "more bits"
//     layers in a mixture of 8 experts). The layer is the count of ffn_down tensors before it
//     (in llama.cpp's order: by layer, then by name), or the blk number in a mixture.
//   - attn_output: q5_K in a mixture of 8 experts for the 2-5 bit mixes; otherwise q3_K in
//     Q2_K, q4_K in Q3_K_M and IQ3_M, q5_K in Q3_K_L.
//   - attn_qkv (fused): q4_K in Q3_K_M, Q3_K_L and IQ3_M, q5_K in Q4_K_M, q6_K in Q5_K_M.
//   - ffn_gate and ffn_up: iq3_xxs in IQ3_XS but on the first and last eighth of the layers.
//   - Rows that do not split into the chosen type's blocks take a fallback: q2_K, q3_K,
//     iq3_xxs, iq3_s and iq4_xs → iq4_nl, q4_K → q5_0, q5_K → q5_1, q6_K → q8_0, tq1_0 and
//     tq2_0 → q4_0; f16 if even that does not divide them. A 32-block type has no fallback:
//     such rows are an error.
//
// Falcon's rules are left out (toy does not run falcon), as are the mixes that need an
// importance matrix (the rules that apply only with one, too). A tensor whose chosen type is
// its own type is copied.
func chooseTypes(ts []gguffile.TensorInfo, h quantHParams, ft FileType, pure bool) ([]typeChoice, error) {
	base := ft.BaseType()
	out := make([]typeChoice, len(ts))
	order := make([]int, len(ts)) // llama.cpp's order: non-block tensors first, then by layer, then by name
	hasOutput, nAttnV := false, 0
	for i, ti := range ts {
		order[i] = i
		out[i] = typeChoice{typ: ggml.Type(ti.Type)}
		if ti.Name == "output.weight" {
			hasOutput = true
		}
		if strings.Contains(ti.Name, "attn_v.weight") || strings.Contains(ti.Name, "attn_qkv.weight") || strings.Contains(ti.Name, "attn_kv_b.weight") {
			nAttnV++
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(blockLayer(ts[a].Name), blockLayer(ts[b].Name)); c != 0 {
			return c
		}
		return strings.Compare(ts[a].Name, ts[b].Name)
	})
	moreBits := func(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }
	experts := max(1, h.experts)
	iAttnV, iFFNDown, iFFNGate, iFFNUp := 0, 0, 0, 0
	layerOf := func(counter int, name string) (int, int, error) {
		if experts == 1 {
			return counter, h.layers, nil
		}
		l := blockLayer(name)
		if l < 0 || l >= h.layers {
			return 0, 0, fmt.Errorf("%s: no layer below %d in its name", name, h.layers)
		}
		return l, h.layers, nil
	}
	is := func(fts ...FileType) bool { return slices.Contains(fts, ft) }
	for _, k := range order {
		ti := ts[k]
		ne := ti.Shape()
		if !quantizedTensor(ti.Name, ne) {
			continue
		}
		name, nx, typ := ti.Name, ne[0], base
		if !pure && ft.IsMix() {
			switch {
			case name == "output.weight" || !hasOutput && name == "token_embd.weight":
				if ft == FileTypeMXFP4_MOE || nx%int64(ggml.BlockSize(typ)) != 0 {
					typ = ggml.Q8_0
				} else if typ != ggml.Q8_0 {
					typ = ggml.Q6_K
				}
			case ft == FileTypeMXFP4_MOE:
				typ = ggml.Q8_0
				if len(ne) > 2 && ne[2] > 1 {
					typ = ggml.MXFP4 // the experts
				}
			case name == "token_embd.weight" || name == "per_layer_token_embd.weight":
				if is(FileTypeTQ1_0, FileTypeTQ2_0) {
					typ = ggml.Q4_K
				}
			case strings.Contains(name, "attn_v.weight"):
				switch {
				case is(FileTypeQ2_K):
					typ = ggml.Q3_K
					if h.gqa() >= 4 {
						typ = ggml.Q4_K
					}
				case is(FileTypeIQ3_XS, FileTypeIQ3_S) && h.gqa() >= 4:
					typ = ggml.Q4_K
				case is(FileTypeIQ3_M):
					typ = ggml.Q4_K
				case is(FileTypeQ3_K_M):
					typ = ggml.Q4_K
					if iAttnV < 2 {
						typ = ggml.Q5_K
					}
				case is(FileTypeQ3_K_L):
					typ = ggml.Q5_K
				case is(FileTypeIQ4_NL, FileTypeIQ4_XS) && h.gqa() >= 4:
					typ = ggml.Q5_K
				case is(FileTypeQ4_K_M, FileTypeQ5_K_M) && moreBits(iAttnV, nAttnV):
					typ = ggml.Q6_K
				case is(FileTypeQ4_K_S) && iAttnV < 4:
					typ = ggml.Q5_K
				}
				if h.is70B() && (typ == ggml.Q3_K || typ == ggml.Q4_K) {
					typ = ggml.Q5_K
				}
				if h.experts == 8 {
					typ = ggml.Q8_0
				}
				iAttnV++
			case strings.Contains(name, "attn_k.weight"):
				if h.experts == 8 {
					typ = ggml.Q8_0
				} else if is(FileTypeIQ3_XS) {
					typ = ggml.IQ3_XXS
				}
			case strings.Contains(name, "attn_q.weight"):
				if is(FileTypeIQ3_XS) {
					typ = ggml.IQ3_XXS
				}
			case strings.Contains(name, "ffn_down"):
				i, n, err := layerOf(iFFNDown, name)
				if err != nil {
					return nil, err
				}
				switch {
				case is(FileTypeQ2_K):
					typ = ggml.Q3_K
				case is(FileTypeQ3_K_M):
					typ = ggml.Q4_K
					if i < n/16 {
						typ = ggml.Q5_K
					}
				case is(FileTypeIQ3_M) && (i < n/8 || h.experts == 8 && moreBits(i, n)):
					typ = ggml.Q4_K
				case is(FileTypeQ3_K_L):
					typ = ggml.Q5_K
				case is(FileTypeQ4_K_M):
					if moreBits(i, n) {
						typ = ggml.Q6_K
					}
				case i < n/8 && is(FileTypeIQ4_NL, FileTypeIQ4_XS):
					typ = ggml.Q5_K
				case is(FileTypeQ5_K_M) && moreBits(i, n):
					typ = ggml.Q6_K
				case is(FileTypeQ4_K_S) && i < n/8:
					typ = ggml.Q5_K
				}
				iFFNDown++
			case strings.Contains(name, "attn_output.weight"):
				if h.experts == 8 {
					if is(FileTypeQ2_K, FileTypeIQ3_XS, FileTypeQ3_K_S, FileTypeQ3_K_M, FileTypeIQ4_NL, FileTypeQ4_K_S, FileTypeQ4_K_M,
						FileTypeIQ3_S, FileTypeIQ3_M, FileTypeIQ4_XS) {
						typ = ggml.Q5_K
					}
				} else {
					switch ft {
					case FileTypeQ2_K:
						typ = ggml.Q3_K
					case FileTypeQ3_K_M, FileTypeIQ3_M:
						typ = ggml.Q4_K
					case FileTypeQ3_K_L:
						typ = ggml.Q5_K
					}
				}
			case strings.Contains(name, "attn_qkv.weight"):
				switch ft {
				case FileTypeQ3_K_M, FileTypeQ3_K_L, FileTypeIQ3_M:
					typ = ggml.Q4_K
				case FileTypeQ4_K_M:
					typ = ggml.Q5_K
				case FileTypeQ5_K_M:
					typ = ggml.Q6_K
				}
			case strings.Contains(name, "ffn_gate"), strings.Contains(name, "ffn_up"):
				counter := &iFFNGate
				if !strings.Contains(name, "ffn_gate") {
					counter = &iFFNUp
				}
				i, n, err := layerOf(*counter, name)
				if err != nil {
					return nil, err
				}
				if is(FileTypeIQ3_XS) && i >= n/8 && i < 7*n/8 {
					typ = ggml.IQ3_XXS
				}
				*counter++
			}
			if nx%int64(ggml.BlockSize(typ)) != 0 {
				want := typ
				switch typ {
				case ggml.TQ1_0, ggml.TQ2_0:
					typ = ggml.Q4_0
				case ggml.Q2_K, ggml.Q3_K, ggml.IQ4_XS, ggml.IQ3_XXS, ggml.IQ3_S:
					typ = ggml.IQ4_NL
				case ggml.Q4_K:
					typ = ggml.Q5_0
				case ggml.Q5_K:
					typ = ggml.Q5_1
				case ggml.Q6_K:
					typ = ggml.Q8_0
				default:
					return nil, fmt.Errorf("%s has rows of %d values, which %s's blocks of %d do not divide (nor does llama-quantize's)",
						name, nx, ggml.TypeName(typ), ggml.BlockSize(typ))
				}
				if nx%int64(ggml.BlockSize(typ)) != 0 {
					typ = ggml.F16
				}
				out[k].fellBack = want
			}
		} else if nx%int64(ggml.BlockSize(typ)) != 0 {
			return nil, fmt.Errorf("%s has rows of %d values, not a multiple of %s's block of %d (a pure export has no fallback)",
				name, nx, ggml.TypeName(typ), ggml.BlockSize(typ))
		}
		out[k].typ, out[k].converts = typ, true
	}
	return out, nil
}

// ExportOptions say how Export writes a model.
type ExportOptions struct {
	// Adapters are LoRA adapters merged into the weights first (none: a plain conversion).
	Adapters []LoRA
	// Type is the file type to write: every tensor llama-quantize would convert is stored in
	// the type the mix chooses for it (chooseTypes), the rest copied.
	Type FileType
	// Pure stores every converted tensor in Type's base type, with no mix and no fallback
	// (llama-quantize --pure).
	Pure bool
	// AllowRequantize converts tensors that are block-quantized already (and not updated by
	// an adapter) to another type; without it that is an error, as in llama-quantize.
	AllowRequantize bool
	// Threads quantize in parallel (0: one).
	Threads int
	// Warn hears what the user should know of an export that succeeds: adapters trained on
	// another base, clamped values.
	Warn func(string)
	// Progress hears of each tensor written: done of total, and its name.
	Progress func(done, total int, name string)
}

// ExportReport says what Export wrote.
type ExportReport struct {
	// Tensors is the number of tensors in the file; Converted of them were re-encoded (merged,
	// quantized or cast), the rest copied.
	Tensors, Converted int
	// Types counts the converted tensors by the type they were stored in.
	Types map[ggml.Type]int
	// FellBack counts, by the type the mix wanted, the tensors stored in its fallback because
	// their rows do not split into its blocks.
	FellBack map[ggml.Type]int
}

// Export writes to out the GGUF model at base, with opts.Adapters merged (as MergeLoRA merges
// them) and its tensors stored as llama-quantize stores them for opts.Type: the same choice
// of type for each tensor, the same fallbacks, ggml's quantizers (so the same bytes), and
// general.file_type and general.quantization_version set as llama.cpp sets them. A merge
// converts the whole model, not only the tensors the adapters update. Every check (types,
// rows, requantizing) is made before anything is written, and the file is written atomically
// (writeModel).
func Export(base, out string, opts ExportOptions) (*ExportReport, error) {
	if _, ok := fileTypes[opts.Type]; !ok {
		return nil, fmt.Errorf("export %s: toy export does not write %v", base, opts.Type)
	}
	rep := &ExportReport{Types: map[ggml.Type]int{}, FellBack: map[ggml.Type]int{}}
	c := conversion{verb: "export", adapters: opts.Adapters, threads: opts.Threads, warn: opts.Warn, progress: opts.Progress,
		kvs: []transformer.KV{{Key: "general.quantization_version", Value: uint32(QuantizationVersion)}, {Key: "general.file_type", Value: uint32(opts.Type)}}}
	c.types = func(m *GGUFModel, hdr *gguffile.File) ([]ggml.Type, error) {
		choices, err := chooseTypes(hdr.Tensors, hparamsOf(m.Arch), opts.Type, opts.Pure)
		if err != nil {
			return nil, err
		}
		types := make([]ggml.Type, len(choices))
		blocks256, converts := false, false // over every tensor of the conversion, copied or not
		for i, ti := range hdr.Tensors {
			own, ch := ggml.Type(ti.Type), choices[i]
			types[i] = ch.typ
			converts = converts || ch.converts
			blocks256 = blocks256 || ch.converts && ggml.BlockSize(ch.typ) == 256
			adapted := len(m.lora[m.mapped.Tensor(ti.Name)]) > 0
			if ch.typ == own && !adapted {
				continue
			}
			if ggml.IsQuantized(own) && ch.typ != own && !adapted && !opts.AllowRequantize {
				why := "would quantize it twice"
				if !ggml.IsQuantized(ch.typ) {
					why = "would make it bigger, not better"
				}
				return nil, fmt.Errorf("%s is %s already: converting it to %s %s (toy export -allow-requantize does it anyway; or ask for the model's own file type%s)",
					ti.Name, ggml.TypeName(own), ggml.TypeName(ch.typ), why, fileTypeHint(hdr))
			}
			rep.Converted++
			rep.Types[ch.typ]++
			if ch.fellBack != 0 {
				rep.FellBack[ch.fellBack]++
			}
		}
		if !opts.Pure && ggml.BlockSize(opts.Type.BaseType()) == 256 && converts && !blocks256 {
			return nil, fmt.Errorf("%v: no converted tensor has rows that split into %s's 256-value super-blocks, so none would be stored in a k-quant (all would take a fallback); ask for a 32-value block type such as Q5_0 or Q8_0 instead",
				opts.Type, ggml.TypeName(opts.Type.BaseType()))
		}
		return types, nil
	}
	types, err := writeModel(base, out, c)
	if err != nil {
		return nil, err
	}
	rep.Tensors = len(types)
	return rep, nil
}

// fileTypeHint names the file type the model says it has (general.file_type), if toy writes it.
func fileTypeHint(hdr *gguffile.File) string {
	v, _ := hdr.Get("general.file_type")
	if n, ok := v.(uint32); ok {
		if _, ok := fileTypes[FileType(n)]; ok {
			return " (" + FileType(n).String() + ")"
		}
	}
	return ""
}
