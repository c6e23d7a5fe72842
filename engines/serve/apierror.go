package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
)

// apiError is an error in OpenAI's JSON shape, with its HTTP status.
type apiError struct {
	status  int
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    any     `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, format string, args ...any) *apiError {
	e := &apiError{status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = &param
	}
	return e
}

func writeError(w http.ResponseWriter, e *apiError) {
	noteOn(w, "%s", e.Message)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(map[string]any{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// methodIs reports whether r's method is one of methods; otherwise it answers 405, "use" the
// first of them.
func methodIs(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	if slices.Contains(methods, r.Method) {
		return true
	}
	writeError(w, &apiError{status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Message: "use " + methods[0]})
	return false
}

func strPtr(s string) *string { return &s }

func errorOf(err error) *apiError {
	if errors.Is(err, errClosing) {
		return &apiError{status: http.StatusServiceUnavailable, Type: "server_error", Message: err.Error()}
	}
	return &apiError{status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
}
