// Package kerneltables is kernelgen's generator of the kernel tables: it loads kernels/ (each
// target's HARDWARE.toml, the source trees they name with their C, CUDA and Metal sources and
// the PTX built from them, and the models' MODEL.toml files with each target's overlays),
// checks them, and emits generated/kernels: one table per hardware target behind its build
// tag, with typed identifiers for every module and kernel. Generate, which gen calls, is all it
// exports.
//
// A model's sampling presets and DFlash pairing take their keys, defaults and bounds from the
// Sampling and DFlash option groups of specs/engines, which gen/configs loads.
package kerneltables

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"go/build/constraint"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/toyml/toy/gen/configs"
)

// The kernel-table inputs live under kernels/ (see kernels/README.md):
//
//	kernels/<hw>/HARDWARE.toml             [hardware]: backend, arch (verbatim), compilers, link
//	                                       needs, and sources: the source tree it builds ("../cuda")
//	kernels/<tree>/common/*.cu|*.metal     a backend family's sources, shared by every target that
//	                                       names the tree and by every model
//	kernels/<tree>/<model>/*.cu|*.metal    a model's own sources (replacing a common/ namesake whole)
//	kernels/models/<model>/MODEL.toml      a model's declarations, shared by every target
//	kernels/<hw>/models/<model>/MODEL.toml what target <hw> changes in them (an overlay), or a model
//	                                       only <hw> declares
//
// A cuda target's build of kernels/<tree>/<sub>/<name>.cu is generated/kernels/<hw>.<sub>.<name>.ptx,
// the only copy, which the table embeds where it lies. Its first line is "// toy-ptx:
// source-sha256=<hex> compiler=<name>-<version> target=<sm_XY>" (written by scripts/build-ptx.sh);
// the generator refuses a missing or stale
// one, one whose recorded target is not its .target line, and one whose target cannot run
// everywhere the target's arch does, so go generate needs no CUDA compiler. A Metal source is
// its own blob (Metal compiles source at run time).

// tablePackage says where the kernel tables go: the generated package's import path and name, and
// the input its files' headers name.
type tablePackage struct {
	ImportPath, PkgName, Source string
}

// tables is toy's kernel tables: read from Input (under the module root), written to OutDir as
// Package.
var tables = struct {
	Input, OutDir string
	Package       tablePackage
}{
	Input:   "kernels",
	OutDir:  "generated/kernels",
	Package: tablePackage{ImportPath: "github.com/toyml/toy/generated/kernels", PkgName: "kernels", Source: "kernels"},
}

// target is one hardware target: a directory under kernels/ with a HARDWARE.toml.
type target struct {
	Dir         string // directory name under kernels/, e.g. "cuda-sm90a"
	GoName      string // "CUDASm90a"
	Backend     string // cpu, cuda or metal
	Arch        string // verbatim, e.g. "sm_90a"; for cpu the -march its C is compiled with ("x86-64-v3"), or empty
	ArchBase    string // Arch with its a/f suffix stripped, e.g. "sm_90"
	Description string
	Compilers   []compiler
	Link        []string
	Tree        *tree     // the source tree HARDWARE.toml names; nil when none
	Modules     []*module // the tree's modules, in its order, with this target's blobs
	Models      []*model  // by directory name
	// ExpectedAbsent are lookups HARDWARE.toml declares may fail to resolve for every model of
	// the target (what the target lacks, such as the weight types its kernels do not take).
	ExpectedAbsent []absent
	// GoBuild is a cpu target's Go build constraint (HARDWARE.toml go_build, e.g. "toy_portable &&
	// amd64"): its table is compiled in where it holds, a twin elsewhere; empty: always.
	GoBuild string
}

// tree is one source tree: a directory under kernels/ that HARDWARE.toml files name in
// sources, holding one backend family's kernel sources once for all its targets.
type tree struct {
	Dir     string    // path under kernels/, slash-separated, e.g. "cuda"
	GoName  string    // "CUDA"
	Backend string    // the backend of the targets that name it
	Pos     string    // where it was first named: kernels/<hw>/HARDWARE.toml
	Modules []*module // common/ first, then by model directory; each sorted by name; no blobs
}

// compiler is one compiler a target's kernels may be built with, in order of preference.
type compiler struct {
	Name  string   `toml:"name"`
	Flags []string `toml:"flags"`
}

// module is one kernel source file and, in a target's list, that target's blob of it.
type module struct {
	Name      string // file base name without extension: the name lookups use
	Dir       string // "common" or the model's directory
	Source    string // path under kernels/ of the source, slash-separated
	Blob      string // path under kernels/ of the blob ("" when the target has none)
	BlobData  []byte
	Compiler  string // what produced the blob: "clang-16.0.6", "nvcc-12.4.131", "source" (Metal) or ""
	PTXTarget string // the PTX's .target as its header records it, e.g. "sm_90"; "" but for cuda
	Kernels   []string
	// Types are, per kernel that declares them, the ggml types of the data it takes (a weight
	// matrix's, a cache's): the cpu target's toy:kernel lines. A lookup of another type does
	// not resolve.
	Types  map[string][]string
	GoName string // "Sampling" (common) or "LlamaSampling"
	Index  int    // position in tree.Modules (and in each of its targets' Modules)
}

// model is one model's declarations as a target sees them: kernels/models/<model>/MODEL.toml
// with the target's overlay applied, or a model only the target declares.
type model struct {
	Dir            string
	GoName         string
	Pos            string // the shared MODEL.toml, or the target's own when there is none
	Overlay        string // the target's overlay of Pos; "" when none
	Description    string
	MatchNames     []string
	Types          []modelType
	Presets        []preset
	Behaviour      *behaviour
	DFlash         *dflashPairing
	ExpectedAbsent []absent
	Modules        []*module // the effective set: common/ with the model's own files replacing namesakes
	Shadowed       []shadow
}

// modelType is one (model_type, hidden_size) the model declares; HiddenSize 0 is the wildcard.
type modelType struct {
	ModelType  string
	HiddenSize int
	Pos        string // the MODEL.toml that declares it
	Line       int
}

// preset is one sampling preset: the Sampling options MODEL.toml's [sampling.NAME] gives, in
// the spec's order, each checked against its field's kind and bounds (samplingSetting). A key
// it leaves out is not set: the runtime's preset (an overlay of the Sampling options) leaves
// that option as it is.
type preset struct {
	Name  string
	Given []setting
}

// setting is one option a sampling preset gives: the Sampling spec's field and its value, of
// the Go type of the field's kind (float64, int, uint64, bool, string, ...).
type setting struct {
	Field *configs.Field
	Value any
}

// behaviour is how toy runs the model.
type behaviour struct {
	AddBOS, AddEOS bool
	ChatTemplate   string
	Stop           []string
}

// dflashPairing pairs the model with a DFlash drafter.
type dflashPairing struct {
	DraftModel     string
	Gamma          int
	WindowSize     int
	MaskTokenID    int
	TargetLayerIDs []int
}

