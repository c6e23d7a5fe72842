package serve

import (
	"io"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/speculative"
	"github.com/toyml/toy/engines/tokenizer"
)

// Config is what a Server serves and how.
type Config struct {
	// Model, Decoder and Tokenizer run the requests; the Server owns none of them (the caller
	// closes them after Close).
	Model     *decoding.GGUFModel
	Decoder   *decoding.BatchDecoder
	Tokenizer *tokenizer.Tokenizer
	// ModelName is the model's id in /v1/models; a request naming another model is refused
	// (404) unless AnyModelName. An empty "model" field is accepted.
	ModelName string
	// AnyModelName serves a request naming another model ("gpt-4", a client's default) with
	// this one, as llama-server serves its one model. /v1/models lists ModelName alone either
	// way, /v1/models/{id} knows no other id, and replies name ModelName.
	AnyModelName bool
	// AddBOS starts every prompt with the tokenizer's BOS.
	AddBOS bool
	// Template is the chat template; nil: chat completions are refused (400).
	Template *sample.Template
	// Stops are stop strings every request has besides its own (the model's behaviour).
	Stops []string
	// Defaults are the sampling settings of fields a request leaves out (the kernel table's
	// default preset, as toy generate applies it).
	Defaults sample.Params
	// Queue is how many requests may wait for a slot (default 64), counting those being read
	// and tokenized beyond the free slots; one more is refused with 429 before its body is
	// read.
	Queue int
	// NoPromptCache makes every request compute its whole prompt. By default a request takes
	// the free slot whose last sequence shares the longest prefix with its prompt and reuses
	// the keys and values cached there for that prefix (a conversation's next turn), or copies
	// a longer prefix from another slot's sequence, running or finished (prompts with a
	// common system message), computing only the rest (place).
	NoPromptCache bool
	// APIKeys, when any, are the keys a request to /v1/ must present as "Authorization: Bearer
	// KEY" (what OpenAI's clients send of their api_key; the scheme in any case); others get
	// 401. /health, /metrics and the chat page need none (the page asks for a key when the
	// API refuses it). New refuses an empty key, and one with blanks around it or a control
	// character, which no request could present.
	APIKeys []string
	// Info is what /health reports about the model and the kernel gate.
	Info map[string]any
	// LogRequests writes a line to Log for each request to the API and the page when it ends:
	// method, path, status, time and the reply's tokens or the error. The path, and the error
	// when it quotes the request, are quoted when they hold anything but printable characters,
	// so that no request can end the line and forge another.
	LogRequests bool
	// Log receives one line per notable event (nil: none).
	Log io.Writer
	// Draft, when not nil, makes the slots decode speculatively (speculate.go): a decoder of a
	// smaller model of the same vocabulary, with the Decoder's slots and at least its slot
	// context, proposes up to DraftTokens tokens (0: speculative.DefaultDraftTokens) per step after a
	// slot's last token, which the slot's verification checks in the step's batch. A proposal the
	// draft gives a probability below DraftMinProbability (0: none) ends the drafting. The
	// Server does not own it.
	Draft               *decoding.BatchDecoder
	DraftTokens         int
	DraftMinProbability float64
	// DFlash, when not nil and Draft is, drafts instead: a DFlash drafter of the model, one
	// state per slot, reading the hidden states New makes the Decoder capture; a step proposes
	// up to DraftTokens (0: all its block's) tokens. The Server does not own it.
	DFlash *speculative.DFlash
}
