package main

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
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/toyml/toy/engines/llama"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/serve"
	"github.com/toyml/toy/ggml"
)

// serveFlags are the flags of toy serve that toy bench serve shares: the decoder's and the
// server's.
type serveFlags struct {
	decoderFlags
	parallel, queue     int
	modelName, template string
	promptCache         bool
	allowUnresolved     *bool
	// apiKeys are the keys the API asks for (toy serve's -api-key and -api-key-file); none:
	// it asks for none.
	apiKeys []string
	// logRequests is toy serve's -log-requests.
	logRequests bool
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	f.decoderFlags.register(fs)
	fs.IntVar(&f.parallel, "parallel", 4, "sequences decoded at once (slots); -c is shared among them")
	fs.IntVar(&f.queue, "queue", 64, "requests that may wait for a slot, counting those still being read or tokenized; more are refused with 429")
	fs.StringVar(&f.modelName, "model-name", "", "the model's id in the API (default: the file's name without .gguf); also matched against the kernel table's names")
	fs.StringVar(&f.template, "template", "", "chat template (chatml, gemma; default: the model's)")
	fs.BoolVar(&f.promptCache, "prompt-cache", true, "reuse the keys and values of the longest prefix a prompt shares with a free slot's last sequence (a conversation's earlier turns), or copy them from another slot's (a common system message); false computes every prompt whole")
	f.allowUnresolved = registerGate(fs)
}

// check refuses bad flags before anything is loaded.
func (f *serveFlags) check() error {
	if f.parallel < 1 {
		return usagef("-parallel %d: want at least 1", f.parallel)
	}
	if f.queue < 0 {
		return usagef("-queue %d: want 0 or more", f.queue)
	}
	if f.ctxFull != "error" {
		return usagef("-ctx-full %s: toy serve does not shift the context; a reply stops at the end of its slot's context (finish_reason length)", f.ctxFull)
	}
	if _, err := f.options(); err != nil {
		return err
	}
	if f.model == "" {
		return usagef("-m MODEL is required")
	}
	return nil
}

// servedModel is a server over a loaded model.
type servedModel struct {
	srv *serve.Server
	// ready is the line toy serve prints when it takes requests: the model, slots, queue and
	// sampling defaults.
	ready string
	// close stops the server and frees its decoder and model.
	close func()
}

// start loads the model, runs the boot-time kernel gate (the table's entry for the model, its
// audit printed on stderr; an unresolved lookup refuses to serve unless allowed) and starts a
// server over it, whose handler serves once the caller hands it out.
func (f *serveFlags) start(stderr io.Writer) (*servedModel, error) {
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	if f.modelName == "" {
		f.modelName = filepath.Base(f.model)
		if ext := filepath.Ext(f.modelName); ext == ".gguf" {
			f.modelName = f.modelName[:len(f.modelName)-len(ext)]
		}
	}
	m, tok, err := f.openModel(stderr, "serve")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	// The boot gate: the server's decoders look up toy's CPU operations (on the CPU backend);
	// it samples on the host.
	t := buildTarget()
	ref := modelRef(m, f.model, f.modelName)
	entry, named := resolveEntry(stderr, t, ref)
	r, err := auditCPU(m, ref, opts, *f.allowUnresolved)
	if t != nil {
		if entry != nil {
			fmt.Fprintf(stderr, "toy serve: kernel table %s: %s resolves to %s\n", t.Name, f.model, entry.Name)
		}
		for _, l := range r.Lines() {
			fmt.Fprintf(stderr, "toy serve:   audit: %s\n", l)
		}
		if len(r.Lines()) == 0 {
			fmt.Fprintf(stderr, "toy serve:   audit: no kernel lookups (ggml's kernels run this backend)\n")
		}
	}
	if err != nil {
		return nil, err
	}
	info := map[string]any{"backend": ggml.BackendKind, "architecture": m.Arch.Name, "kernel_entry": nil, "kernel_entry_names_model": named}
	if entry != nil {
		info["kernel_target"], info["kernel_entry"] = t.Name, entry.Name
	}
	info["kernel_resolved"], info["kernel_expected_absent"], info["kernel_unresolved"] = len(r.Resolved), len(r.ExpectedAbsent), len(r.Unresolved)
	p := sample.DefaultParams()
	if entry != nil && named {
		applyPreset(&p, entry, map[string]bool{})
	}
	beh := modelBehaviour(m, tok, entry, named)
	if f.template == "" {
		f.template = beh.template
	}
	var tmpl *sample.Template
	if t, err := chatTemplate(m, f.template); err == nil {
		tmpl = &t
	} else if f.template != "" {
		return nil, err
	} else {
		fmt.Fprintf(stderr, "toy serve: the model has no chat template: /v1/chat/completions is refused (-template names one)\n")
	}
	nctx := f.ctx
	if nctx == 0 {
		nctx = m.Arch.Context
	}
	if nctx/f.parallel < 2 {
		return nil, usagef("-c %d among -parallel %d leaves fewer than 2 positions a slot", nctx, f.parallel)
	}
	dec, err := llama.NewBatchDecoder(m, llama.BatchDecoderOptions{Slots: f.parallel, SlotContext: nctx / f.parallel,
		KVType: opts.KVType, FlashAttention: opts.FlashAttention, Threads: f.threads, Batch: opts.Batch})
	if err != nil {
		return nil, err
	}
	srv, err := serve.New(serve.Config{Model: m, Decoder: dec, Tokenizer: tok, ModelName: f.modelName, AddBOS: beh.addBOS,
		Template: tmpl, Stops: beh.stops, Defaults: p, Queue: f.queue, NoPromptCache: !f.promptCache, APIKeys: f.apiKeys,
		LogRequests: f.logRequests, Info: info, Log: stderr})
	if err != nil {
		dec.Close()
		return nil, err
	}
	ok = true
	keys := ""
	if len(f.apiKeys) > 0 {
		keys = fmt.Sprintf(", the API asks for a key (%d)", len(f.apiKeys))
	}
	return &servedModel{srv: srv,
		ready: fmt.Sprintf("%s, %d slots of %d positions, queue %d, prompt cache %v, sampling: %v%s", f.modelName, f.parallel, nctx/f.parallel, f.queue, f.promptCache, p, keys),
		close: func() {
			srv.Close()
			dec.Close()
			m.Close()
		}}, nil
}