// absent is a kernel lookup that may fail to resolve, and why: "module.kernel", or
// "module.kernel[type]" for a kernel asked to take data of a ggml type ("[*]": any type the
// kernel does not declare).
type absent struct {
	Lookup, Reason string
	Pos            string // the MODEL.toml that declares it
	Line           int
}

// shadow records the kernels of a common/ module that a model's namesake dropped.
type shadow struct {
	Module  string
	Kernels []string
}

// The TOML shapes. Optional scalars are pointers so absence is visible.
type hardwareFile struct {
	Hardware struct {
		Backend     string     `toml:"backend"`
		Arch        string     `toml:"arch"`
		Description string     `toml:"description"`
		Sources     *string    `toml:"sources"`
		GoBuild     string     `toml:"go_build"`
		Compilers   []compiler `toml:"compilers"`
		Link        []string   `toml:"link"`
	} `toml:"hardware"`
	ExpectedAbsent map[string]string `toml:"expected_absent"`
}

// samplingTable is one [sampling.NAME] preset as decoded: its keys, the Sampling options' json
// names, are checked against the spec (samplingSetting), not against a Go struct.
type samplingTable map[string]any

type behaviourTable struct {
	AddBOS       *bool    `toml:"add_bos"`
	AddEOS       *bool    `toml:"add_eos"`
	ChatTemplate string   `toml:"chat_template"`
	Stop         []string `toml:"stop"`
}

type dflashTable struct {
	DraftModel     string `toml:"draft_model"`
	Gamma          *int   `toml:"gamma"`
	WindowSize     *int   `toml:"window_size"`
	MaskTokenID    *int   `toml:"mask_token_id"`
	TargetLayerIDs []int  `toml:"target_layer_ids"`
}

type modelTypeEntry struct {
	ModelType  string `toml:"model_type"`
	HiddenSize *int   `toml:"hidden_size"`
}

type modelFile struct {
	Model struct {
		Description string   `toml:"description"`
		MatchNames  []string `toml:"match_names"`
	} `toml:"model"`
	ModelTypes     []modelTypeEntry         `toml:"model_types"`
	Sampling       map[string]samplingTable `toml:"sampling"`
	Behaviour      *behaviourTable          `toml:"behaviour"`
	DFlash         *dflashTable             `toml:"dflash"`
	ExpectedAbsent map[string]string        `toml:"expected_absent"`
}

// kerr collects errors that name file:line, reported sorted.
type kerr struct{ errs []string }

func (k *kerr) at(file string, line int, format string, args ...any) {
	pos := file
	if line > 0 {
		pos = fmt.Sprintf("%s:%d", file, line)
	}
	k.errs = append(k.errs, pos+": "+fmt.Sprintf(format, args...))
}

func (k *kerr) err() error {
	if len(k.errs) == 0 {
		return nil
	}
	// A shared file's error is found once per target that reads it: report it once.
	seen := map[string]bool{}
	uniq := k.errs[:0]
	for _, e := range k.errs {
		if !seen[e] {
			seen[e] = true
			uniq = append(uniq, e)
		}
	}
	k.errs = uniq
	sort.SliceStable(k.errs, func(i, j int) bool { return lessPos(k.errs[i], k.errs[j]) })
	return errors.New(strings.Join(k.errs, "\n"))
}

// lessPos orders "file:line: msg" by file, then line number, then text.
func lessPos(a, b string) bool {
	fa, la, ra := splitPos(a)
	fb, lb, rb := splitPos(b)
	if fa != fb {
		return fa < fb
	}
	if la != lb {
		return la < lb
	}
	return ra < rb
}

func splitPos(s string) (string, int, string) {
	head, rest, _ := strings.Cut(s, ": ")
	file, line := head, 0
	if i := strings.LastIndexByte(head, ':'); i >= 0 {
		if _, err := fmt.Sscanf(head[i+1:], "%d", &line); err == nil {
			file = head[:i]
		}
	}
	return file, line, rest
}

// modelsDir is the directory under kernels/ (and under each target) that holds model
// declarations.
const modelsDir = "models"

// load reads every target under root/dir (normally "kernels"), with the source trees
// they name and the models they declare, into a checked model. Errors name file:line (paths
// relative to root) and are all reported at once.
//
// options are the option groups of specs/engines: Sampling's fields are the keys a
// [sampling.NAME] preset may set (by json name; a key the spec lacks is an error), and their
// kinds and bounds (min, max, enum) check the values it gives, so an option added to the spec
// is settable in MODEL.toml as it is; DFlash's defaults fill the keys a [dflash] pairing leaves
// out.
func load(root, dir string, options []*configs.Config) ([]*target, error) {
	sampling, dflash := configs.OptionGroup(options, "Sampling"), configs.OptionGroup(options, "DFlash")
	if sampling == nil || dflash == nil {
		return nil, fmt.Errorf("kernelgen: the kernel tables need the Sampling and DFlash options of specs/engines")
	}
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		return nil, err
	}
	ke := &kerr{}
	shared := loadModelLayers(root, dir+"/"+modelsDir, ke)
	trees := map[string]*tree{}
	var targets []*target
	var others []string
	for _, e := range entries {
		if !e.IsDir() || e.Name() == modelsDir {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, dir, e.Name(), "HARDWARE.toml")); err != nil {
			others = append(others, e.Name())
			continue
		}
		if t := loadTarget(root, dir, e.Name(), shared, trees, sampling, dflash, ke); t != nil {
			targets = append(targets, t)
		}
	}
	for _, o := range others {
		if trees[o] == nil && !treeBelow(trees, o) {
			ke.at(dir+"/"+o, 0, "neither a target (no HARDWARE.toml), %s/, nor a source tree a HARDWARE.toml names in sources", modelsDir)
		}
	}
	for _, t := range targets {
		checkCollisions(t, ke)
	}
	checkStrayPTX(root, targets, ke)
	if err := ke.err(); err != nil {
		return nil, err
	}
	return targets, nil
}

