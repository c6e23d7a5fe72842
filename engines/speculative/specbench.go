package speculative

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
)

// SpecBenchResult is what BenchSpeculative measured: greedy generation of the same tokens
// by the target alone and with the draft.
type SpecBenchResult struct {
	Target, Draft             string
	TargetParams, DraftParams int64
	Threads, Gamma            int
	MinProbability            float64 // the drafter's (SpecDrafter.MinProbability)
	PromptTokens, GenTokens   int
	Plain, Spec               decoding.BenchStat // generated tokens per second, prompt excluded
	Stats                     SpecStats          // summed over the timed speculative repetitions
	Identical                 bool               // every speculative run gave the target's tokens
	// Elapsed is the timed speculative repetitions' generation time, of which Stats' phases
	// are parts; the rest (Other) is the loop's own: slices, the step's bookkeeping.
	Elapsed time.Duration
}

// Other is the part of Elapsed outside the phases Stats times.
func (r SpecBenchResult) Other() time.Duration {
	st := r.Stats
	return r.Elapsed - st.DraftTime - st.VerifyTime - st.AcceptTime - st.RollbackTime
}

// Speedup is the speculative decoder's mean tokens/s over the target alone's.
func (r SpecBenchResult) Speedup() float64 {
	if r.Plain.Mean == 0 {
		return 0
	}
	return r.Spec.Mean / r.Plain.Mean
}

// SpecDrafter names a drafter BenchSpeculative measures: a draft model proposing Gamma tokens
// a step (0: DefaultDraftTokens), or, with DFlash, a DFlash drafter made for the target, of
// whose blocks the target verifies the first Gamma proposals (0: all, the block size − 1).
// MinProbability is the drafter's minimum probability (Speculative.SetMinProbability; 0: off).
type SpecDrafter struct {
	Path           string
	Gamma          int
	DFlash         bool
	MinProbability float64
}

