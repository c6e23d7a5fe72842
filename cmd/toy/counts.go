package main

import (
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// atLeast gives the least value of each of a command's integer flags that counts something (a
// batch, steps, tokens, classes to show, ...): a value below it, given on the command line, is
// refused as a usage error naming the flag (exit 2) before the command reads or writes
// anything, instead of reaching a slice, make() or an engine's own check. A command's flags with
// a check of their own (-t, -n, a model's shape through its spec) are not listed.
type atLeast map[string]int64

// check refuses every flag of fs set on the command line below its least value, naming each.
func (m atLeast) check(fs *flag.FlagSet) error {
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
	return usagef("%s", strings.Join(bad, "; "))
}

// The count flags of each command, with their least values. Where 0 or -1 means something (all
// chunks, none, the default), that is the least value.
var (
	classifyCounts = atLeast{"k": 1}
	generateCounts = atLeast{"top-k": 0, "repeat-last-n": -1}
	trainCounts    = atLeast{"batch": 1, "eval-batches": 1, "eval-every": 0, "generated": 0, "max-text-bytes": 0,
		"sample": 0, "save-every": 0, "seq": 1, "steps": 1, "t": 0, "tokens": 1, "warmup": 0}
	vitCounts = atLeast{"batch": 1, "eval-every": 0, "held": 1, "save-every": 0, "shapes": 0, "shift": 0,
		"steps": 1, "t": 0, "warmup": 0}
	finetuneCounts = atLeast{"batch": 1, "eval-batches": 1, "eval-every": 0, "freeze-embeddings-steps": 0,
		"max-text-bytes": 0, "r": 1, "recompute": 0, "save-every": 0, "seq": 1, "steps": 1, "t": 0, "warmup": 0}
	dflashCounts = atLeast{"anchors": 1, "gamma": 1, "generated": 0, "layers": 1, "mask-token": 0, "max-text-bytes": 0,
		"seq": 1, "seqs": 1, "steps": 1, "train-window": 1, "warmup": 0, "window": 0}
	benchModelCounts = atLeast{"n": 0, "p": 0, "r": 0, "t": 1}
	benchTrainCounts = atLeast{"batch": 1, "seq": 1, "steps": 1}
	benchFTCounts    = atLeast{"profile": 0}
)