// treeBelow says whether a named tree lies under directory d (sources = "../family/cuda").
func treeBelow(trees map[string]*tree, d string) bool {
	for p := range trees {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

var (
	dirName   = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
	identName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	cudaArch  = regexp.MustCompile(`^sm_[0-9]{2,3}[af]?$`)
	cpuArch   = regexp.MustCompile(`^[a-z0-9][a-z0-9.+_-]*$`)
)

func loadTarget(root, dir, name string, shared map[string]*modelLayer, trees map[string]*tree, sampling, dflash *configs.Config, ke *kerr) *target {
	rel := dir + "/" + name
	hwPath := rel + "/HARDWARE.toml"
	var hf hardwareFile
	if _, ok := decodeStrict(root, hwPath, &hf, ke); !ok {
		return nil
	}
	if !dirName.MatchString(name) {
		ke.at(rel, 0, "a target directory is named in lower case letters, digits and dashes")
		return nil
	}
	h := hf.Hardware
	t := &target{Dir: name, GoName: goNameOf(name), Backend: h.Backend, Arch: h.Arch,
		ArchBase: stripArchSuffix(h.Arch), Description: h.Description, Compilers: h.Compilers, Link: h.Link}
	lines := keyLines(root, hwPath)
	switch h.Backend {
	case "cpu":
		if h.Arch != "" && !cpuArch.MatchString(h.Arch) {
			ke.at(hwPath, lines["hardware.arch"], "a cpu arch is the -march its C is compiled with, e.g. x86-64-v3 (got %q)", h.Arch)
		}
		if h.GoBuild != "" {
			if _, err := constraint.Parse("//go:build " + h.GoBuild); err != nil {
				ke.at(hwPath, lines["hardware.go_build"], "go_build %q: %v", h.GoBuild, err)
			}
			t.GoBuild = h.GoBuild
		}
	case "cuda":
		if h.GoBuild != "" {
			ke.at(hwPath, lines["hardware.go_build"], "only a cpu target sets go_build (a %s target's table is behind -tags %s)", h.Backend, h.Backend)
		}
		if !cudaArch.MatchString(h.Arch) {
			ke.at(hwPath, lines["hardware.arch"], "a cuda arch is written sm_XY with an optional a or f suffix (got %q)", h.Arch)
		}
	case "metal":
		if h.GoBuild != "" {
			ke.at(hwPath, lines["hardware.go_build"], "only a cpu target sets go_build (a %s target's table is behind -tags %s)", h.Backend, h.Backend)
		}
	default:
		ke.at(hwPath, lines["hardware.backend"], "backend %q: want cpu, cuda or metal", h.Backend)
		return nil
	}
	for _, c := range h.Compilers {
		if c.Name == "" {
			ke.at(hwPath, lines["hardware.compilers.name"], "a compiler needs a name")
		}
	}
	if h.Sources != nil {
		t.Tree = namedTree(root, dir, name, *h.Sources, t.Backend, hwPath, lines["hardware.sources"], trees, ke)
	}

	// The target's directory: HARDWARE.toml, c/ (toy's own CPU
	// operations, which the cpuops binding compiles: allBindings in gen/bindings) and models/.
	subs, err := os.ReadDir(filepath.Join(root, rel))
	if err != nil {
		ke.at(rel, 0, "%v", err)
		return nil
	}
	hasC := false
	for _, s := range subs {
		switch {
		case !s.IsDir() && s.Name() == "HARDWARE.toml", s.IsDir() && s.Name() == modelsDir:
		case s.IsDir() && s.Name() == "c" && t.Backend == "cpu" && rel == "kernels/cpu":
			hasC = true
		default:
			ke.at(rel+"/"+s.Name(), 0, "unexpected %s: a target holds HARDWARE.toml, %s/ and, for the cpu target, c/ (sources live in the tree its sources names; a cuda target's PTX in %s)",
				map[bool]string{true: "directory", false: "file"}[s.IsDir()], modelsDir, tables.OutDir)
		}
	}

	// Models: the shared ones with this target's overlays, and the target's own.
	own := loadModelLayers(root, rel+"/"+modelsDir, ke)
	names := make([]string, 0, len(shared)+len(own))
	for n := range shared {
		names = append(names, n)
	}
	for n := range own {
		if shared[n] == nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	byName := map[string]*model{}
	for _, n := range names {
		var layers []*modelLayer
		for _, l := range []*modelLayer{shared[n], own[n]} {
			if l != nil {
				layers = append(layers, l)
			}
		}
		if m := buildModel(n, layers, sampling, dflash, ke); m != nil {
			t.Models = append(t.Models, m)
			byName[n] = m
		}
	}

	// Modules: the tree's, with this target's blobs; for the cpu target, toy's own CPU
	// operations (c/), which generated/cpuops compiles in.
	if hasC {
		if t.Tree != nil {
			ke.at(hwPath, lines["hardware.sources"], "a cpu target with its own c/ names no sources")
		}
		t.Tree = cTree(root, dir, name+"/c", trees, ke)
	}
	if t.Tree != nil {
		for _, tm := range t.Tree.Modules {
			m := *tm
			attachBlob(root, rel, t, &m, ke)
			t.Modules = append(t.Modules, &m)
		}
		for _, d := range treeModelDirs(t.Tree) {
			if byName[d] == nil {
				ke.at(dir+"/"+t.Tree.Dir+"/"+d, 0, "names no model of target %s (no %s/%s/%s/MODEL.toml, nor %s/%s/%s/MODEL.toml)",
					name, dir, modelsDir, d, rel, modelsDir, d)
			}
		}
	}
	targetAbsent(t, hf.ExpectedAbsent, hwPath, lines, ke)
	for _, m := range t.Models {
		effectiveModules(t, m)
		checkAbsent(t, m, ke)
	}
	return t
}

var (
	// cKernel is the definition of one of toy's CPU operations: a function of
	// ggml_custom_op_t's (or ggml_custom1_op_t's) shape at the start of a line.
	cKernel = regexp.MustCompile(`(?m)^void\s+toy_([A-Za-z_][A-Za-z0-9_]*)\s*\(\s*struct\s+ggml_tensor\s*\*\s*dst\s*,`)
	// cKernelLine declares what a kernel takes: "// toy:kernel NAME" with, for a kernel that
	// reads typed data a lookup asks for (weights, a cache), " types=f16,q8_0".
	cKernelLine  = regexp.MustCompile(`(?m)^// toy:kernel\s+(\S+)(?:\s+types=(\S+))?\s*$`)
	ggmlTypeName = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-zA-Z0-9]+)*$`)
)

// cTree is the tree of toy's own CPU operations in directory p (cpu/c) under dir, loaded once
// for the cpu targets that build it: the one it lies in and those naming it in sources.
func cTree(root, dir, p string, trees map[string]*tree, ke *kerr) *tree {
	if tr := trees[p]; tr != nil {
		return tr
	}
	tr := &tree{Dir: p, GoName: "CPU", Backend: "cpu", Pos: dir + "/" + p, Modules: loadCModules(root, dir+"/"+p, ke)}
	trees[p] = tr
	return tr
}

// loadCModules reads the cpu target's C sources (kernels/cpu/c): each .c file is a module
// whose kernels are the toy_ functions it defines, each declared by a toy:kernel line. The
// files directly in c/ are every model's (Dir "common"); a directory c/<model>/ holds a model's
// own modules, each replacing its c/ namesake for that model (shadowing), as a CUDA tree's
// model directories do. Modules are ordered common first, then by directory, then by name.
func loadCModules(root, rel string, ke *kerr) []*module {
	mods := loadCDir(root, rel, "common", ke)
	subs, err := os.ReadDir(filepath.Join(root, rel))
	if err != nil {
		ke.at(rel, 0, "%v", err)
		return nil
	}
	for _, s := range subs {
		switch {
		case !s.IsDir():
		case s.Name() == "common" || !dirName.MatchString(s.Name()):
			ke.at(rel+"/"+s.Name(), 0, "a model directory is named in lower case letters, digits and dashes, and not common")
		default:
			mods = append(mods, loadCDir(root, rel+"/"+s.Name(), s.Name(), ke)...)
		}
	}
	for i, m := range mods {
		m.Index = i
	}
	return mods
}

// loadCDir reads the modules of one directory of the cpu target's C sources: c/ itself (dir
// "common") or a model's c/<model>/.
func loadCDir(root, rel, dir string, ke *kerr) []*module {
	files, err := os.ReadDir(filepath.Join(root, rel))
	if err != nil {
		ke.at(rel, 0, "%v", err)
		return nil
	}
	var mods []*module
	for _, f := range files {
		n := f.Name()
		base, ok := strings.CutSuffix(n, ".c")
		if f.IsDir() || !ok {
			continue // headers and model directories; gen/bindings (allBindings) refuses anything else
		}
		src, err := os.ReadFile(filepath.Join(root, rel, n))
		if err != nil {
			ke.at(rel+"/"+n, 0, "%v", err)
			continue
		}
		m := &module{Name: base, Dir: dir, Source: rel + "/" + n, GoName: goNameOf(base), Types: map[string][]string{}}
		if dir != "common" {
			m.GoName = goNameOf(dir) + m.GoName
		}
		for _, sm := range cKernel.FindAllSubmatch(src, -1) {
			if k := string(sm[1]); !contains(m.Kernels, k) { // a vectorized and a scalar definition
				m.Kernels = append(m.Kernels, k)
			}
		}
		declared := map[string]bool{}
		for _, loc := range cKernelLine.FindAllSubmatchIndex(src, -1) {
			line := 1 + bytes.Count(src[:loc[0]], []byte("\n"))
			k := strings.TrimPrefix(string(src[loc[2]:loc[3]]), "toy_")
			switch {
			case !contains(m.Kernels, k):
				ke.at(m.Source, line, "toy:kernel %s: the file defines no kernel toy_%s", k, k)
				continue
			case declared[k]:
				ke.at(m.Source, line, "toy:kernel %s is declared twice", k)
			}
			declared[k] = true
			if loc[4] >= 0 {
				for _, ty := range strings.Split(string(src[loc[4]:loc[5]]), ",") {
					if !ggmlTypeName.MatchString(ty) {
						ke.at(m.Source, line, "toy:kernel %s: type %q is not a ggml type name", k, ty)
					}
					m.Types[k] = append(m.Types[k], ty)
				}
			}
		}
		for _, k := range m.Kernels {
			if !declared[k] {
				ke.at(m.Source, 0, "kernel toy_%s has no \"// toy:kernel %s\" line (with types=... when it reads weights or a cache)", k, k)
			}
		}
		if len(m.Kernels) == 0 {
			ke.at(m.Source, 0, "defines no kernel (want void toy_name(struct ggml_tensor * dst, ... at the start of a line)")
		}
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Name < mods[j].Name })
	return mods
}

// namedTree resolves a HARDWARE.toml's sources (a path relative to the target's directory)
// to a tree under kernels/, loading it on first use.
func namedTree(root, dir, target, src, backend, hwPath string, line int, trees map[string]*tree, ke *kerr) *tree {
	if backend == "cpu" {
		// Another ISA's build of toy's own CPU operations: the c/ directory of a cpu target.
		p := path.Clean(path.Join(target, src))
		first, rest, _ := strings.Cut(p, "/")
		var hf hardwareFile
		_, err := toml.DecodeFile(filepath.Join(root, dir, first, "HARDWARE.toml"), &hf)
		if rest != "c" || err != nil || hf.Hardware.Backend != "cpu" || first == target {
			ke.at(hwPath, line, "sources %q: a cpu target names no sources but another cpu target's c/ directory (\"../cpu/c\"), toy's own CPU operations", src)
			return nil
		}
		return cTree(root, dir, p, trees, ke)
	}
	if src == "" || path.IsAbs(src) || strings.Contains(src, `\`) {
		ke.at(hwPath, line, "sources %q: want a relative path to a source tree under %s/, e.g. \"../cuda\"", src, dir)
		return nil
	}
	p := path.Clean(path.Join(target, src))
	first := strings.SplitN(p, "/", 2)[0]
	switch {
	case p == "." || p == ".." || strings.HasPrefix(p, "../"):
		ke.at(hwPath, line, "sources %q leaves %s/", src, dir)
		return nil
	case first == modelsDir:
		ke.at(hwPath, line, "sources %q names %s/%s/, which holds model declarations", src, dir, modelsDir)
		return nil
	}
	if _, err := os.Stat(filepath.Join(root, dir, first, "HARDWARE.toml")); err == nil {
		ke.at(hwPath, line, "sources %q lies in target %s: a source tree is a directory of its own", src, first)
		return nil
	}
	if st, err := os.Stat(filepath.Join(root, dir, filepath.FromSlash(p))); err != nil || !st.IsDir() {
		ke.at(hwPath, line, "sources %q: no directory %s/%s", src, dir, p)
		return nil
	}
	if tr, ok := trees[p]; ok {
		if tr != nil && tr.Backend != backend {
			ke.at(hwPath, line, "sources %q is the %s tree of %s; a tree serves one backend", src, tr.Backend, tr.Pos)
			return nil
		}
		return tr
	}
	for q := range trees {
		if strings.HasPrefix(p, q+"/") || strings.HasPrefix(q, p+"/") {
			ke.at(hwPath, line, "sources %q overlaps the tree %s/%s", src, dir, q)
			return nil
		}
	}
	tr := &tree{Dir: p, GoName: goNameOf(strings.ReplaceAll(p, "/", "-")), Backend: backend, Pos: hwPath}
	tr.Modules = loadTree(root, dir+"/"+p, backend, ke)
	trees[p] = tr
	return tr
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// goNameOf turns "cuda-sm90a" into "CUDASm90a" and "smollm2" into "Smollm2".
func goNameOf(s string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == '_' || r == '.' }) {
		switch part {
		case "cpu", "cuda", "gpu":
			b.WriteString(strings.ToUpper(part))
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// stripArchSuffix removes an arch's a/f suffix: sm_90a → sm_90, sm_121f → sm_121.
func stripArchSuffix(arch string) string {
	if strings.HasPrefix(arch, "sm_") && (strings.HasSuffix(arch, "a") || strings.HasSuffix(arch, "f")) {
		return arch[:len(arch)-1]
	}
	return arch
}

var (
	cudaKernel  = regexp.MustCompile(`(?m)^\s*extern\s+"C"\s+__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?void\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(`)
	metalKernel = regexp.MustCompile(`(?m)^\s*(?:\[\[\s*kernel\s*\]\]|kernel)\s+void\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(`)
	ptxEntry    = regexp.MustCompile(`(?m)^\s*(?:\.visible\s+)?\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*)\s*\(`)
	ptxHeader   = regexp.MustCompile(`^// toy-ptx: source-sha256=([0-9a-f]{64}) compiler=([a-z][a-z0-9+]*-[0-9][0-9.]*) target=(sm_[0-9]{2,3}[af]?)\n`)
	ptxTarget   = regexp.MustCompile(`(?m)^\s*\.target\s+(sm_[0-9]{2,3}[af]?)\b`)
)

// ptxRunsOn says whether PTX built for ptx runs on every device that code for arch runs on (both
// sm_XY with an optional a or f suffix): an a suffix (sm_90a) runs only on its own compute
// capability, an f suffix (sm_100f) on its major version from its minor on, and no suffix on its
// capability and every later one, through the driver's PTX JIT. So sm_90 PTX suits sm_90a and
// sm_80 PTX suits sm_86, but sm_90 PTX does not suit sm_80, nor sm_90a PTX sm_90.
func ptxRunsOn(ptx, arch string) bool {
	pv, ps := splitArch(ptx)
	av, as := splitArch(arch)
	switch ps {
	case 'a':
		return as == 'a' && pv == av
	case 'f':
		return as != 0 && pv/10 == av/10 && pv <= av
	}
	return pv <= av
}

// splitArch reads sm_90a as (90, 'a') and sm_121 as (121, 0); the caller has matched cudaArch.
func splitArch(arch string) (int, byte) {
	rest := strings.TrimPrefix(arch, "sm_")
	var suffix byte
	if n := len(rest); n > 0 && (rest[n-1] == 'a' || rest[n-1] == 'f') {
		suffix, rest = rest[n-1], rest[:n-1]
	}
	v := 0
	for _, c := range rest {
		v = v*10 + int(c-'0')
	}
	return v, suffix
}

// treeModelDirs lists the model directories of a tree that hold sources.
func treeModelDirs(tr *tree) []string {
	var out []string
	for _, m := range tr.Modules {
		if m.Dir != "common" && (len(out) == 0 || out[len(out)-1] != m.Dir) {
			out = append(out, m.Dir)
		}
	}
	return out
}

// loadTree reads a source tree: common/ and one directory per model with its own sources.
func loadTree(root, rel, backend string, ke *kerr) []*module {
	subs, err := os.ReadDir(filepath.Join(root, rel))
	if err != nil {
		ke.at(rel, 0, "%v", err)
		return nil
	}
	var mods []*module
	if st, err := os.Stat(filepath.Join(root, rel, "common")); err == nil && st.IsDir() {
		mods = append(mods, loadModules(root, rel, "common", backend, ke)...)
	}
	for _, s := range subs {
		switch {
		case !s.IsDir():
			ke.at(rel+"/"+s.Name(), 0, "unexpected file: a source tree holds common/ and model directories")
		case s.Name() == "common":
		case !dirName.MatchString(s.Name()):
			ke.at(rel+"/"+s.Name(), 0, "a model directory is named in lower case letters, digits and dashes")
		default:
			mods = append(mods, loadModules(root, rel, s.Name(), backend, ke)...)
		}
	}
	for i, m := range mods {
		m.Index = i
	}
	return mods
}

// loadModules reads the kernel sources of one directory of a tree.
func loadModules(root, rel, sub, backend string, ke *kerr) []*module {
	dir := rel + "/" + sub
	files, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		ke.at(dir, 0, "%v", err)
		return nil
	}
	var mods []*module
	for _, f := range files {
		n := f.Name()
		if f.IsDir() {
			ke.at(dir+"/"+n, 0, "unexpected directory")
			continue
		}
		ext := filepath.Ext(n)
		base := strings.TrimSuffix(n, ext)
		switch {
		case ext == ".cu" && backend == "cuda", ext == ".metal" && backend == "metal":
		default:
			ke.at(dir+"/"+n, 0, "unexpected file in a %s source tree (sources are %s)", backend,
				map[string]string{"cuda": "*.cu; their PTX is built into generated/kernels", "metal": "*.metal"}[backend])
			continue
		}
		if !identName.MatchString(base) {
			ke.at(dir+"/"+n, 0, "a kernel source's name must be an identifier")
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, dir, n))
		if err != nil {
			ke.at(dir+"/"+n, 0, "%v", err)
			continue
		}
		m := &module{Name: base, Dir: sub, Source: dir + "/" + n, GoName: goNameOf(base), BlobData: src}
		if sub != "common" {
			m.GoName = goNameOf(sub) + m.GoName
		}
		re := cudaKernel
		if backend == "metal" {
			re = metalKernel
		}
		for _, sm := range re.FindAllSubmatch(src, -1) {
			m.Kernels = append(m.Kernels, string(sm[1]))
		}
		if len(m.Kernels) == 0 {
			ke.at(m.Source, 0, "declares no kernels (want extern \"C\" __global__ void name( for CUDA, kernel void name( for Metal)")
		}
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Name < mods[j].Name })
	return mods
}

