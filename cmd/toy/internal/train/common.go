package train

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/generated/config"
)

// resumeOptions are the flags a resumed run takes from the command line, with the option each
// sets (recipes.ResumableOptions): the options specs/engines marks resume:"keep" that have a
// flag. They change how the run is computed or reported, not what it computes. -steps sets a
// new total; every other flag would change the run and is refused.
var resumeOptions = func() []struct{ flag, option string } {
	var out []struct{ flag, option string }
	for _, group := range [][]config.Option{config.ComputeOptions(), config.TrainingOptions(), config.FinalSampleOptions()} {
		for _, o := range group {
			if o.Resumable && o.Flag != "" {
				out = append(out, struct{ flag, option string }{o.Flag, o.JSON})
			}
		}
	}
	return out
}()

// resumeFlagList lists the resumable flags fs defines (all of them for a nil fs).
func resumeFlagList(fs *flag.FlagSet) string {
	var names []string
	for _, o := range resumeOptions {
		if fs == nil || fs.Lookup(o.flag) != nil {
			names = append(names, "-"+o.flag)
		}
	}
	return strings.Join(names, ", ")
}

// resumeFlags sorts the flags set on a -resume command line: -steps sets a new total
// (newTotal), the resumable ones are kept over the run's own (keep, their options; listed on
// stdout), any other is a usage error naming them all.
func resumeFlags(set map[string]bool, stdout io.Writer) (keep []string, newTotal bool, err error) {
	var refused, kept []string
	for name := range set {
		switch name {
		case "resume", cli.AllowUnresolvedFlag: // the gate's override changes no option of the run
			continue
		case "steps":
			newTotal = true
			kept = append(kept, "-steps")
			continue
		}
		i := slices.IndexFunc(resumeOptions, func(o struct{ flag, option string }) bool { return o.flag == name })
		if i < 0 {
			refused = append(refused, "-"+name)
			continue
		}
		keep = append(keep, resumeOptions[i].option)
		kept = append(kept, "-"+name)
	}
	slices.Sort(refused)
	slices.Sort(kept)
	if len(refused) > 0 {
		return nil, false, cli.Usagef("-resume: %s would change the run, which keeps its own model, data, batch, schedule, optimizer and seeds (start a new run to change them; with -resume only -steps and the flags that do not change what it computes apply: %s)",
			strings.Join(refused, ", "), resumeFlagList(nil))
	}
	if len(kept) > 0 {
		fmt.Fprintf(stdout, "resume: %s from the command line, every other option from the run\n", strings.Join(kept, ", "))
	}
	return keep, newTotal, nil
}

// isTerminal reports whether w is a terminal (progress is then one redrawn line).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
