package serve

import (
	_ "embed"
	"net/http"
)

//go:embed page.html
var page []byte

// page serves the chat page at /; any other path is 404.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		writeError(w, &apiError{status: http.StatusNotFound, Type: "invalid_request_error", Message: "no such endpoint: " + r.URL.Path})
		return
	}
	if !methodIs(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(page)
}