// ptxPath is where scripts/build-ptx.sh writes target t's build of m, beside the table that
// embeds it: generated/kernels/<hw>.<sub>.<name>.ptx.
func ptxPath(t *target, m *module) string {
	return tables.OutDir + "/" + t.Dir + "." + m.Dir + "." + m.Name + ".ptx"
}

// attachBlob gives m, a copy of a tree module holding its source in BlobData, target t's blob:
// the source itself for Metal, the target's checked PTX for CUDA.
func attachBlob(root, rel string, t *target, m *module, ke *kerr) {
	src := m.BlobData
	m.BlobData = nil
	switch t.Backend {
	case "metal":
		m.BlobData, m.Blob, m.Compiler = src, m.Source, "source"
	case "cuda":
		m.Blob = ptxPath(t, m)
		ptx, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.Blob)))
		if err != nil {
			ke.at(m.Blob, 0, "missing: %s's build of %s; run scripts/build-ptx.sh", t.Dir, m.Source)
			m.Blob = ""
			return
		}
		h := ptxHeader.FindSubmatch(ptx)
		sum := sha256.Sum256(src)
		switch {
		case h == nil:
			ke.at(m.Blob, 1, "want a first line \"// toy-ptx: source-sha256=<hex> compiler=<name>-<version> target=<sm_XY>\" (written by scripts/build-ptx.sh)")
		case string(h[1]) != hex.EncodeToString(sum[:]):
			ke.at(m.Blob, 1, "stale: built from another version of %s; run scripts/build-ptx.sh", m.Source)
		default:
			m.Compiler, m.PTXTarget = string(h[2]), string(h[3])
			if dt := ptxTarget.FindSubmatch(ptx); dt == nil || string(dt[1]) != m.PTXTarget {
				got := "none"
				if dt != nil {
					got = string(dt[1])
				}
				ke.at(m.Blob, 1, "the header records target=%s but the PTX's .target is %s", m.PTXTarget, got)
			} else if cudaArch.MatchString(t.Arch) && !ptxRunsOn(m.PTXTarget, t.Arch) {
				ke.at(m.Blob, 1, "%s PTX does not run everywhere the target's arch %s does (check the %s flags in HARDWARE.toml)", m.PTXTarget, t.Arch, strings.SplitN(m.Compiler, "-", 2)[0])
			}
		}
		m.BlobData = ptx
		var entries []string
		for _, sm := range ptxEntry.FindAllSubmatch(ptx, -1) {
			entries = append(entries, string(sm[1]))
		}
		for _, k := range m.Kernels {
			if !contains(entries, k) {
				ke.at(m.Blob, 0, "kernel %s of %s is not an .entry of the PTX", k, m.Source)
			}
		}
	}
}

