package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/toyml/toy/generated/config"
)

// chatMessage is a message of a chat request, in OpenAI's shape.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// ToolCalls are an assistant's calls; ToolCallID and Name say which call a tool message
	// answers.
	ToolCalls []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
}

// request holds the fields both completion endpoints read.
type request struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	MaxTokens     *int   `json:"max_tokens"`
	MaxCompletion *int   `json:"max_completion_tokens"`
	// The sampling options the spec declares (temperature, top_p, top_k, min_p,
	// repeat_penalty, repeat_last_n, frequency_penalty, presence_penalty), each optional; seed
	// and logit_bias are read by the fields below, which take precedence (an OpenAI seed may be
	// negative, a logit bias's keys are strings).
	config.SamplingOverlay
	Seed              *int64          `json:"seed"`
	Stop              json.RawMessage `json:"stop"`
	N                 *int            `json:"n"`
	RepetitionPenalty *float64        `json:"repetition_penalty"`
	Logprobs          any             `json:"logprobs"`
	TopLogprobs       *int            `json:"top_logprobs"`
	// LogitBias maps token ids (as JSON object keys) to biases in [-100, 100].
	LogitBias map[string]float64 `json:"logit_bias"`
	// Tools, ToolChoice and ParallelToolCalls offer functions to call (chat; toolsOf).
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	// Fields of features toy does not have, refused unless they ask for nothing (unsupported):
	// OpenAI's legacy function calling, which tools replace.
	Functions      json.RawMessage `json:"functions"`
	FunctionCall   json.RawMessage `json:"function_call"`
	ResponseFormat *struct {
		responseFormat // constrains the reply to JSON (grammarOf)
	} `json:"response_format"`
	BestOf        *int    `json:"best_of"`
	Suffix        *string `json:"suffix"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`

	// chat
	Messages *[]chatMessage `json:"messages"`
	// completions
	Prompt json.RawMessage `json:"prompt"`
	Echo   bool            `json:"echo"`
}

// responseFormat is OpenAI's response_format: "text", "json_object" (any JSON object; with
// llama-server's extension, a schema) or "json_schema" with a JSON Schema.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
	Schema json.RawMessage `json:"schema"`
}

// maxBody bounds a request body, whatever the context (promptBounds bounds it by the context).
const maxBody = 8 << 20

// decode reads the JSON body, of at most limit bytes (0: maxBody), into r (a *request, or
// another request's struct); an error names what is wrong. A body that says it is longer is
// refused before any of it is read.
func decode(w http.ResponseWriter, req *http.Request, r any, limit int) *apiError {
	if limit <= 0 {
		limit = maxBody
	}
	tooLarge := &apiError{status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
		Message: fmt.Sprintf("the body is larger than %d bytes, the most this server takes: a longer prompt could not fit the context of a sequence", limit)}
	if req.ContentLength > int64(limit) {
		return tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, int64(limit)))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return tooLarge
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return &apiError{status: http.StatusRequestTimeout, Type: "invalid_request_error", Message: "the body did not arrive in time (toy serve -timeout)"}
		}
		return badRequest("", "reading the body: %v", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return badRequest("", "the body is not a JSON object: %v", err)
	}
	if err := json.Unmarshal(body, r); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badRequest(te.Field, "field %q: want %s, not a JSON %s", te.Field, te.Type, te.Value)
		}
		return badRequest("", "%v", err)
	}
	return nil
}

// modelIs refuses a request's "model" when it names another model than the one served (unless
// AnyModelName); an empty one is the served one.
func (s *Server) modelIs(name string) *apiError {
	if name != "" && name != s.cfg.ModelName && !s.cfg.AnyModelName {
		return &apiError{status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found",
			Message: fmt.Sprintf("the model %q does not exist; this server serves %q", name, s.cfg.ModelName)}
	}
	return nil
}

// stopsOf reads "stop": null, a string or an array of strings.
func stopsOf(b json.RawMessage) ([]string, *apiError) {
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return nil, badRequest("stop", "field \"stop\": want a string or an array of strings")
	}
	return many, nil
}

// contentOf reads a message's "content": a string, or an array of parts of which only text
// ones are supported.
func contentOf(i int, b json.RawMessage) (string, *apiError) {
	param := fmt.Sprintf("messages[%d].content", i)
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return "", nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		return one, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return "", badRequest(param, "field %q: want a string or an array of content parts", param)
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", badRequest(param, "field %q: content parts of type %q are not supported (text only)", param, p.Type)
		}
		sb.WriteString(p.Text)
	}
	return sb.String(), nil
}

// promptOf reads a completion's "prompt": a string or an array of one string.
func promptOf(b json.RawMessage) (string, *apiError) {
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return "", badRequest("prompt", "\"prompt\" is required")
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		return one, nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return "", badRequest("prompt", "field \"prompt\": want a string or an array of one string")
	}
	if len(many) != 1 {
		return "", badRequest("prompt", "field \"prompt\": an array of %d prompts; one per request (n = 1)", len(many))
	}
	return many[0], nil
}
