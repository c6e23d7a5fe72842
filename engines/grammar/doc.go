// Package grammar constrains generation to a formal language: a grammar in GBNF, llama.cpp's
// format, or one compiled from a JSON Schema (FromJSONSchema) or the grammar of any JSON object
// (JSONObject), as OpenAI's response_format asks.
//
// Parse compiles GBNF text to a Grammar whose rules work over bytes: each character class is
// spelled out as the UTF-8 byte sequences of its code points, so that a token holding part of
// a character is matched like any other. A Matcher follows one text through the grammar as a
// pushdown automaton (the sets of stacks llama.cpp's grammar keeps), numbering each set of
// stacks the first time it is met and keeping its transitions: it builds, lazily, the
// deterministic automaton of the texts it sees.
//
// At each step of generation, Mask sets to -Inf the logits of the tokens whose bytes cannot
// continue the grammar; the end token (EOS) only where the text is complete. It finds them by
// walking a Vocab's trie of token bytes with the current state, dropping every token below a
// prefix that leads nowhere, and keeps the result per state: inside a JSON string every step is
// the same state and costs one pass over the logits. Accept advances with the token drawn.
package grammar