// checkStrayPTX refuses a PTX file in generated/kernels that is no cuda target's build of a
// source of its tree (a source since removed, a target renamed).
func checkStrayPTX(root string, targets []*target, ke *kerr) {
	want := map[string]bool{}
	for _, t := range targets {
		if t.Backend != "cuda" {
			continue
		}
		for _, m := range t.Modules {
			want[ptxPath(t, m)] = true
		}
	}
	files, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(tables.OutDir)))
	if err != nil {
		return
	}
	for _, f := range files {
		p := tables.OutDir + "/" + f.Name()
		if !f.IsDir() && strings.HasSuffix(f.Name(), ".ptx") && !want[p] {
			ke.at(p, 0, "no cuda target's source for this PTX (<hw>.<dir>.<name>.ptx is target <hw>'s build of <tree>/<dir>/<name>.cu): remove it, or run scripts/build-ptx.sh")
		}
	}
}

// modelLayer is one decoded MODEL.toml: shared, a target's overlay, or a target's own model.
type modelLayer struct {
	path  string
	mf    modelFile
	md    toml.MetaData
	lines keyLineMap
}

// loadModelLayers decodes every <dir>/<model>/MODEL.toml; a missing dir holds none.
func loadModelLayers(root, dir string, ke *kerr) map[string]*modelLayer {
	out := map[string]*modelLayer{}
	subs, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(dir)))
	if errors.Is(err, fs.ErrNotExist) {
		return out
	}
	if err != nil {
		ke.at(dir, 0, "%v", err)
		return out
	}
	for _, s := range subs {
		rel := dir + "/" + s.Name()
		if !s.IsDir() {
			ke.at(rel, 0, "unexpected file: %s/ holds one directory per model", modelsDir)
			continue
		}
		if !dirName.MatchString(s.Name()) {
			ke.at(rel, 0, "a model directory is named in lower case letters, digits and dashes")
			continue
		}
		files, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			ke.at(rel, 0, "%v", err)
			continue
		}
		found := false
		for _, f := range files {
			if f.Name() == "MODEL.toml" && !f.IsDir() {
				found = true
			} else {
				ke.at(rel+"/"+f.Name(), 0, "unexpected: a model directory holds its MODEL.toml (kernel sources live in a source tree)")
			}
		}
		if !found {
			ke.at(rel, 0, "a model directory needs a MODEL.toml")
			continue
		}
		l := &modelLayer{path: rel + "/MODEL.toml"}
		md, ok := decodeStrict(root, l.path, &l.mf, ke)
		if !ok {
			continue
		}
		l.md, l.lines = md, keyLines(root, l.path)
		out[s.Name()] = l
	}
	return out
}

