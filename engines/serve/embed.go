package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/tokenizer"
)

// maxEmbeddingInputs bounds the inputs of one /v1/embeddings request, as OpenAI's API does.
const maxEmbeddingInputs = 2048

// embedRequest is the body of POST /v1/embeddings.
type embedRequest struct {
	Model string `json:"model"`
	// Input is a string, an array of strings, an array of token ids or an array of arrays of
	// token ids.
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

// embedInputs reads "input" into token sequences: strings are encoded (with BOS when the
// server adds it), token arrays taken as they are; each must hold at least one token and fit
// a slot's context.
func (s *Server) embedInputs(raw json.RawMessage) ([][]int32, *apiError) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, badRequest("input", "\"input\" is required")
	}
	var texts []string
	var seqs [][]int32
	var one string
	var manyTexts []string
	var ids []int32
	var manyIDs [][]int32
	switch { // each into a variable of its own: a failed decoding may leave part of its value
	case json.Unmarshal(raw, &one) == nil:
		texts = []string{one}
	case json.Unmarshal(raw, &manyTexts) == nil:
		texts = manyTexts
	case json.Unmarshal(raw, &ids) == nil:
		seqs = [][]int32{ids}
	case json.Unmarshal(raw, &manyIDs) == nil:
		seqs = manyIDs
	default:
		return nil, badRequest("input", "field \"input\": want a string, an array of strings, an array of token ids or an array of arrays of token ids")
	}
	if len(texts)+len(seqs) == 0 {
		return nil, badRequest("input", "field \"input\": an empty array")
	}
	if n := len(texts) + len(seqs); n > maxEmbeddingInputs {
		return nil, badRequest("input", "field \"input\": %d inputs; at most %d per request", n, maxEmbeddingInputs)
	}
	for i, text := range texts {
		if text == "" {
			return nil, badRequest("input", "input %d: an empty string", i)
		}
		if e := s.fits(text, "input"); e != nil {
			return nil, e
		}
		ids := s.tok.Encode(text, tokenizer.EncodeOptions{})
		if s.cfg.AddBOS && s.tok.BOS() >= 0 {
			ids = append([]int32{s.tok.BOS()}, ids...)
		}
		seqs = append(seqs, ids)
	}
	vocab, n := s.cfg.Model.Arch.Vocab, s.dec.SlotContext()
	for i, ids := range seqs {
		if len(ids) == 0 {
			return nil, badRequest("input", "input %d: no tokens", i)
		}
		if len(ids) > n {
			return nil, &apiError{status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Param: strPtr("input"),
				Message: fmt.Sprintf("input %d is %d tokens; the context of each sequence holds %d", i, len(ids), n)}
		}
		for j, t := range ids {
			if t < 0 || int(t) >= vocab {
				return nil, badRequest("input", "input %d: token %d (at %d) is outside the vocabulary 0..%d", i, t, j, vocab-1)
			}
		}
	}
	return seqs, nil
}

// embeddings answers POST /v1/embeddings in OpenAI's shape: for each input, the mean over its
// tokens of the model's final hidden states (after the final norm, before the output head),
// L2-normalised, as llama-server's default normalisation; as a JSON array of numbers, or with
// "encoding_format": "base64" the little-endian float32 bytes in base64. The model computes
// each input between two of the scheduler's steps, one input at a time, in a decoder of its own
// (a KV cache of one slot's context, made on the first request).
func (s *Server) embeddings(w http.ResponseWriter, req *http.Request) {
	if !methodIs(w, req, http.MethodPost) {
		return
	}
	if !s.reserve() {
		refuseBusy(w)
		return
	}
	defer s.preparing.Add(-1)
	var r embedRequest
	if e := decode(w, req, &r, maxBody); e != nil {
		writeError(w, e)
		return
	}
	if e := s.modelIs(r.Model); e != nil {
		writeError(w, e)
		return
	}
	switch r.EncodingFormat {
	case "", "float", "base64":
	default:
		writeError(w, badRequest("encoding_format", "encoding_format %q: want float or base64", r.EncodingFormat))
		return
	}
	dm := s.cfg.Model.Arch.DModel
	if r.Dimensions != nil && *r.Dimensions != dm {
		writeError(w, badRequest("dimensions", "dimensions = %d: this model's embeddings have %d", *r.Dimensions, dm))
		return
	}
	seqs, e := s.embedInputs(r.Input)
	if e != nil {
		writeError(w, e)
		return
	}
	data := make([]any, len(seqs))
	tokens := 0
	for i, ids := range seqs {
		var vec []float32
		var err error
		if runErr := s.onLoop(req.Context(), func() { vec, err = s.embed(ids) }); runErr != nil {
			if req.Context().Err() != nil {
				noteOn(w, "the client went away")
				return
			}
			writeError(w, errorOf(runErr))
			return
		}
		if err != nil {
			writeError(w, errorOf(err))
			return
		}
		tokens += len(ids)
		var emb any = vec
		if r.EncodingFormat == "base64" {
			emb = base64.StdEncoding.EncodeToString(float32Bytes(vec))
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": emb}
	}
	noteOn(w, "embeddings of %d inputs, %d tokens", len(seqs), tokens)
	writeJSON(w, 200, map[string]any{"object": "list", "data": data, "model": s.cfg.ModelName,
		"usage": map[string]any{"prompt_tokens": tokens, "total_tokens": tokens}})
}

// onLoop runs f on the scheduler's goroutine between two of its steps (the decoders are not
// safe for concurrent use) and waits for it; an error says f did not run: the client went
// away first, or the server is shutting down.
func (s *Server) onLoop(ctx context.Context, f func()) error {
	if s.closing.Load() {
		return errClosing
	}
	ran := make(chan struct{})
	select {
	case s.work <- func() { defer close(ran); f() }:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return errClosing
	}
	<-ran
	return nil
}

// embed is the embedding of ids (on the scheduler's goroutine): the mean of the final hidden
// states, L2-normalised, computed in float64.
func (s *Server) embed(ids []int32) ([]float32, error) {
	if s.embedder == nil {
		d, err := decoding.NewDecoder(s.cfg.Model, decoding.DecoderOptions{MaxContext: s.dec.SlotContext()})
		if err != nil {
			return nil, fmt.Errorf("serve: a decoder for embeddings: %w", err)
		}
		s.embedder = d
	}
	rows, err := s.embedder.Hidden(ids)
	if err != nil {
		return nil, err
	}
	return meanNormalized(rows), nil
}

// meanNormalized is the mean of rows, divided by its Euclidean norm (left as it is when zero).
func meanNormalized(rows [][]float32) []float32 {
	sum := make([]float64, len(rows[0]))
	for _, r := range rows {
		for j, v := range r {
			sum[j] += float64(v)
		}
	}
	norm := 0.0
	for j := range sum {
		sum[j] /= float64(len(rows))
		norm += sum[j] * sum[j]
	}
	norm = math.Sqrt(norm)
	out := make([]float32, len(sum))
	for j, v := range sum {
		if norm > 0 {
			v /= norm
		}
		out[j] = float32(v)
	}
	return out
}

// float32Bytes is v as little-endian float32 bytes (OpenAI's base64 embeddings).
func float32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// closeEmbedder frees the embeddings' decoder (when the scheduler ends).
func (s *Server) closeEmbedder() {
	if s.embedder != nil {
		s.embedder.Close()
		s.embedder = nil
	}
}
