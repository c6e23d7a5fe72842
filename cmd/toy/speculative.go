package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/toyml/toy/engines/llama"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
)

// openDraft opens the draft model of `toy generate -draft` on the target's backend (two thread
// pools would spin against each other between the phases), and a
// decoder of the target decoder's context and options. A vocabulary unlike the target's is an
// error here, before anything runs.
func openDraft(d *decoderFlags, target *llama.GGUFModel, dec *llama.Decoder, path string) (*llama.GGUFModel, *llama.Decoder, error) {
	opts, err := d.options()
	if err != nil {
		return nil, nil, err
	}
	dm, err := llama.OpenModel(path, llama.ModelOptions{Backend: target.Backend(), Mmap: d.mmap}) // one thread pool for both
	if err != nil {
		return nil, nil, fmt.Errorf("-draft: %w", err)
	}
	if err := llama.CheckVocab(target, dm); err != nil {
		dm.Close()
		return nil, nil, err
	}
	if _, _, err := gateDecoders(io.Discard, "generate -draft", dm, path, "", opts, d.allowUnresolved); err != nil {
		dm.Close()
		return nil, nil, fmt.Errorf("-draft: %w", err)
	}
	opts.Threads = d.threads
	opts.MaxContext = dec.MaxContext()
	ddec, err := llama.NewDecoder(dm, opts)
	if err != nil {
		dm.Close()
		return nil, nil, fmt.Errorf("-draft: %w", err)
	}
	return dm, ddec, nil
}

// generateSpeculative is toy generate's loop with a draft model or a DFlash drafter (newSp
// makes the speculative decoder for the sampler): the same output as without it when greedy,
// the same distribution when sampling (llama.Speculative), and a report of the steps on
// standard error.
func generateSpeculative(stdout, stderr io.Writer, dec *llama.Decoder, newSp func(*sample.Sampler) (*llama.Speculative, error), p sample.Params, drawSeed bool,
	ids []int32, prompt string, chat bool, n int, tok *tokenizer.Tokenizer, stops []string) error {
	if drawSeed && p.Temperature > 0 {
		p.Seed = rand.Uint64()
		fmt.Fprintf(stderr, "toy generate: seed %d (-seed %d repeats this generation)\n", p.Seed, p.Seed)
	}
	sp, err := newSp(sample.NewSampler(p))
	if err != nil {
		return err
	}
	defer sp.Close()
	t0 := time.Now()
	if err := sp.Prompt(ids); err != nil {
		return err
	}
	tGen := time.Now()
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	if !chat {
		fmt.Fprint(out, prompt)
	}
	stopper := sample.NewStopper(stops...)
	emitted := 0
	report := func() {
		st := sp.Stats()
		el := time.Since(tGen)
		fmt.Fprintf(stderr, "toy generate: speculative, γ %d: %d tokens in %d verification steps (%d of them plain, after steps that accepted nothing), %.2f of %d proposals accepted per step (%.0f %% accepted)\n",
			sp.Gamma(), emitted, st.Steps, st.Plain, st.MeanAccepted(), sp.Gamma(), 100*st.AcceptRate())
		fmt.Fprintf(stderr, "toy generate: prompt %.3f s; draft %.3f s, verify %.3f s, accept %.3f s, rollback %.6f s; %.2f tokens/s\n",
			tGen.Sub(t0).Seconds(), st.DraftTime.Seconds(), st.VerifyTime.Seconds(), st.AcceptTime.Seconds(), st.RollbackTime.Seconds(), float64(emitted)/el.Seconds())
	}
loop:
	for n < 0 || emitted < n {
		limit := math.MaxInt32
		if n >= 0 {
			limit = n - emitted
		}
		toks, err := sp.Step(limit)
		if err != nil {
			if errors.Is(err, llama.ErrContextFull) {
				fmt.Fprint(out, stopper.Flush())
				fmt.Fprintln(out)
				out.Flush()
				fmt.Fprintf(stderr, "toy generate: the context of %d tokens is full: stopped (-c sets a larger one, -ctx-full shift goes on)\n", dec.MaxContext())
				report()
				return nil
			}
			return err
		}
		for _, next := range toks {
			if next == tok.EOS() && tok.EOS() >= 0 {
				break loop
			}
			emitted++
			piece, err := tok.Piece(next, tokenizer.DecodeOptions{})
			if err != nil {
				return err
			}
			safe, stopped := stopper.Feed(piece)
			fmt.Fprint(out, safe)
			out.Flush()
			if stopped {
				break loop
			}
		}
	}
	fmt.Fprint(out, stopper.Flush())
	fmt.Fprintln(out)
	out.Flush()
	report()
	return nil
}