// buildModel merges a model's layers (the shared MODEL.toml, then the target's overlay) and
// checks the result. An overlay replaces what it sets: [model]'s keys one by one,
// [[model_types]] as a whole, each [sampling.<preset>] whole, [behaviour] and [dflash] whole;
// its [expected_absent] entries add to the shared ones. Errors name the file that set the key.
func buildModel(name string, layers []*modelLayer, sampling, dflash *configs.Config, ke *kerr) *model {
	var mf modelFile
	typesFrom := layers[0]
	for i, l := range layers {
		o := l.mf
		if i == 0 {
			mf = o
			mf.Sampling, mf.ExpectedAbsent = map[string]samplingTable{}, map[string]string{}
		} else {
			if l.md.IsDefined("model", "description") {
				mf.Model.Description = o.Model.Description
			}
			if l.md.IsDefined("model", "match_names") {
				mf.Model.MatchNames = o.Model.MatchNames
			}
			if l.md.IsDefined("model_types") {
				mf.ModelTypes, typesFrom = o.ModelTypes, l
			}
			if o.Behaviour != nil {
				mf.Behaviour = o.Behaviour
			}
			if o.DFlash != nil {
				mf.DFlash = o.DFlash
			}
		}
		for k, v := range o.Sampling {
			mf.Sampling[k] = v
			checkSamplingKeys(l, k, v, sampling, ke)
		}
		for k, v := range o.ExpectedAbsent {
			mf.ExpectedAbsent[k] = v
		}
	}
	// at reports at the line of key in the last layer that sets it (else the last layer's file).
	at := func(key string, format string, args ...any) {
		for i := len(layers) - 1; i >= 0; i-- {
			if line, ok := layers[i].lines[key]; ok {
				ke.at(layers[i].path, line, format, args...)
				return
			}
		}
		ke.at(layers[len(layers)-1].path, 0, format, args...)
	}
	m := &model{Dir: name, GoName: goNameOf(name), Pos: layers[0].path, Description: mf.Model.Description}
	if len(layers) > 1 {
		m.Overlay = layers[1].path
	}
	for _, n := range mf.Model.MatchNames {
		if strings.TrimSpace(n) == "" {
			at("model.match_names", "an empty match name matches everything")
			continue
		}
		m.MatchNames = append(m.MatchNames, strings.ToLower(n))
	}
	if len(mf.ModelTypes) == 0 {
		ke.at(typesFrom.path, 0, "declares no [[model_types]]")
	}
	typeLines := typesFrom.lines.all("model_types.model_type")
	seen := map[modelType]bool{}
	for i, mt := range mf.ModelTypes {
		line := 0
		if i < len(typeLines) {
			line = typeLines[i]
		}
		if mt.ModelType == "" {
			ke.at(typesFrom.path, line, "[[model_types]] entry %d has no model_type", i+1)
			continue
		}
		kt := modelType{ModelType: mt.ModelType, Pos: typesFrom.path, Line: line}
		if mt.HiddenSize != nil {
			if *mt.HiddenSize <= 0 {
				ke.at(typesFrom.path, line, "hidden_size %d must be positive (leave it out for a wildcard)", *mt.HiddenSize)
				continue
			}
			kt.HiddenSize = *mt.HiddenSize
		}
		key := modelType{ModelType: kt.ModelType, HiddenSize: kt.HiddenSize}
		if seen[key] {
			ke.at(typesFrom.path, line, "model type %s is declared twice", describeType(kt))
		}
		seen[key] = true
		m.Types = append(m.Types, kt)
	}
	for _, n := range slices.Sorted(maps.Keys(mf.Sampling)) {
		s := mf.Sampling[n]
		p := preset{Name: n}
		for _, f := range sampling.Fields { // in the spec's order
			raw, ok := s[f.JSON]
			if !ok {
				continue // a key the preset leaves out is not set
			}
			v, problem := samplingSetting(f, raw)
			if problem != "" {
				at("sampling."+n+"."+f.JSON, "preset %s: %s", n, problem)
				continue
			}
			p.Given = append(p.Given, setting{Field: f, Value: v})
		}
		if !identName.MatchString(n) {
			at("sampling."+n, "preset name %q must be an identifier", n)
		}
		m.Presets = append(m.Presets, p)
	}
	if b := mf.Behaviour; b != nil {
		kb := &behaviour{ChatTemplate: b.ChatTemplate, Stop: b.Stop}
		if b.AddBOS == nil || b.AddEOS == nil {
			at("behaviour", "[behaviour] needs add_bos and add_eos")
		} else {
			kb.AddBOS, kb.AddEOS = *b.AddBOS, *b.AddEOS
		}
		if b.ChatTemplate != "" && !slices.Contains(chatTemplates, strings.ToLower(b.ChatTemplate)) {
			at("behaviour.chat_template", "unknown chat template %q (known: %s)", b.ChatTemplate, strings.Join(chatTemplates[:len(chatTemplates)-1], ", "))
		}
		for _, s := range b.Stop {
			if s == "" {
				at("behaviour.stop", "an empty stop string")
			}
		}
		m.Behaviour = kb
	}
	if d := mf.DFlash; d != nil {
		kd := &dflashPairing{DraftModel: d.DraftModel, TargetLayerIDs: d.TargetLayerIDs,
			Gamma: intDefault(dflash, "gamma"), WindowSize: intDefault(dflash, "window_size"), MaskTokenID: intDefault(dflash, "mask_token_id")}
		setIf(&kd.Gamma, d.Gamma)
		setIf(&kd.WindowSize, d.WindowSize)
		setIf(&kd.MaskTokenID, d.MaskTokenID)
		if d.DraftModel == "" {
			at("dflash", "[dflash] needs draft_model")
		}
		if kd.Gamma <= 0 {
			at("dflash.gamma", "[dflash] gamma %d must be positive", kd.Gamma)
		}
		if kd.WindowSize < 0 || kd.MaskTokenID < 0 {
			at("dflash", "[dflash] window_size and mask_token_id must be >= 0")
		}
		for _, id := range kd.TargetLayerIDs {
			if id < 0 {
				at("dflash.target_layer_ids", "[dflash] target layer id %d must be >= 0", id)
			}
		}
		m.DFlash = kd
	}
	for _, l := range slices.Sorted(maps.Keys(mf.ExpectedAbsent)) {
		reason := strings.TrimSpace(mf.ExpectedAbsent[l])
		key := "expected_absent." + l
		if reason == "" {
			at(key, "expected-absent lookup %s has no reason", l)
		}
		if _, _, _, ok := splitLookup(l); !ok {
			at(key, "expected-absent lookup %q is not module.kernel or module.kernel[type]", l)
		}
		a := absent{Lookup: l, Reason: reason, Pos: layers[len(layers)-1].path}
		for i := len(layers) - 1; i >= 0; i-- {
			if line, ok := layers[i].lines[key]; ok {
				a.Pos, a.Line = layers[i].path, line
				break
			}
		}
		m.ExpectedAbsent = append(m.ExpectedAbsent, a)
	}
	return m
}

