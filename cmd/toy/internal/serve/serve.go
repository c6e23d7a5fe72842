package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/serve"
)

// apiKeys are -api-key's key and -api-key-file's, in that order, without the blanks around
// them (a request's key is compared so). A blank key, which would shut the API to every client,
// and a blank file name are refused (usage errors); so are keys no request could send in a
// header. (Run refuses either flag given empty: an unset variable in "-api-key $KEY"
// would otherwise leave the API open.)
func apiKeys(key, file string) ([]string, error) {
	if key != "" && strings.TrimSpace(key) == "" {
		return nil, cli.Usagef("-api-key %q: a blank key would shut the API to every client; give a key, or leave -api-key out to serve without one", key)
	}
	if file != "" && strings.TrimSpace(file) == "" {
		return nil, cli.Usagef("-api-key-file %q: a blank file name; name a file of keys, or leave -api-key-file out", file)
	}
	var keys []string
	if key = strings.TrimSpace(key); key != "" {
		if strings.ContainsFunc(key, unicode.IsControl) {
			return nil, cli.Usagef("-api-key %q: a control character, which no request can send in a header", key)
		}
		keys = append(keys, key)
	}
	if file == "" {
		return keys, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("-api-key-file: %w", err)
	}
	n := 0
	for i, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			if strings.ContainsFunc(l, unicode.IsControl) {
				return nil, fmt.Errorf("-api-key-file %s: line %d: a control character, which no request can send in a header", file, i+1)
			}
			keys, n = append(keys, l), n+1
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("-api-key-file %s: no key in it (one a line)", file)
	}
	return keys, nil
}

// seconds is a flag's duration: a Go duration (90s, 10m) or a number of seconds (600, as
// llama-server's --timeout takes), 0 or more.
type seconds time.Duration

func (d *seconds) String() string { return time.Duration(*d).String() }

func (d *seconds) Set(v string) error {
	t, err := time.ParseDuration(v)
	if err != nil {
		s, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || math.IsNaN(s) || math.IsInf(s, 0) || s > math.MaxInt64/1e9 {
			return fmt.Errorf("want a duration such as 90s or 10m, or a number of seconds")
		}
		t = time.Duration(s * 1e9)
	}
	if t < 0 {
		return fmt.Errorf("want 0 or more")
	}
	*d = seconds(t)
	return nil
}

// toy serve's address when no flag names one: llama-server's.
const (
	defaultHost = "127.0.0.1"
	defaultPort = 8080
)

// defaultAddr is -addr's default, defaultHost:defaultPort.
var defaultAddr = net.JoinHostPort(defaultHost, strconv.Itoa(defaultPort))

// listenAddr is the address toy serve listens on: -addr, whose host -host and whose port -port
// replace (llama-server's flags). -addr given with -host or -port must agree with them: a
// contradiction is a usage error, not settled by a rule of precedence.
func listenAddr(addr string, addrSet bool, host string, hostSet bool, port int, portSet bool) (string, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", cli.Usagef("-addr %q: want host:port (%v)", addr, err)
	}
	if hostSet {
		if addrSet && host != h {
			return "", cli.Usagef("-addr %s and -host %s disagree: give one of them", addr, host)
		}
		h = host
	}
	if portSet {
		if port < 0 || port > 65535 {
			return "", cli.Usagef("-port %d: want 0 to 65535", port)
		}
		if n, err := strconv.Atoi(p); addrSet && (err != nil || n != port) {
			return "", cli.Usagef("-addr %s and -port %d disagree: give one of them", addr, port)
		}
		p = strconv.Itoa(port)
	}
	return net.JoinHostPort(h, p), nil
}

