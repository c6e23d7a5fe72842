// Package runs keeps training-run bundles: one directory per run holding an append-only event
// log and the run's weights.
//
// # Layout
//
//	<root>/<id>/events.jsonl   the event log, schema "toy/v1"
//	<root>/<id>/weights/                  checkpoints (Run.SaveCheckpoint, Run.LatestCheckpoint):
//	<root>/<id>/weights/step-<N>/         one checkpoint's files, written together, renamed once
//	<root>/<id>/weights/checkpoint.json   the manifest naming it (step, run id, files with sizes
//	                                      and SHA-256), written last: the commit point
//	<root>/<id>/weights/model.gguf        a link to the latest checkpoint's model
//
// Runs saved before the manifest have weights/model.gguf and weights/optimizer.gguf only; they
// are read as a Legacy checkpoint and replaced by the layout above at their next save.
//
// Run ids ([NewID]) are a UTC timestamp and four random hex digits, "20261130-153012-a1b2",
// so a directory listing sorts runs by start time.
//
// # Events (schema "toy/v1")
//
// The log holds one JSON object per line, each with a "type":
//
//	run_start  {"schema":"toy/v1","type":"run_start","run_id","time","backend":{"kind",…},"model":{…},"config":{…},"seeds":{…},"git":{"sha","branch"}}
//	step       {"type":"step","step","loss","lr","tokens_per_s","time"}
//	eval       {"type":"eval","step","loss"}                 (loss on held-out data after step steps)
//	run_end    {"type":"run_end","step","loss","time","reason"}  (reason "done" or "interrupted")
//
// Times are RFC 3339 strings. "backend" is stamped by the run: {"kind":"cpu"} (or "cuda",
// "metal"), the linked "ggml" and the "cpu_features" its kernels were compiled for. "model" and
// "config" are whatever JSON the caller's model and training configurations marshal to, with
// snake_case keys named as in the GGUF/spec ("d_model", "n_layers", "seq_len"). "seeds" names
// every seed the run depends on ({"init":1,"data":1,…}). "git" appears only when the caller
// supplies it.
//
// Logs written before run_start took this shape, with "backend":"cpu" a string, "training"
// (Go field names as keys) for "config" and one "seed" for "seeds", read back too (RunStart's
// Legacy is then set), so that older runs can still be resumed and plotted. Losses and rates are
// JSON numbers; since JSON has none for them, NaN and ±Inf are written as the strings "NaN",
// "+Inf" and "-Inf" (a diverged run still logs) and read back as the float values.
//
// The first event of a log is a run_start, and every run_start carries the schema; a resumed
// run may append another run_start. [Run] appends each event as one write to a file opened
// with O_APPEND and fsyncs it, so a crash can lose at most a partly written last line.
//
// # Reading
//
// [ReadEvents] parses a log back. A malformed line, an unknown type or schema, or a log not
// starting with run_start is an error naming the line, and no events are returned. The one
// exception is the last line when it has no terminating newline and does not parse: that is
// what a crash in the middle of a write leaves, so ReadEvents returns the events before it
// together with a [*TruncatedError] (errors.Is(err, ErrTruncated) holds). A last line without
// a newline that does parse is a complete event and is returned without error. [OpenRun]
// repairs a truncated log before appending to it.
package runs