// checkSamplingKeys reports every key of table (preset name, as layer l sets it) that names no
// option of the Sampling spec, at the line that sets it.
func checkSamplingKeys(l *modelLayer, name string, table samplingTable, sampling *configs.Config, ke *kerr) {
	for _, k := range slices.Sorted(maps.Keys(table)) {
		if !slices.ContainsFunc(sampling.Fields, func(f *configs.Field) bool { return f.JSON == k }) {
			key := "sampling." + name + "." + k
			ke.at(l.path, l.lines.first(key), "unknown key %s", key)
		}
	}
}

// samplingSetting is raw, the value a preset gives option f, as a value of f's kind, or what is
// wrong with it: a TOML value of another type, a negative value of an unsigned option, or one
// out of the option's bounds (its min, max and enum tags).
func samplingSetting(f *configs.Field, raw any) (value any, problem string) {
	mismatch := func(want string) string { return fmt.Sprintf("%s %s is not %s", f.JSON, shown(raw), want) }
	switch f.Kind {
	case "float64", "float32":
		var x float64
		switch r := raw.(type) {
		case float64:
			x = r
		case int64:
			x = float64(r)
		default:
			return nil, mismatch("a number")
		}
		value = x
		if f.Kind == "float32" {
			value = float32(x)
		}
	case "int", "int64", "uint64":
		x, ok := raw.(int64)
		switch {
		case !ok:
			return nil, mismatch("an integer")
		case f.Kind == "int":
			value = int(x)
		case f.Kind == "int64":
			value = x
		case x < 0:
			return nil, f.JSON + " must be >= 0"
		default:
			value = uint64(x)
		}
	case "bool":
		if _, ok := raw.(bool); !ok {
			return nil, mismatch("a bool")
		}
		value = raw
	case "string":
		if _, ok := raw.(string); !ok {
			return nil, mismatch("a string")
		}
		value = raw
	default:
		return nil, fmt.Sprintf("%s is a %s option, which a preset cannot set", f.JSON, f.Kind)
	}
	if msg := f.Check(fmt.Sprint(value)); msg != "" {
		return nil, fmt.Sprintf("%s %s is %s", f.JSON, shown(value), msg)
	}
	return value, ""
}

