package config

import (
	"flag"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRegisterFlagsBindsTheFields: parsing random values for a group's flags (an alias for the
// seed) sets exactly the fields they name, the others keeping the preset's values, and the
// help shows the preset's values as defaults.
func TestRegisterFlagsBindsTheFields(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		tr, err := TrainingPreset("finetune")
		require.NoError(t, err)
		want := tr
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		tr.RegisterFlags(fs)
		assert.Equal(t, strconv.Itoa(want.Steps), fs.Lookup("steps").DefValue)
		var args []string
		if rng.IntN(2) == 0 {
			want.Steps = 1 + rng.IntN(1000)
			args = append(args, "-steps", strconv.Itoa(want.Steps))
		}
		if rng.IntN(2) == 0 {
			want.LR = rng.Float64()
			args = append(args, "-lr", strconv.FormatFloat(want.LR, 'g', -1, 64))
		}
		if rng.IntN(2) == 0 {
			want.RunsDir = "d" + strconv.Itoa(rng.IntN(100))
			args = append(args, "-runs", want.RunsDir)
		}
		if rng.IntN(2) == 0 {
			want.Git = true
			args = append(args, "-git")
		}
		require.NoError(t, fs.Parse(args))
		assert.Equal(t, want, tr, "args %q", args)

		s := DefaultSampling()
		wantS := s
		fs = flag.NewFlagSet("s", flag.ContinueOnError)
		s.RegisterFlags(fs)
		wantS.Seed, wantS.TopK = rng.Uint64(), rng.IntN(100)
		require.NoError(t, fs.Parse([]string{"-s", strconv.FormatUint(wantS.Seed, 10), "-top-k", strconv.Itoa(wantS.TopK)}))
		assert.Equal(t, wantS, s)
	}
}

// TestRegisterFlagsOnly: only registers the named flags, and a name the group lacks panics.
func TestRegisterFlagsOnly(t *testing.T) {
	tr := DefaultTraining()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	tr.RegisterFlags(fs, "steps", "lr")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	assert.Equal(t, []string{"lr", "steps"}, names)
	assert.Panics(t, func() { tr.RegisterFlags(flag.NewFlagSet("u", flag.ContinueOnError), "temp") })
}

// TestResumableOptionsAreTheGroups': ResumableOptions lists the resumable options of the groups'
// tables, and no key twice.
func TestResumableOptionsAreTheGroups(t *testing.T) {
	var want []string
	for _, g := range [][]Option{ComputeOptions(), TrainingOptions(), SequencesOptions(), FinalSampleOptions(), SamplingOptions(), DFlashOptions()} {
		for _, o := range g {
			if o.Resumable {
				want = append(want, o.JSON)
			}
		}
	}
	got := ResumableOptions()
	assert.ElementsMatch(t, want, got)
	slices.Sort(got)
	assert.Len(t, slices.Compact(got), len(want))
	assert.Contains(t, want, "threads")
	assert.NotContains(t, want, "lr", "the schedule is the run's own")
}
