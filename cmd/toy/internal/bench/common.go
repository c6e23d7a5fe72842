package bench

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/cpupeak"
	"github.com/toyml/toy/internal/cputime"
)

// benchTypes are the weight types -types accepts (those ggml.MeasureMatMul can fill).
var benchTypes = []ggml.Type{ggml.F32, ggml.F16, ggml.BF16, ggml.Q8_0, ggml.Q4_0, ggml.Q4_1,
	ggml.Q5_0, ggml.Q5_1, ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K}

func parseBenchTypes(s string) ([]ggml.Type, error) {
	var types []ggml.Type
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, t := range benchTypes {
			if strings.EqualFold(ggml.TypeName(t), name) {
				types, found = append(types, t), true
				break
			}
		}
		if !found {
			var names []string
			for _, t := range benchTypes {
				names = append(names, ggml.TypeName(t))
			}
			return nil, fmt.Errorf("-types: unknown weight type %q (want %s)", name, strings.Join(names, ", "))
		}
	}
	return types, nil
}

// randomShape is the architecture of a training preset's shape and the weight type of
// -random and -random-type (toy bench model and serve).
func randomShape(preset, typeName string) (transformer.Architecture, ggml.Type, error) {
	c, err := config.LlamaPreset(preset)
	if err != nil {
		return transformer.Architecture{}, 0, cli.AsUsage(err)
	}
	types, err := parseBenchTypes(typeName)
	if err != nil || len(types) != 1 {
		return transformer.Architecture{}, 0, cli.Usagef("-random-type %q: want one weight type", typeName)
	}
	return transformer.ArchitectureFromConfig(c), types[0], nil
}

// writeRandom writes random weights of preset's shape to path, with a synthetic tokenizer of
// its vocabulary when withTokenizer (what a server, or llama.cpp loading the file, needs).
func writeRandom(path, preset, typeName string, withTokenizer bool, stderr io.Writer) error {
	a, typ, err := randomShape(preset, typeName)
	if err != nil {
		return err
	}
	if !withTokenizer {
		fmt.Fprintf(stderr, "toy bench: writing random %s weights of %s's shape …\n", ggml.TypeName(typ), preset)
		return transformer.WriteRandomGGUF(path, a, typ, 1)
	}
	if a.Vocab < 256 {
		return cli.Usagef("-random %s: a vocabulary of %d tokens is too small for a byte-level tokenizer (256 at least)", preset, a.Vocab)
	}
	tok, err := tokenizer.Synthetic(a.Vocab)
	if err != nil {
		return err
	}
	var kvs []transformer.KV
	for _, kv := range tok.GGUF() {
		kvs = append(kvs, transformer.KV{Key: kv.Key, Value: kv.Value})
	}
	fmt.Fprintf(stderr, "toy bench: writing random %s weights of %s's shape …\n", ggml.TypeName(typ), preset)
	return transformer.WriteRandomGGUF(path, a, typ, 1, kvs...)
}

// cpuPeak measures the FMA peak of the cores (cpupeak) when the backend is the CPU; the zero
// Peak (no peak) otherwise.
func cpuPeak(be *ggml.Backend) cpupeak.Peak {
	if be.Name() != "CPU" {
		return cpupeak.Peak{}
	}
	return cpupeak.Measure(200 * time.Millisecond)
}

// memory reads the process's resident set and its peak from /proc (0 where unavailable).
func memory() (rss, peak float64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return rss, peak
}

// profileStep computes one training step (step, on tr) node by node and prints its time by op
// and the top costliest kinds of node: the wall time and the process's CPU time of each (with
// one thread on a busy machine the CPU time is the steadier; it is sorted on). bench train and
// bench finetune share it.
func profileStep(w io.Writer, name string, tr *training.Trainer, step func() error, top int) error {
	byOp, byKind := map[string]*nodeCost{}, map[string]*nodeCost{}
	var wall, cpu time.Duration
	last := cputime.Process()
	tr.SetTimed(func(n *ggml.Tensor, d time.Duration) {
		now := cputime.Process()
		c := now - last
		last = now
		wall, cpu = wall+d, cpu+c
		for _, k := range []struct {
			m   map[string]*nodeCost
			key string
		}{{byOp, n.OpLabel()}, {byKind, nodeKind(n)}} {
			if k.m[k.key] == nil {
				k.m[k.key] = &nodeCost{key: k.key}
			}
			k.m[k.key].n++
			k.m[k.key].wall += d
			k.m[k.key].cpu += c
		}
	})
	defer tr.SetTimed(nil)
	if err := step(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: one step node by node: %.3f s wall, %.3f s CPU\n", name, wall.Seconds(), cpu.Seconds())
	print := func(title string, m map[string]*nodeCost, limit int) {
		costs := make([]*nodeCost, 0, len(m))
		for _, c := range m {
			costs = append(costs, c)
		}
		slices.SortFunc(costs, func(a, b *nodeCost) int { return cmp.Or(cmp.Compare(b.cpu, a.cpu), cmp.Compare(b.wall, a.wall)) })
		fmt.Fprintf(w, "%9s %9s %6s %6s  %s\n", "wall ms", "CPU ms", "CPU %", "nodes", title)
		for i, c := range costs {
			if i == limit {
				break
			}
			fmt.Fprintf(w, "%9.1f %9.1f %6.1f %6d  %s\n", float64(c.wall.Microseconds())/1e3, float64(c.cpu.Microseconds())/1e3, 100*c.cpu.Seconds()/cpu.Seconds(), c.n, c.key)
		}
	}
	print("op", byOp, len(byOp))
	print("node (op: result ← operands; ᵀ a strided operand)", byKind, top)
	return nil
}

// nodeCost is the time nodes of one kind took and how many there were.
type nodeCost struct {
	key       string
	n         int
	wall, cpu time.Duration
}

// nodeKind describes a node by its op, result and operands (type and shape, ᵀ where an operand
// is not contiguous), so that the nodes of the same work in every layer group together.
func nodeKind(n *ggml.Tensor) string {
	shape := func(t *ggml.Tensor) string {
		s := fmt.Sprintf("%s%v", ggml.TypeName(t.Type()), t.Shape())
		if !t.IsContiguous() {
			s += "ᵀ"
		}
		return s
	}
	k := n.OpLabel() + ": " + shape(n) + " ←"
	for i := 0; i < 3; i++ {
		if s := n.Src(i); s != nil {
			k += " " + shape(s)
		}
	}
	return k
}