// shown is v as an error message quotes it: a string in Go's quotes, anything else as fmt prints it.
func shown(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// effectiveModules gives m its modules on t: common/ with the model's own files replacing
// their namesakes (recording the kernels a replacement drops).
func effectiveModules(t *target, m *model) {
	var common, own []*module
	for _, mod := range t.Modules {
		switch mod.Dir {
		case "common":
			common = append(common, mod)
		case m.Dir:
			own = append(own, mod)
		}
	}
	byName := map[string]*module{}
	for _, o := range own {
		byName[o.Name] = o
	}
	for _, c := range common {
		o, ok := byName[c.Name]
		if !ok {
			m.Modules = append(m.Modules, c)
			continue
		}
		var dropped []string
		for _, k := range c.Kernels {
			if !contains(o.Kernels, k) {
				dropped = append(dropped, k)
			}
		}
		m.Shadowed = append(m.Shadowed, shadow{Module: c.Name, Kernels: dropped})
	}
	m.Modules = append(m.Modules, own...)
	sort.Slice(m.Modules, func(i, j int) bool { return m.Modules[i].Name < m.Modules[j].Name })
}

// lookupSyntax is a kernel lookup: module.kernel, with the ggml type of the data asked for in
// brackets ([*]: every type the kernel does not declare).
var lookupSyntax = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\[([A-Za-z0-9_]+|\*)\])?$`)

// splitLookup reads a lookup written as lookupSyntax says.
func splitLookup(l string) (module, kernel, typ string, ok bool) {
	sm := lookupSyntax.FindStringSubmatch(l)
	if sm == nil {
		return "", "", "", false
	}
	return sm[1], sm[2], sm[3], true
}

// resolvesIn says where lookup l (module, kernel, typ) resolves among mods: the module of that
// name with the kernel, taking typ when it asks for one; "[*]" resolves nowhere.
func resolvesIn(mods []*module, module, kernel, typ string) *module {
	if typ == "*" {
		return nil
	}
	for _, x := range mods {
		if x.Name != module || !contains(x.Kernels, kernel) {
			continue
		}
		if typ == "" || contains(x.Types[kernel], typ) {
			return x
		}
	}
	return nil
}

// checkAbsent refuses an expected-absent entry that in fact resolves on t: it would hide
// nothing (a target overlay can declare what only that target lacks).
func checkAbsent(t *target, m *model, ke *kerr) {
	for _, a := range m.ExpectedAbsent {
		mod, k, typ, _ := splitLookup(a.Lookup)
		if x := resolvesIn(m.Modules, mod, k, typ); x != nil {
			ke.at(a.Pos, a.Line, "expected-absent lookup %s resolves on target %s (in %s)", a.Lookup, t.Dir, x.Source)
		}
	}
}

// targetAbsent reads HARDWARE.toml's [expected_absent]: lookups of the target's own kernels that
// may fail for every model (a type a kernel does not take, with its reason). Each must name a
// kernel of the target, and must not resolve.
func targetAbsent(t *target, entries map[string]string, hwPath string, lines keyLineMap, ke *kerr) {
	for _, l := range slices.Sorted(maps.Keys(entries)) {
		line := lines["expected_absent."+l]
		reason := strings.TrimSpace(entries[l])
		mod, k, typ, ok := splitLookup(l)
		switch {
		case !ok:
			ke.at(hwPath, line, "expected-absent lookup %q is not module.kernel or module.kernel[type]", l)
			continue
		case reason == "":
			ke.at(hwPath, line, "expected-absent lookup %s has no reason", l)
		}
		found := false
		for _, x := range t.Modules {
			found = found || x.Name == mod && contains(x.Kernels, k)
		}
		if !found {
			ke.at(hwPath, line, "expected-absent lookup %s names no kernel of target %s", l, t.Dir)
		} else if x := resolvesIn(t.Modules, mod, k, typ); x != nil {
			ke.at(hwPath, line, "expected-absent lookup %s resolves on target %s (in %s)", l, t.Dir, x.Source)
		}
		t.ExpectedAbsent = append(t.ExpectedAbsent, absent{Lookup: l, Reason: reason, Pos: hwPath, Line: line})
	}
}

// intDefault is the default of c's int field with JSON name json, which must exist.
func intDefault(c *configs.Config, json string) int {
	for _, f := range c.Fields {
		if f.JSON == json && f.Kind == "int" {
			v, _ := strconv.Atoi(f.Default) // the loader checked it
			return v
		}
	}
	panic("kernelgen: the " + c.GoName + " spec has no int field " + json)
}

// chatTemplates are the names of the chat templates built into toy's runtime (engines/sample's
// TemplateByName, which takes them in any case), that a model's [behaviour] chat_template may
// name; the last, qwen, is another name of qwen2.5. A test of this package checks them against
// the runtime's.
var chatTemplates = []string{"chatml", "smollm2", "qwen2.5", "gemma", "qwen"}

func setIf[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

func describeType(t modelType) string {
	if t.HiddenSize == 0 {
		return fmt.Sprintf("(%s, any hidden size)", t.ModelType)
	}
	return fmt.Sprintf("(%s, %d)", t.ModelType, t.HiddenSize)
}

// checkCollisions refuses two models of a target that declare the same (model_type,
// hidden_size) when either has no match_names to break the tie.
func checkCollisions(t *target, ke *kerr) {
	for i, a := range t.Models {
		for _, b := range t.Models[i+1:] {
			if len(a.MatchNames) > 0 && len(b.MatchNames) > 0 {
				continue
			}
			for _, ta := range a.Types {
				for _, tb := range b.Types {
					if ta.ModelType == tb.ModelType && ta.HiddenSize == tb.HiddenSize {
						ke.at(b.Pos, tb.Line, "model type %s is also declared by %s:%d, and %s has no match_names to break the tie",
							describeType(tb), a.Pos, ta.Line, map[bool]string{true: a.Dir, false: b.Dir}[len(a.MatchNames) == 0])
					}
				}
			}
		}
	}
}

// decodeStrict decodes root/path into v, reporting a syntax or type error at its line and every
// key v does not know at the line that sets it. It returns false when v could not be decoded;
// unknown keys are reported and the rest of the file is still checked. It also returns the
// metadata, which says which keys the file sets.
func decodeStrict(root, path string, v any, ke *kerr) (toml.MetaData, bool) {
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		ke.at(path, 0, "%v", err)
		return toml.MetaData{}, false
	}
	md, err := toml.Decode(string(data), v)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			ke.at(path, pe.Position.Line, "%s", pe.Message)
		} else {
			ke.at(path, 0, "%v", err)
		}
		return md, false
	}
	lines := keyLines(root, path)
	for _, k := range md.Undecoded() {
		// A key under an unknown table is reported once, with its table.
		if len(k) > 1 && isUndecoded(md, k[:len(k)-1]) {
			continue
		}
		// A key inside the value of a preset's option (an inline table) is that value's:
		// samplingSetting judges it against the option's type.
		if len(k) > 3 && k[0] == "sampling" {
			continue
		}
		name := strings.Join(k, ".")
		ke.at(path, lines.first(name), "unknown key %s", name)
	}
	return md, true
}

func isUndecoded(md toml.MetaData, k toml.Key) bool {
	for _, u := range md.Undecoded() {
		if strings.Join(u, ".") == strings.Join(k, ".") {
			return true
		}
	}
	return false
}

// keyLineMap maps a dotted key path to the lines that set it, in order.
type keyLineMap map[string]int

func (m keyLineMap) first(k string) int { return m[k] }

func (m keyLineMap) all(k string) []int {
	var out []int
	for i := 0; ; i++ {
		l, ok := m[fmt.Sprintf("%s#%d", k, i)]
		if !ok {
			return out
		}
		out = append(out, l)
	}
}

var (
	tomlTable = regexp.MustCompile(`^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$`)
	tomlKey   = regexp.MustCompile(`^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*=`)
)

// keyLines scans a TOML file for the line of each table header and key (BurntSushi/toml keeps
// positions private). key is the dotted path without quotes; key#i is its i-th occurrence.
func keyLines(root, path string) keyLineMap {
	m := keyLineMap{}
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return m
	}
	add := func(k string, line int) {
		if _, ok := m[k]; !ok {
			m[k] = line
		}
		for i := 0; ; i++ {
			if _, ok := m[fmt.Sprintf("%s#%d", k, i)]; !ok {
				m[fmt.Sprintf("%s#%d", k, i)] = line
				break
			}
		}
	}
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	inMulti := false
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.Count(text, `"""`)%2 == 1 || strings.Count(text, `'''`)%2 == 1 {
			inMulti = !inMulti
			if !inMulti {
				continue
			}
		}
		if inMulti && !tomlKey.MatchString(text) {
			continue
		}
		if t := tomlTable.FindStringSubmatch(text); t != nil && !strings.Contains(text, "=") {
			table = unquoteKey(t[1])
			add(table, line)
			continue
		}
		if k := tomlKey.FindStringSubmatch(text); k != nil {
			full := unquoteKey(k[1])
			if table != "" {
				full = table + "." + full
			}
			add(full, line)
		}
	}
	return m
}

func unquoteKey(s string) string {
	var parts []string
	for _, p := range splitDotted(s) {
		p = strings.TrimSpace(p)
		p = strings.Trim(p, `"'`)
		parts = append(parts, p)
	}
	return strings.Join(parts, ".")
}

// splitDotted splits a dotted key at dots outside quotes.
func splitDotted(s string) []string {
	var parts []string
	var cur strings.Builder
	quote := rune(0)
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote = r
			cur.WriteRune(r)
		case r == '.':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	return append(parts, cur.String())
}