// BenchSpeculative measures greedy generation of genTokens tokens after a random prompt of
// promptTokens (at least 1; opts.Prompt, when set, is the prompt instead), by the target at targetPath alone (Prompt, then Next per token)
// and by speculative decoding with each drafter. They run in rounds, after a warm-up round:
// each of opts.Reps repetitions runs the target alone, then each drafter, on the same prompt,
// so that a load that changes during the run weighs on all alike; the prompt's processing is
// not timed. It returns one result per drafter, each with the target alone's figures (Plain)
// of the same rounds. opts.Decoder configures every decoder.
func BenchSpeculative(targetPath string, drafters []SpecDrafter, promptTokens, genTokens, threads int, opts decoding.BenchOptions) ([]SpecBenchResult, error) {
	if promptTokens < 1 || genTokens < 1 || threads < 1 || len(drafters) == 0 {
		return nil, fmt.Errorf("speculative bench of %d prompt and %d generated tokens on %d threads with %d drafters", promptTokens, genTokens, threads, len(drafters))
	}
	if opts.Reps == 0 {
		opts.Reps = 5
	}
	if opts.Reps < 1 {
		return nil, fmt.Errorf("speculative bench: %d repetitions", opts.Reps)
	}
	if len(opts.Prompt) > 0 {
		promptTokens = len(opts.Prompt)
	}
	tm, err := decoding.OpenModel(targetPath, decoding.ModelOptions{Threads: threads, Mmap: opts.Mmap})
	if err != nil {
		return nil, err
	}
	defer tm.Close()
	if err := opts.RunGate(tm, decoderOptions(opts, promptTokens, genTokens, 0)); err != nil {
		return nil, err
	}
	var closers []interface{ Close() error }
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i].Close()
		}
	}()
	// Each decoder has room for the prompt in one batch and for the generation's last
	// proposals.
	gamma := 0
	results := make([]SpecBenchResult, len(drafters))
	opens := make([]func(td *decoding.Decoder) (*Speculative, error), len(drafters)) // each drafter's decoder of td
	for i, dr := range drafters {
		r := SpecBenchResult{Target: targetPath, Draft: dr.Path, Threads: threads, Gamma: dr.Gamma, MinProbability: dr.MinProbability, PromptTokens: promptTokens, GenTokens: genTokens, TargetParams: tm.Params()}
		if dr.DFlash {
			df, err := OpenDFlash(dr.Path, tm)
			if err != nil {
				return nil, err
			}
			closers = append(closers, df)
			if r.Gamma == 0 {
				r.Gamma = df.Cfg.Gamma - 1
			}
			r.DraftParams = df.Params()
			results[i] = r
			opens[i] = func(td *decoding.Decoder) (*Speculative, error) {
				return NewDFlashSpeculative(td, df, r.Gamma, sample.NewSampler(sample.GreedyParams()))
			}
		} else {
			if r.Gamma == 0 {
				r.Gamma = DefaultDraftTokens
			}
			dm, err := decoding.OpenModel(dr.Path, decoding.ModelOptions{Backend: tm.Backend(), Mmap: opts.Mmap}) // the target's thread pool
			if err != nil {
				return nil, err
			}
			closers = append(closers, dm)
			if err := CheckVocab(tm, dm); err != nil {
				return nil, err
			}
			if err := opts.RunGate(dm, decoderOptions(opts, promptTokens, genTokens, 0)); err != nil {
				return nil, err
			}
			r.DraftParams = dm.Params()
			results[i] = r
			opens[i] = func(td *decoding.Decoder) (*Speculative, error) {
				dd, err := decoding.NewDecoder(dm, decoderOptions(opts, promptTokens, genTokens, gamma))
				if err != nil {
					return nil, err
				}
				closers = append(closers, dd)
				return NewSpeculative(td, dd, r.Gamma, sample.NewSampler(sample.GreedyParams()))
			}
		}
		gamma = max(gamma, r.Gamma)
	}
	newDecoder := func() (*decoding.Decoder, error) {
		d, err := decoding.NewDecoder(tm, decoderOptions(opts, promptTokens, genTokens, gamma))
		if err == nil {
			closers = append(closers, d)
		}
		return d, err
	}

	prompt := opts.Prompt
	if len(prompt) == 0 {
		rng := rand.New(rand.NewPCG(opts.Seed, 0x62656e6368))
		prompt = make([]int32, promptTokens)
		for i := range prompt {
			prompt[i] = int32(rng.IntN(tm.Arch.Vocab))
		}
	}
	pd, err := newDecoder() // the target alone's: no drafter sets it up
	if err != nil {
		return nil, err
	}
	var want []int32
	plain := func() (float64, error) {
		pd.Reset()
		s := sample.NewSampler(sample.GreedyParams())
		logits, err := pd.Prompt(prompt)
		if err != nil {
			return 0, err
		}
		hist := slices.Clone(prompt)
		t0 := time.Now()
		for len(hist) < promptTokens+genTokens {
			x := s.Sample(logits, hist)
			hist = append(hist, x)
			if len(hist) == promptTokens+genTokens {
				break
			}
			if logits, err = pd.Next(x); err != nil {
				return 0, err
			}
		}
		el := time.Since(t0)
		want = hist[promptTokens:]
		return float64(genTokens) / el.Seconds(), nil
	}
	sps := make([]*Speculative, len(drafters))
	for i, open := range opens {
		td, err := newDecoder()
		if err != nil {
			return nil, err
		}
		if sps[i], err = open(td); err != nil {
			return nil, err
		}
		closers = append(closers, sps[i])
		if err := sps[i].SetMinProbability(drafters[i].MinProbability); err != nil {
			return nil, err
		}
		results[i].Identical = true
	}
	// spec runs drafter i once; timed, its counters and times add to its result.
	spec := func(i int, timed bool) (float64, error) {
		sp, r := sps[i], &results[i]
		if err := sp.Prompt(prompt); err != nil {
			return 0, err
		}
		var got []int32
		t0 := time.Now()
		for len(got) < genTokens {
			toks, err := sp.Step(genTokens - len(got))
			if err != nil {
				return 0, err
			}
			got = append(got, toks...)
		}
		el := time.Since(t0)
		r.Identical = r.Identical && slices.Equal(got, want)
		if timed {
			st := sp.Stats()
			r.Stats.Steps += st.Steps
			r.Stats.Drafted += st.Drafted
			r.Stats.Accepted += st.Accepted
			r.Stats.Generated += st.Generated
			r.Stats.DraftTime += st.DraftTime
			r.Stats.VerifyTime += st.VerifyTime
			r.Stats.AcceptTime += st.AcceptTime
			r.Stats.RollbackTime += st.RollbackTime
			r.Elapsed += el
		}
		return float64(genTokens) / el.Seconds(), nil
	}
	plainTS := make([]float64, 0, opts.Reps)
	specTS := make([][]float64, len(drafters))
	for round := 0; round <= opts.Reps; round++ {
		timed := round > 0 // round 0 warms up
		v, err := plain()
		if err != nil {
			return nil, err
		}
		if timed {
			plainTS = append(plainTS, v)
		}
		for i := range drafters {
			v, err := spec(i, timed)
			if err != nil {
				return nil, err
			}
			if timed {
				specTS[i] = append(specTS[i], v)
			}
		}
	}
	for i := range results {
		results[i].Plain, results[i].Spec = decoding.Stat(plainTS), decoding.Stat(specTS[i])
	}
	return results, nil
}

// decoderOptions are the options of the bench's decoders: opts.Decoder on the model's
// backend, with room for the prompt in one batch and for the generation's last gamma
// proposals.
func decoderOptions(opts decoding.BenchOptions, promptTokens, genTokens, gamma int) decoding.DecoderOptions {
	do := opts.Decoder
	do.Threads = 0
	do.Batch = max(promptTokens, gamma+1)
	do.MaxContext = promptTokens + genTokens + gamma + 1
	return do
}