// Run serves a model over HTTP with OpenAI's API (engines/serve): it listens at once
// (/health answers 503 while loading), loads the model, runs the kernel gate and prints the
// audit, then serves until SIGTERM or SIGINT, when it stops taking requests and lets the
// running ones finish within -shutdown-timeout.
func Run(args []string, stdout, stderr io.Writer) error {
	defer cli.OneGoProc()() // as toy generate decodes: one stream 4-45 % faster, 8 level (docs/PERFORMANCE.md)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f cli.ServeFlags
	f.Register(fs)
	addr := fs.String("addr", defaultAddr, "address to listen on (host:port)")
	host := fs.String("host", defaultHost, "the host to listen on (llama-server's flag): -addr's host; given with -addr, the two must agree")
	port := fs.Int("port", defaultPort, "the port to listen on (llama-server's flag; 0: any free one): -addr's port; given with -addr, the two must agree")
	shutdown := fs.Duration("shutdown-timeout", 30*time.Second, "on SIGTERM, how long running requests may take to finish before they are cancelled")
	timeout, idle := seconds(time.Minute), seconds(time.Minute)
	fs.Var(&timeout, "timeout", "how long a client may take to send a request (its headers: 10s at most) and to take each write of the reply, which may stream for as long as it needs; a slower client is dropped (408 for a late body). A Go duration (90s, 10m) or seconds, as llama-server's --timeout; 0: no limit")
	fs.Var(&idle, "idle-timeout", "how long a kept-alive connection may wait for its next request before it is closed (a duration or seconds; 0: -timeout's)")
	apiKey := fs.String("api-key", "", "a key every request to /v1/ must present (Authorization: Bearer KEY, an OpenAI client's api_key); /health, /metrics and the chat page need none. Visible to other users of the machine in its process list: -api-key-file keeps it out. Given empty or blank, it is refused (exit 2)")
	apiKeyFile := fs.String("api-key-file", "", "a file of keys, one a line (blank lines and lines starting with # skipped), any of which a request to /v1/ may present; with -api-key, either")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with this PEM certificate (chain) file; needs -tls-key")
	tlsKey := fs.String("tls-key", "", "the PEM private key of -tls-cert")
	logRequests := fs.Bool("log-requests", true, "a line on stderr for each request to the API when it ends: method, path, status, time, and the reply's tokens or the error")
	allowOrigin := fs.String("allow-origin", "localhost", "web pages that may call the server from a browser, comma-separated: localhost (pages served from this machine, any port), scheme://host[:port], * (any), none; the server's own page always may, and clients that are not browsers send no origin. A request must name the server in its Host header as an IP address, localhost or the host of a listed origin (else 403: DNS rebinding); list the names it is reached by")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: toy serve -m MODEL [flags]

Serves a GGUF model over HTTP with OpenAI's API: POST /v1/chat/completions, POST
/v1/completions (stream: true for server-sent events; logprobs, n choices), POST
/v1/embeddings, GET /v1/models (and /v1/models/ID),
GET /health, GET /metrics (Prometheus), and a chat page at /. Requests are decoded
together (continuous batching, -np/-parallel slots; -c/--ctx-size is the total context,
shared among them as llama-server does; without -np, as many slots as keep 512 positions
each, at most 4). The model's id is -model-name, else a run's id for its weights/model.gguf,
else the file's name; a request naming another model is served by this one unless
-strict-model-name. Sampling defaults come from the kernel table's default preset, as in toy
generate. -host and -port (llama-server's) set -addr's parts. -api-key asks clients for a
key, -tls-cert serves HTTPS, -allow-origin says which other web pages may call it from a
browser. -draft decodes speculatively: a smaller model of the same vocabulary proposes
-draft-n tokens after each slot's last one, which the slot's step verifies beside the other
slots' tokens; -dflash does with the DFlash drafter the kernel table pairs with the model
(docs/INFERENCE.md).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if err := f.Check(); err != nil {
		return err
	}
	set := cli.SetFlags(fs)
	listen, err := listenAddr(*addr, set["addr"], *host, set["host"], *port, set["port"])
	if err != nil {
		return err
	}
	origins, err := serve.ParseOrigins(*allowOrigin)
	if err != nil {
		return cli.Usagef("-allow-origin: %v", err)
	}
	for _, fl := range []struct{ name, v string }{{"api-key", *apiKey}, {"api-key-file", *apiKeyFile}} {
		if name := fl.name; fl.v == "" && cli.SetFlags(fs)[name] {
			return cli.Usagef("-%s \"\": given empty (an unset variable?), which would leave the API open to anyone; give a value, or leave -%[1]s out to serve without keys", name)
		}
	}
	if f.APIKeys, err = apiKeys(*apiKey, *apiKeyFile); err != nil {
		return err
	}
	f.LogRequests = *logRequests
	origins.Log = stderr

	if (*tlsCert == "") != (*tlsKey == "") {
		return cli.Usagef("-tls-cert and -tls-key go together")
	}
	scheme := "http"
	var tlsConfig *tls.Config
	if *tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			return fmt.Errorf("-tls-cert %s, -tls-key %s: %w", *tlsCert, *tlsKey, err)
		}
		scheme, tlsConfig = "https", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	var front serve.Front
	hs := serve.NewHTTPServer(origins.Guard(&front), time.Duration(timeout), time.Duration(idle))
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stderr, "toy serve: listening on %s://%s (loading %s)\n", scheme, ln.Addr(), f.Model)
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() && len(f.APIKeys) == 0 {
		fmt.Fprintf(stderr, "toy serve: warning: no API key, and %s can be reached from other machines: anyone who reaches it can use the model (-api-key-file asks for a key)\n", ln.Addr())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	sm, err := f.Start(stderr)
	if err != nil {
		hs.Close()
		return err
	}
	defer sm.Close()
	srv := sm.Server
	front.Ready(srv.Handler())
	fmt.Fprintf(stderr, "toy serve: ready: %s\n", sm.Ready)

	select {
	case err := <-served:
		srv.Close()
		return err
	case <-ctx.Done():
	}
	stop()
	fmt.Fprintf(stderr, "toy serve: shutting down (running requests have %v)\n", *shutdown)
	dctx, cancel := context.WithTimeout(context.Background(), *shutdown)
	defer cancel()
	// Stop accepting, let the running requests finish (Drain cancels what is left at the
	// deadline), then wait for their handlers to write the end.
	go srv.Drain(dctx)
	if err := hs.Shutdown(dctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	srv.Close()
	hctx, hcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer hcancel()
	hs.Shutdown(hctx)
	fmt.Fprintf(stderr, "toy serve: stopped\n")
	return nil
}
