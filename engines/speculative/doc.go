// Package speculative decodes speculatively: a drafter proposes tokens that the target
// decoder (engines/decoding) verifies in one step, so that greedy replies are the target's own
// and sampled ones follow its distribution. The drafter is a smaller model of the same
// vocabulary (NewSpeculative) or a DFlash block drafter (DFlash, NewDFlashSpeculative), a small
// transformer that reads the target's hidden states and fills a block of masked positions in
// one forward; TrainDFlash trains one against its target (on engines/training's finite checks
// and AdamW), and BenchSpeculative measures either against plain decoding.
package speculative
