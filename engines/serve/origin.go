package serve

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
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
//
// The server's own page is only its own when the name in the request's Host header is one of
// the server's (allowsHost): a site whose name its DNS points at 127.0.0.1 after the page has
// loaded (DNS rebinding) sends its own name as both the Origin and the Host.
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

// allowsHost reports whether a request whose Host header is host was sent to one of the
// server's names. A browser sends there the name in the page's address, so a page on a name that
// an attacker's DNS made point at this machine (DNS rebinding) sends the attacker's name, and
// only a name can be rebound. Let through: no Host (an HTTP/1.0 client that is not a browser),
// any IP address (the one the server is bound to, or any of its machine's when it listens on
// 0.0.0.0 or [::]: a page at an IP address is that address's own origin, nothing rebinds it),
// localhost and the names under .localhost (which browsers resolve to this machine
// themselves, never asking DNS), the hosts of the listed origins (the names the server is
// reached by: a proxy that passes the public Host on, a container's service name), and any
// host when Any lets every origin through (a page anywhere may call the server then).
// Names are compared without case, port or a trailing dot.
func (o Origins) allowsHost(host string) bool {
	if host == "" || o.Any {
		return true
	}
	name := hostName(host)
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	for _, l := range o.Listed {
		if u, err := url.Parse(l); err == nil && hostName(u.Host) == name {
			return true
		}
	}
	return false
}

// hostName is the name or address of a host[:port] (an IPv6 address in brackets), in lower
// case, without a trailing dot or an IPv6 zone.
func hostName(hostport string) string {
	h := strings.ToLower(strings.TrimSuffix((&url.URL{Host: hostport}).Hostname(), "."))
	if i := strings.IndexByte(h, '%'); i >= 0 && strings.Contains(h, ":") {
		h = h[:i] // fe80::1%25eth0: the zone says which interface, not which host
	}
	return h
}

// Guard lets through h the requests o allows. A request sent to a name that is not the server's
// (allowsHost) gets 403 in OpenAI's error shape, whatever its origin; so does a request from a
// page o does not allow, and its preflight; an allowed cross-origin request gets the CORS
// headers a browser needs to read the reply, and its preflight (OPTIONS) 204 with the methods
// and headers the API takes.
func (o Origins) Guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !o.allowsHost(r.Host) {
			o.refuse(w, r, fmt.Sprintf("host %s is not a name of this server (a page whose name was made to point here, DNS rebinding, could use it): "+
				"a request must be sent to an IP address, localhost, or the host of an origin toy serve -allow-origin lists", logField(r.Host)))
			return
		}
		origin := r.Header.Get("Origin")
		if origin == "" {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Add("Vary", "Origin")
		if !o.allows(origin, r.Host) {
			o.refuse(w, r, fmt.Sprintf("origin %s may not call this server from a browser (toy serve -allow-origin lists the pages that may)", logField(origin)))
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

// refuse answers 403 with msg, and logs it (a browser hides the reason from the page).
func (o Origins) refuse(w http.ResponseWriter, r *http.Request, msg string) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, "toy serve: %s %s 403: %s\n", r.Method, logField(r.URL.Path), msg)
	}
	writeError(w, &apiError{status: http.StatusForbidden, Type: "invalid_request_error", Message: msg})
}
