package infer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/speculative"
	"github.com/toyml/toy/engines/tokenizer"
)

// openDraft opens the draft model of `toy generate -draft` on the target's backend (two thread
// pools would spin against each other between the phases), and a
// decoder of the target decoder's context and options. A vocabulary unlike the target's is an
// error here, before anything runs.
func openDraft(d *cli.DecoderFlags, target *decoding.GGUFModel, dec *decoding.Decoder, path string) (*decoding.GGUFModel, *decoding.Decoder, error) {
	opts, err := d.Options()
	if err != nil {
		return nil, nil, err
	}
	dm, err := decoding.OpenModel(path, decoding.ModelOptions{Backend: target.Backend(), Mmap: d.Mmap}) // one thread pool for both
	if err != nil {
		return nil, nil, fmt.Errorf("-draft: %w", err)
	}
	if err := speculative.CheckVocab(target, dm); err != nil {
		dm.Close()
		return nil, nil, err
	}
	if _, _, err := cli.GateDecoders(io.Discard, "generate -draft", dm, path, "", opts, d.AllowUnresolved); err != nil {
		dm.Close()
		return nil, nil, fmt.Errorf("-draft: %w", err)
	}
	opts.Threads = d.Threads
	opts.MaxContext = dec.MaxContext()
	ddec, err := decoding.NewDecoder(dm, opts)
	if err != nil {
		dm.Close()
		return nil, nil, fmt.Errorf("-draft: %w", err)
	}
	return dm, ddec, nil
}

// generateSpeculative is toy generate's loop with a draft model or a DFlash drafter (newSp
// makes the speculative decoder for the sampler): the same output as without it when greedy,
// the same distribution when sampling (speculative.Speculative), and a report of the steps on
// standard error, with toy generate's timing summary (start is when the command started).
func generateSpeculative(stdout, stderr io.Writer, dec *decoding.Decoder, newSp func(*sample.Sampler) (*speculative.Speculative, error), p sample.Params, seedGiven bool,
	ids []int32, prompt string, chat bool, n int, tok *tokenizer.Tokenizer, stops []string, start time.Time) error {
	drawSeed(&p, seedGiven, stderr)
	sp, err := newSp(sample.NewSampler(p))
	if err != nil {
		return err
	}
	defer sp.Close()
	timing := &genTiming{load: time.Since(start), promptTokens: len(ids), replies: 1}
	t0 := time.Now()
	if err := sp.Prompt(ids); err != nil {
		return err
	}
	timing.promptTime = time.Since(t0)
	var first time.Time // when the first token was out
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	if !chat {
		fmt.Fprint(out, prompt)
	}
	stopper := sample.NewStopper(stops...)
	emitted := 0
	report := func() {
		st := sp.Stats()
		fmt.Fprintf(stderr, "toy generate: speculative, γ %d: %d tokens in %d verification steps (%d of them plain, after steps that accepted nothing), %.2f of %d proposals accepted per step (%.0f %% accepted)\n",
			sp.Gamma(), emitted, st.Steps, st.Plain, st.MeanAccepted(), sp.Gamma(), 100*st.AcceptRate())
		fmt.Fprintf(stderr, "toy generate: draft %.3f s, verify %.3f s, accept %.3f s, rollback %.6f s\n",
			st.DraftTime.Seconds(), st.VerifyTime.Seconds(), st.AcceptTime.Seconds(), st.RollbackTime.Seconds())
		timing.generated = emitted
		if emitted > 1 {
			timing.afterFirst, timing.genTime = emitted-1, time.Since(first)
		}
		timing.report(stderr)
	}
loop:
	for n < 0 || emitted < n {
		limit := math.MaxInt32
		if n >= 0 {
			limit = n - emitted
		}
		toks, err := sp.Step(limit)
		if err != nil {
			if errors.Is(err, decoding.ErrContextFull) {
				fmt.Fprint(out, stopper.Flush())
				fmt.Fprintln(out)
				out.Flush()
				contextFullNote(stderr, dec)
				report()
				return nil
			}
			return err
		}
		for _, next := range toks {
			if next == tok.EOS() && tok.EOS() >= 0 {
				break loop
			}
			if emitted++; emitted == 1 {
				first = time.Now()
			}
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
