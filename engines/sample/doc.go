// Package sample turns a model's logits into tokens and a chat into a
// prompt: the pieces a text-generation loop needs around the forward pass.
//
// # Sampling
//
// Sampler is a llama.cpp-style sampler chain over one row of logits, driven
// by Params and a seeded PCG generator (math/rand/v2), so that a given seed
// reproduces the same tokens. The chain runs in this order:
//
//	logit bias → penalties → constraint → top-k → temperature → softmax → top-p → min-p → draw
//
// A Constraint (Sampler.Constrain; engines/grammar's Matcher, for structured
// output) masks the logits of the tokens a grammar does not allow next, before
// the filters, so that they only ever see allowed tokens.
//
// Temperature 0 is greedy decoding: the first index of the largest
// (penalised, masked) logit. NaN logits count as -Inf; a -Inf token is never chosen
// unless every logit is -Inf or NaN, in which case token 0 is returned.
//
// A row costs about one pass over the vocabulary: top-k keeps a heap of the k
// best and compares every other logit with its worst; without top-k, the
// softmax covers every token within e^64 of the most likely (rarer ones are
// dropped: their probability is below 1.6e-28 of its) and top-p adds up
// buckets of the logit, sorting only the bucket where it stops.
// BenchmarkSample times both on SmolLM2's and Qwen's vocabularies.
//
// # Stop strings
//
// Stopper watches streamed text for stop strings. It is fed decoded pieces
// one at a time, returns what is safe to print and holds back any suffix that
// may still grow into a stop string, so the stop string itself is never
// printed.
//
// # Chat templates
//
// Template renders a conversation of Messages into a prompt, for the two
// families toy runs: ChatML (SmolLM2, Qwen; the ChatML, SmolLM2 and Qwen25
// values) and Gemma. DetectTemplate recognises a GGUF tokenizer.chat_template
// by its markers, as llama.cpp's llm_chat_detect_template does, and
// TemplateByName looks one up by name. NewJinjaTemplate renders a model's own
// Jinja template (tokenizer.chat_template) with a Jinja engine
// (github.com/ardanlabs/jinja), with the variables Hugging Face's
// apply_chat_template provides, tools and tool calls included, and derives
// its stop strings. Tools, an assistant's tool calls and tool messages that
// a template does not write itself (the named ones; a Jinja template's, as
// probes find) are written in the Hermes convention (<tools>, <tool_call>,
// <tool_response> tags), and Template.ToolSyntax says in which form the
// model is told to call.
//
// The rendered prompt contains the special tokens as text ("<|im_start|>",
// "<start_of_turn>"), so it must be encoded with the tokenizer's
// ParseSpecial option. It never contains a BOS token: Gemma's jinja template
// starts by writing bos_token, but Gemma GGUF files set
// tokenizer.ggml.add_bos_token, so encoding with AddSpecial adds the BOS
// token once; writing "<bos>" here as well would give two. A Jinja template
// drops its leading bos_token likewise when JinjaOptions.AddsBOS says the
// caller adds the BOS token, as llama.cpp does.
package sample
