// Package data holds token corpora: a small binary file format for token ids, a streaming
// atomic writer for it, random access by token index, a deterministic and resumable window
// sampler for training batches, and the built-in default text corpus (the Go standard
// library's own source).
//
// # Token-corpus format (version 1)
//
// A corpus file is a fixed 28-byte header followed by the token ids. All integers are
// little-endian.
//
//	offset  size  field
//	0       8     magic, the bytes "TOYTOKS\n"
//	8       4     version, uint32, currently 1
//	12      4     token width in bytes, uint32: 2 or 4
//	16      4     vocabulary size, uint32: every id is in [0, vocab)
//	20      8     count, uint64: the number of tokens that follow
//	28      ...   count tokens, each an unsigned little-endian integer of the token width
//
// The file size is exactly 28 + count*width bytes; [Open] rejects anything else (a short file
// was cut off, a longer one has trailing garbage). Width 2 allows a vocabulary of at most
// 65536 ids, width 4 at most 2^31 (ids are int32 in Go). Token i lives at byte
// 28 + i*width, so any window can be read without scanning.
//
// [Writer] streams tokens into a temporary file in the destination's directory, patches the
// count into the header at [Writer.Close], fsyncs and renames it into place: a reader never
// sees a partial corpus, and a failed or abandoned write leaves nothing at the destination.
//
// # Sampling
//
// A [Sampler] draws window offsets for training batches. The offset of draw number k depends
// only on the seed, k, the corpus length and the window length (a PCG generator from
// math/rand/v2 seeded from the seed and k), so the sampler's whole state is its step counter
// and [SamplerAt] resumes a run at any step without replaying the draws before it.
//
// # The default corpus
//
// [GoSource] reads the .go files of the Go installation's src tree in a fixed order and splits
// them into a training part and a held-out part (about 5%) by a hash of each file's path.
package data