// apiKeys are -api-key's key and -api-key-file's, in that order, without the blanks around
// them (a request's key is compared so). A blank key, which would shut the API to every client,
// and a blank file name are refused (usage errors); so are keys no request could send in a
// header. (runServe refuses either flag given empty: an unset variable in "-api-key $KEY"
// would otherwise leave the API open.)
func apiKeys(key, file string) ([]string, error) {
	if key != "" && strings.TrimSpace(key) == "" {
		return nil, usagef("-api-key %q: a blank key would shut the API to every client; give a key, or leave -api-key out to serve without one", key)
	}
	if file != "" && strings.TrimSpace(file) == "" {
		return nil, usagef("-api-key-file %q: a blank file name; name a file of keys, or leave -api-key-file out", file)
	}
	var keys []string
	if key = strings.TrimSpace(key); key != "" {
		if strings.ContainsFunc(key, unicode.IsControl) {
			return nil, usagef("-api-key %q: a control character, which no request can send in a header", key)
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

// runServe serves a model over HTTP with OpenAI's API (engines/serve): it listens at once
// (/health answers 503 while loading), loads the model, runs the kernel gate and prints the
// audit, then serves until SIGTERM or SIGINT, when it stops taking requests and lets the
// running ones finish within -shutdown-timeout.
func runServe(args []string, stdout, stderr io.Writer) error {
	defer oneGoProc()() // as toy generate decodes: one stream 4-45 % faster, 8 level (docs/PERFORMANCE.md)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	f.register(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (host:port)")
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
/v1/completions (stream: true for server-sent events), GET /v1/models (and /v1/models/ID),
GET /health, GET /metrics (Prometheus), and a chat page at /. Requests are decoded
together (continuous batching, -parallel slots; -c is the total context, shared among them
as llama-server does). Sampling defaults come from the kernel table's default preset, as in
toy generate. -api-key asks clients for a key, -tls-cert serves HTTPS, -allow-origin says
which other web pages may call it from a browser (docs/INFERENCE.md).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	origins, err := serve.ParseOrigins(*allowOrigin)
	if err != nil {
		return usagef("-allow-origin: %v", err)
	}
	for _, fl := range []struct{ name, v string }{{"api-key", *apiKey}, {"api-key-file", *apiKeyFile}} {
		if name := fl.name; fl.v == "" && setFlags(fs)[name] {
			return usagef("-%s \"\": given empty (an unset variable?), which would leave the API open to anyone; give a value, or leave -%[1]s out to serve without keys", name)
		}
	}
	if f.apiKeys, err = apiKeys(*apiKey, *apiKeyFile); err != nil {
		return err
	}
	f.logRequests = *logRequests
	origins.Log = stderr

	if (*tlsCert == "") != (*tlsKey == "") {
		return usagef("-tls-cert and -tls-key go together")
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

	ln, err := net.Listen("tcp", *addr)
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
	fmt.Fprintf(stderr, "toy serve: listening on %s://%s (loading %s)\n", scheme, ln.Addr(), f.model)
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() && len(f.apiKeys) == 0 {
		fmt.Fprintf(stderr, "toy serve: warning: no API key, and %s can be reached from other machines: anyone who reaches it can use the model (-api-key-file asks for a key)\n", ln.Addr())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	sm, err := f.start(stderr)
	if err != nil {
		hs.Close()
		return err
	}
	defer sm.close()
	srv := sm.srv
	front.Ready(srv.Handler())
	fmt.Fprintf(stderr, "toy serve: ready: %s\n", sm.ready)

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
