package llama

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/toyml/toy/engines/sample"
)

// SpecBenchResult is what BenchSpeculative measured: greedy generation of the same tokens
// by the target alone and with the draft.
type SpecBenchResult struct {
	Target, Draft             string
	TargetParams, DraftParams int64
	Threads, Gamma            int
	PromptTokens, GenTokens   int
	Plain, Spec               BenchStat // generated tokens per second, prompt excluded
	Stats                     SpecStats // summed over the timed speculative repetitions
	Identical                 bool      // every speculative run gave the target's tokens
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

// BenchSpeculative measures greedy generation of genTokens tokens after a random prompt of
// promptTokens (at least 1), by the target at targetPath alone (Prompt, then Next per token)
// and by speculative decoding with the draft at draftPath proposing gamma tokens per step. Each
// is repeated opts.Reps times after a warm-up, on the same prompt; the prompt's processing is
// not timed. opts.Decoder configures both decoders.
func BenchSpeculative(targetPath, draftPath string, promptTokens, genTokens, threads, gamma int, opts BenchOptions) (SpecBenchResult, error) {
	r := SpecBenchResult{Target: targetPath, Draft: draftPath, Threads: threads, Gamma: gamma, PromptTokens: promptTokens, GenTokens: genTokens}
	if promptTokens < 1 || genTokens < 1 || threads < 1 {
		return r, fmt.Errorf("llama: speculative bench of %d prompt and %d generated tokens on %d threads", promptTokens, genTokens, threads)
	}
	if r.Gamma == 0 {
		r.Gamma = DefaultDraftTokens
	}
	tm, err := OpenModel(targetPath, ModelOptions{Threads: threads, NoMmap: opts.NoMmap})
	if err != nil {
		return r, err
	}
	defer tm.Close()
	dm, err := OpenModel(draftPath, ModelOptions{Threads: threads, NoMmap: opts.NoMmap})
	if err != nil {
		return r, err
	}
	defer dm.Close()
	if err := CheckVocab(tm, dm); err != nil {
		return r, err
	}
	r.DraftParams = dm.Params()
	dd, err := NewDecoder(dm, r.decoderOptions(opts))
	if err != nil {
		return r, err
	}
	defer dd.Close()
	return benchSpeculative(r, tm, opts, func(td *Decoder) (*Speculative, error) {
		return NewSpeculative(td, dd, r.Gamma, sample.NewSampler(sample.GreedyParams()))
	})
}

// BenchDFlash is BenchSpeculative with the DFlash drafter at drafterPath, made for the target
// (its block size sets γ: Gamma−1 proposals per step).
func BenchDFlash(targetPath, drafterPath string, promptTokens, genTokens, threads int, opts BenchOptions) (SpecBenchResult, error) {
	r := SpecBenchResult{Target: targetPath, Draft: drafterPath, Threads: threads, PromptTokens: promptTokens, GenTokens: genTokens}
	if promptTokens < 1 || genTokens < 1 || threads < 1 {
		return r, fmt.Errorf("llama: dflash bench of %d prompt and %d generated tokens on %d threads", promptTokens, genTokens, threads)
	}
	tm, err := OpenModel(targetPath, ModelOptions{Threads: threads, NoMmap: opts.NoMmap})
	if err != nil {
		return r, err
	}
	defer tm.Close()
	df, err := OpenDFlash(drafterPath, tm)
	if err != nil {
		return r, err
	}
	defer df.Close()
	r.Gamma, r.DraftParams = df.Cfg.Gamma-1, df.Params()
	return benchSpeculative(r, tm, opts, func(td *Decoder) (*Speculative, error) {
		return NewDFlashSpeculative(td, df, sample.NewSampler(sample.GreedyParams()))
	})
}

// decoderOptions are the options of the bench's decoders: opts.Decoder on the model's
// backend, with room for the prompt in one batch and for the generation's last proposals.
func (r SpecBenchResult) decoderOptions(opts BenchOptions) DecoderOptions {
	do := opts.Decoder
	do.Threads = 0
	do.Batch = max(r.PromptTokens, r.Gamma+1)
	do.MaxContext = r.PromptTokens + r.GenTokens + r.Gamma + 1
	return do
}

// benchSpeculative measures the target alone and with the speculative decoder newSp makes of
// the target's decoder, as BenchSpeculative describes.
func benchSpeculative(r SpecBenchResult, tm *GGUFModel, opts BenchOptions, newSp func(td *Decoder) (*Speculative, error)) (SpecBenchResult, error) {
	promptTokens, genTokens := r.PromptTokens, r.GenTokens
	if opts.Reps == 0 {
		opts.Reps = 5
	}
	if opts.Reps < 1 {
		return r, fmt.Errorf("llama: %d repetitions", opts.Reps)
	}
	r.TargetParams = tm.Params()
	td, err := NewDecoder(tm, r.decoderOptions(opts))
	if err != nil {
		return r, err
	}
	defer td.Close()
	rng := rand.New(rand.NewPCG(opts.Seed, 0x62656e6368))
	prompt := make([]int32, promptTokens)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(tm.Arch.Vocab))
	}

	var want []int32
	plain := func() (float64, error) {
		td.Reset()
		s := sample.NewSampler(sample.GreedyParams())
		logits, err := td.Prompt(prompt)
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
			if logits, err = td.Next(x); err != nil {
				return 0, err
			}
		}
		el := time.Since(t0)
		want = hist[promptTokens:]
		return float64(genTokens) / el.Seconds(), nil
	}
	sp, err := newSp(td)
	if err != nil {
		return r, err
	}
	defer sp.Close()
	r.Identical = true
	timed := false
	spec := func() (float64, error) {
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
	run := func(f func() (float64, error)) (BenchStat, error) {
		timed = false
		return repeated(opts.Reps, f, func() { timed = true })
	}
	if r.Plain, err = run(plain); err != nil {
		return r, err
	}
	if r.Spec, err = run(spec); err != nil {
		return r, err
	}
	return r, nil
}
