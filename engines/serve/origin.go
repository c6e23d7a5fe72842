package serve

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Origins says which web pages may call the server from a browser (cross-origin requests, CORS).
// A browser names the page a request comes from in its Origin header: the server's own page is
// always let through (the origin is the host the request was sent to), and so is a request
// without the header (curl, the openai packages, another server). Any other origin must be
// listed: a page elsewhere would otherwise drive the server with the user's browser (a POST
// of text/plain needs no preflight), as any site the user visits could do to a server on
// localhost.
type Origins struct {
	// Localhost lets through pages served from localhost, 127.0.0.1 or [::1], on any port and
	// scheme: a chat UI or an app under development on the same machine.
	Localhost bool
	// Any lets through every origin ("*").
	Any bool
	// Listed are origins let through as they are written: scheme://host[:port].
	Listed []string
	// Log, when set, gets a line for each request refused (a browser hides the reason from the
	// page: the server's log is where it shows).
	Log io.Writer
}

// ParseOrigins reads a comma-separated list of origins: "localhost" (Origins.Localhost), "*"
// (Origins.Any) and scheme://host[:port] origins; "" or "none" lists none.
func ParseOrigins(list string) (Origins, error) {
	var o Origins
	for _, f := range strings.Split(list, ",") {
		switch f = strings.TrimSpace(f); f {
		case "", "none":
		case "localhost":
			o.Localhost = true
		case "*":
			o.Any = true
		default:
			u, err := url.Parse(f)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
				return o, fmt.Errorf("origin %q: want scheme://host[:port] (http or https, no path), localhost, * or none", f)
			}
			o.Listed = append(o.Listed, strings.ToLower(f))
		}
	}
	return o, nil
}

// allows reports whether a request to host (its Host header) may come from a page of origin.
func (o Origins) allows(origin, host string) bool {
	if o.Any {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false // "null" (a file, a sandboxed frame) or garbage
	}
	if strings.EqualFold(u.Host, host) {
		return true // the server's own page
	}
	if h := u.Hostname(); o.Localhost && (strings.EqualFold(h, "localhost") || net.ParseIP(h).IsLoopback()) {
		return true
	}
	return slices.Contains(o.Listed, strings.ToLower(origin))
}

// Guard lets through h the requests o allows. A request from a page it does not allow gets 403
// in OpenAI's error shape, and so does its preflight; an allowed cross-origin request gets the
// CORS headers a browser needs to read the reply, and its preflight (OPTIONS) 204 with the
// methods and headers the API takes.
func (o Origins) Guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Add("Vary", "Origin")
		if !o.allows(origin, r.Host) {
			msg := fmt.Sprintf("origin %s may not call this server from a browser (toy serve -allow-origin lists the pages that may)", origin)
			if o.Log != nil {
				fmt.Fprintf(o.Log, "toy serve: %s %s 403: %s\n", r.Method, r.URL.Path, msg)
			}
			writeError(w, &apiError{status: http.StatusForbidden, Type: "invalid_request_error", Message: msg})
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", origin)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
				w.Header().Set("Access-Control-Allow-Headers", req)
			}
			w.Header().Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.ServeHTTP(w, r)
	})
}
