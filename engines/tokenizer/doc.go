// Package tokenizer is a byte-level BPE tokenizer compatible with llama.cpp's
// "gpt2" tokenizer model (the one GPT-2, LLaMA 3, Qwen 2, SmolLM2, Falcon and
// DeepSeek use), a SentencePiece BPE tokenizer compatible with its "llama"
// model (LLaMA 1 and 2, Mistral 7B v0.1, TinyLlama) and a WordPiece
// tokenizer compatible with its "bert" model (BERT and the embedding models
// built on it), chosen by Vocab.Model.
//
// A model trained by toy stores its tokenizer in the GGUF checkpoint under
// llama.cpp's keys (tokenizer.ggml.*); other GGUF runtimes (llama.cpp,
// ollama) then tokenize exactly as toy does. The package trains such a
// vocabulary (Train), encodes and decodes text with it, writes it as GGUF
// key-value pairs (Tokenizer.GGUF) and loads it, or any other gpt2-model
// vocabulary, back from them (FromGGUF).
//
// # Byte level
//
// As in GPT-2, every byte is first mapped to a printable rune: the 188
// printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') to themselves and the other
// 68 to U+0100 + n in byte order (so ' ' is 'Ġ' and '\n' is 'Ċ'). Normal
// tokens and merges are stored in that mapped form (MapBytes, UnmapBytes).
// Control and user-defined tokens are stored as their raw text, as llama.cpp
// expects.
//
// # Pre-tokenizers
//
// Before BPE the text is split into chunks that merges never cross. The
// split is chosen by llama.cpp's tokenizer.ggml.pre value, mapped to regexes
// as llama.cpp's src/llama-vocab.cpp does (PreTokenizerByName,
// PreTokenizerNames).
//
// "gpt-2" (also "phi-2", "mpt", "olmo", "jais", "jina-es", ...) is GPT-2's
// regex:
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// "llama3" (also "llama-bpe", "llama-v3", "falcon3", "pixtral", ..., and
// "dbrx", "smaug-bpe") is LLaMA 3's:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// For all of these but "dbrx" and "smaug-bpe" llama.cpp also sets
// ignore_merges (a chunk that is a whole token is emitted as that token
// without running the merges) and defaults add_bos to true; so does this
// package.
//
// "qwen2" (also "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan") is
// LLaMA 3's regex with single digits (\p{N} for \p{N}{1,3}).
//
// "smollm" (also "starcoder", "refact", "command-r", "codeshell", "exaone",
// "minerva-7b") splits off every digit on its own (\p{N}), then runs
// GPT-2's regex on the pieces in between. SmolLM and SmolLM2 GGUF files carry
// this name: llama.cpp gives LLAMA_VOCAB_PRE_TYPE_SMOLLM the same regexes as
// STARCODER, which is what their Hugging Face pre-tokenizer
// (Digits(individual_digits) then ByteLevel) does.
//
// "falcon" is the "default" split below without its \p{N}+ stage and with
// the backquote among the punctuation: [\p{P}\$\+<=>\^~\|`]+, GPT-2's regex,
// then [0-9][0-9][0-9].
//
// "deepseek-llm" is six regexes in turn: [\r\n]; \s? before a run of
// DeepSeek's own letter class (ASCII, Latin, Greek, Cyrillic, Armenian,
// Georgian, Cherokee and other cased scripts, listed range by range);
// \s? before a run of [!-/:-~！-／：-～‘-‟　-。]; \s+$ (white space that
// ends a piece); [一-龥ࠀ-一가-퟿]+ (U+0800 to U+9FA5 and the Hangul
// syllables); \p{N}+. "deepseek-coder" is [\r\n], \s?\p{L}+, \s?\p{P}+,
// the same CJK ranges, and single \p{N}. llama.cpp runs these with
// std::regex on a text where every non-ASCII white space stands for \s and
// belongs to none of the listed classes; so do these splits.
//
// "default" (and a missing or empty pre) is llama.cpp's fallback, four
// regexes in turn:
//
//	[\p{P}\$\+<=>\^~\|]+
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
//	\p{N}+
//	[0-9][0-9][0-9]
//
// They are written by hand (Go's regexp has no lookahead) and follow
// llama.cpp: a later regex only splits the pieces of an earlier one, text
// no match covers stays a piece of its own, \s is Unicode White_Space,
// \p{L}, \p{N} and \p{P} are Unicode's categories. One deliberate
// difference: llama.cpp replaces bytes that are not valid UTF-8 by U+FFFD
// before splitting; here each such byte stays itself and is classed like
// U+FFFD (neither letter, digit nor space), so chunks fall at the same places
// and encoding stays lossless. Character classes come from Go's unicode
// tables (Unicode 15.0), with CJK Extension I (Unicode 15.1) added as
// letters, as llama.cpp's tables have it; a scan of every code point below
// U+32400 against llama.cpp finds no other difference.
//
// # Encoding and decoding
//
// FromGGUF changes token types from their text as llama.cpp's loader does:
// an end-of-turn or fill-in-the-middle token ("<|im_end|>", "<｜fim▁begin｜>",
// "<|fim_prefix|>", ...) of a kind the file names no id for, and every
// end-of-generation text ("<|endoftext|>", "<|eot_id|>", ...), becomes a
// control token; gpt-oss's "<|channel|>", "<|message|>", "<|start|>" and
// "<|constrain|>" become user-defined.
//
// Within a chunk the merges are applied lowest rank first, leftmost first on
// ties, as llama.cpp does. A symbol the merges leave that is not a token is
// emitted byte by byte (a trained vocabulary holds all 256 byte tokens).
// Control, unknown and user-defined tokens are matched verbatim in the text
// before pre-tokenization, longest first: user-defined ones always, control
// ones only with EncodeOptions.ParseSpecial (llama.cpp's parse_special).
// Decoding maps normal tokens back to bytes; invalid UTF-8 is kept as is.
// Control tokens decode to their text only with DecodeOptions.Special.
// llama.cpp's clean_spaces option of detokenization is not applied.
//
// # SentencePiece (the "llama" model)
//
// A "llama" vocabulary stores normal tokens with each space as "▁" (U+2581),
// the 256 byte tokens as "<0x00>".."<0xFF>" (type byte) and a score per
// token (tokenizer.ggml.scores). Encoding follows llama.cpp's
// llm_tokenizer_spm: the text is split at special tokens as above; each piece
// of ordinary text gets a leading space if tokenizer.ggml.add_space_prefix is
// set (the default) and it is the first piece or follows a special token; its
// spaces become "▁"; it is cut into UTF-8 characters (by the length the lead
// byte announces, as llama.cpp does, so a stray lead byte takes the next
// bytes with it); then adjacent symbols are merged, the pair whose
// concatenation is the token of highest score first (leftmost on ties),
// while any pair is a token. A symbol left that is no token is emitted byte
// by byte as its "<0xNN>" tokens (or the token that is the byte itself; UNK
// or nothing where there is none, where llama.cpp would throw). Merges and
// the pre-tokenizer are not used. An empty text encodes to nothing (BOS
// alone with AddSpecial, BOS being added by default).
//
// Decoding turns "▁" back into spaces and byte tokens into their bytes; with
// add_space_prefix one leading space of the first token is removed, as
// llama.cpp's detokenize does. So decoding undoes encoding for text without
// special tokens that is valid UTF-8 and holds no "▁" of its own. A special
// token followed by text does not round-trip (the text gains a space), nor
// does a BOS (llama.cpp removes the space only from the first token, and
// DecodeOptions.RemoveSpecial, like its remove_special, then keeps it).
//
// # WordPiece (the "bert" model)
//
// llama.cpp's GGUFs store a BERT vocabulary with its word-start pieces
// marked "▁" ("▁play") and its continuation pieces ("##ing" in BERT's
// vocab.txt) bare ("ing"). Encoding follows llama.cpp's llm_tokenizer_wpm:
// the text is split at special tokens; ordinary text is cut into words as
// BERT's basic tokenizer does it there: every code point is replaced by the
// first code point of its canonical decomposition (so precomposed accents
// are stripped, combining ones kept), white space separates words, NUL,
// U+FFFD, invalid UTF-8 and control, format and private-use characters are
// dropped, punctuation, ASCII symbols and CJK ideographs are words of their
// own, and everything is lower-cased. Each word, with "▁" before it, is cut
// greedily into the longest token from its start (any token, by its text);
// a word that cannot be cut entirely becomes one UNK ([UNK]). AddSpecial
// puts BOS ([CLS]) before the text and SEP ([SEP],
// tokenizer.ggml.seperator_token_id) after it, whatever add_bos_token says,
// as llama.cpp does. Pieces decode as SentencePiece ones ("▁" is a space);
// add_space_prefix is off by default, as in llama.cpp, so a decoded text
// starts with the first word's space (llama.cpp's clean_spaces, on for
// bert, is not applied, as for gpt2). Bytes that are not valid UTF-8 are
// dropped as U+FFFD is; llama.cpp does the same except that its decoder
// takes overlong forms and surrogates for code points.
//
// # Training
//
// Train pre-tokenizes the texts ("gpt-2" by default), counts the distinct
// chunks, starts from the special tokens (ids 0, 1, ...) and the 256 byte
// tokens and repeatedly merges the most frequent adjacent pair until the
// vocabulary has the requested size or no pair occurs often enough. Pair
// counts are kept up to date incrementally, so a merge touches only the
// distinct chunks that hold the pair. The result depends only on the input:
// ties are broken by the pair's bytes.
package tokenizer
