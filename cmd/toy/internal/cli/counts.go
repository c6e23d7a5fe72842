package cli

import (
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/toyml/toy/generated/config"
)

// AtLeast gives the least value of each of a command's integer flags that counts something (a
// batch, steps, tokens, classes to show, ...): a value below it, given on the command line, is
// refused as a usage error naming the flag (exit 2) before the command reads or writes
// anything, instead of reaching a slice, make() or an engine's own check. A command's flags with
// a check of their own (-t, -n, a model's shape through its spec) are not listed.
type AtLeast map[string]int64

// with adds the least values the option groups declare for their integer flags (the spec's min
// tags) to m, and returns it; a flag m already names keeps m's.
func (m AtLeast) with(groups ...[]config.Option) AtLeast {
	for _, g := range groups {
		for _, o := range g {
			if o.Flag == "" || o.Min == "" || o.Kind != "int" && o.Kind != "int64" {
				continue
			}
			if _, ok := m[o.Flag]; ok {
				continue
			}
			least, err := strconv.ParseInt(o.Min, 10, 64)
			if err != nil {
				panic(fmt.Sprintf("the spec's min of -%s, %q, is not an integer", o.Flag, o.Min))
			}
			m[o.Flag] = least
		}
	}
	return m
}

// Check refuses every flag of fs set on the command line below its least value, naming each.
func (m AtLeast) Check(fs *flag.FlagSet) error {
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		least, ok := m[f.Name]
		if !ok {
			return
		}
		v, err := strconv.ParseInt(f.Value.String(), 10, 64)
		switch {
		case err != nil || v >= least:
		case least == 0:
			bad = append(bad, fmt.Sprintf("-%s %d is negative", f.Name, v))
		default:
			bad = append(bad, fmt.Sprintf("-%s %d: want at least %d", f.Name, v, least))
		}
	})
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return Usagef("%s", strings.Join(bad, "; "))
}

// The count flags of each command, with their least values. Where 0 or -1 means something (all
// chunks, none, the default), that is the least value. The flags of the option groups take
// theirs from the spec (specs/engines' min tags, through with).
var (
	ClassifyCounts = AtLeast{"k": 1}
	GenerateCounts = AtLeast{}.with(config.SamplingOptions())
	TrainCounts    = AtLeast{"generated": 0, "max-text-bytes": 0, "tokens": 1}.with(
		config.TrainingOptions(), config.SequencesOptions(), config.ComputeOptions(), config.FinalSampleOptions())
	ViTCounts      = AtLeast{"held": 1, "shapes": 0, "shift": 0}.with(config.TrainingOptions(), config.ComputeOptions())
	FinetuneCounts = AtLeast{"freeze-embeddings-steps": 0, "max-text-bytes": 0, "r": 1, "recompute": 0}.with(
		config.TrainingOptions(), config.SequencesOptions(), config.ComputeOptions())
	DFlashCounts = AtLeast{"anchors": 1, "generated": 0, "layers": 1, "max-text-bytes": 0, "seqs": 1, "train-window": 1}.with(
		config.DFlashOptions(), config.TrainingOptions(), config.SequencesOptions())
	BenchModelCounts = AtLeast{"n": 0, "p": 0, "r": 0}.with(config.ComputeOptions())
	BenchTrainCounts = AtLeast{"batch": 1, "seq": 1, "steps": 1}
	BenchFTCounts    = AtLeast{"profile": 0}
)
