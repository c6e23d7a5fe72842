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

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/serve"
	"github.com/toyml/toy/engines/speculative"
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
	// preset is -sampling-preset: the kernel table entry's preset a request's defaults come from.
	preset *string
	// apiKeys are the keys the API asks for (toy serve's -api-key and -api-key-file); none:
	// it asks for none.
	apiKeys []string
	// logRequests is toy serve's -log-requests.
	logRequests bool
	// strictModelName is -strict-model-name: a request naming another model is refused.
	strictModelName bool
	// draft is -draft: the draft model of speculative decoding ("self": -m's own file);
	// draftN and draftPMin its -draft-n and -draft-p-min.
	draft     string
	draftN    int
	draftPMin float64
	// dflash is -dflash: the DFlash drafter the kernel table pairs with the model, its path
	// relative to modelsDir (-models-dir) unless absolute.
	dflash    bool
	modelsDir string
	// fs is the flag set register registered the flags in (which were given).
	fs *flag.FlagSet
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	f.decoderFlags.register(fs)
	fs.IntVar(&f.parallel, "parallel", 0, fmt.Sprintf("sequences decoded at once (slots); -c is shared among them (0: as many as keep %d positions each, at most %d, at least 1)", minSlotContext, maxAutoSlots))
	fs.IntVar(&f.parallel, "np", 0, "alias of -parallel (llama-server's name)")
	fs.IntVar(&f.queue, "queue", 64, "requests that may wait for a slot, counting those still being read or tokenized; more are refused with 429")
	fs.StringVar(&f.modelName, "model-name", "", "the model's id in the API (default: the run's id for a run's weights/model.gguf, else the file's name without .gguf); also matched against the kernel table's names")
	fs.BoolVar(&f.strictModelName, "strict-model-name", false, "refuse (404) a request whose \"model\" is not the model's id; by default the loaded model serves any name, as llama-server does")
	fs.StringVar(&f.template, "template", "", templateUsage("", "the file's"))
	fs.BoolVar(&f.promptCache, "prompt-cache", true, "reuse the keys and values of the longest prefix a prompt shares with a free slot's last sequence (a conversation's earlier turns), or copy them from another slot's (a common system message); false computes every prompt whole")
	f.allowUnresolved = registerGate(fs)
	f.preset = registerPreset(fs)
	fs.StringVar(&f.draft, "draft", "", "draft model GGUF for speculative decoding in every slot (the same vocabulary as -m): greedy replies are the same, sampled ones follow the same distribution; self: -m's own file (a benchmark's ceiling, every proposal accepted)")
	fs.IntVar(&f.draftN, "draft-n", speculative.DefaultDraftTokens, "tokens the drafter proposes per slot and step (with -dflash, at most and by default the block's proposals)")
	fs.Float64Var(&f.draftPMin, "draft-p-min", speculative.DefaultMinProbability, "with -draft or -dflash: the drafter stops proposing, each step, at a token it gives a probability below this (0: always -draft-n; default 0.75 with -draft, 0 with -dflash)")
	fs.BoolVar(&f.dflash, "dflash", false, "speculative decoding with the DFlash drafter the kernel table pairs with the model (its [dflash] draft_model), one state per slot; -draft takes precedence")
	fs.StringVar(&f.modelsDir, "models-dir", "", "the directory a [dflash] draft_model path is relative to (default: the directory of -m)")
	f.fs = fs
}

// check refuses bad flags before anything is loaded.
func (f *serveFlags) check() error {
	if f.parallel < 0 {
		return usagef("-parallel %d: want at least 1 (0: chosen from the context)", f.parallel)
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
	if f.draftN < 1 {
		return usagef("-draft-n %d: want at least 1 token per step", f.draftN)
	}
	if err := speculative.CheckMinProbability(f.draftPMin); err != nil {
		return usagef("-draft-p-min %v: %v", f.draftPMin, err)
	}
	return checkTemplateName(f.template)
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
		f.modelName = defaultModelID(f.model)
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
	if err := presetFor(&p, entry, named, *f.preset, map[string]bool{}); err != nil {
		return nil, err
	}
	beh := modelBehaviour(m, tok, entry, named)
	if f.template == "" {
		f.template = beh.template
	}
	var tmpl *sample.Template
	if t, err := chatTemplate(m, tok, f.template, beh.addBOS); err == nil {
		tmpl = &t
	} else if !errors.Is(err, errNoChatTemplate) {
		return nil, err
	} else {
		fmt.Fprintf(stderr, "toy serve: the model has no chat template: /v1/chat/completions is refused (-template names one)\n")
	}
	nctx := f.ctx
	if nctx == 0 {
		nctx = m.Arch.Context
	}
	fmt.Fprintf(stderr, "toy serve: %s\n", f.sizeSlots(nctx))
	if nctx/f.parallel < 2 {
		return nil, usagef("-c %d among -parallel %d leaves fewer than 2 positions a slot", nctx, f.parallel)
	}
	dec, err := decoding.NewBatchDecoder(m, decoding.BatchDecoderOptions{Slots: f.parallel, SlotContext: nctx / f.parallel,
		KVType: opts.KVType, FlashAttention: opts.FlashAttention, Threads: f.Threads, Batch: opts.Batch})
	if err != nil {
		return nil, err
	}
	draft, specNote, err := f.openDraft(m, dec, opts)
	if err != nil {
		dec.Close()
		return nil, err
	}
	var df *speculative.DFlash
	switch {
	case f.dflash && draft.dec != nil:
		fmt.Fprintf(stderr, "toy serve: -draft takes precedence over -dflash\n")
	case f.dflash:
		dir := f.modelsDir
		if dir == "" {
			dir = filepath.Dir(f.model)
		}
		if df, err = openDFlash(m, entry, named, dir); err != nil {
			dec.Close()
			return nil, err
		}
		if !setFlags(f.fs)["draft-p-min"] {
			f.draftPMin = 0 // a DFlash block's probabilities run lower (speculative.DefaultMinProbability)
		}
		if !setFlags(f.fs)["draft-n"] {
			f.draftN = df.Cfg.Gamma - 1
		}
		specNote = fmt.Sprintf(", speculative: dflash %s (%d tokens a step, p-min %g)", filepath.Base(entry.DFlash.DraftModel), min(f.draftN, df.Cfg.Gamma-1), f.draftPMin)
	}
	closeDFlash := func() {
		if df != nil {
			df.Close()
		}
	}
	srv, err := serve.New(serve.Config{Model: m, Decoder: dec, Tokenizer: tok, ModelName: f.modelName, AnyModelName: !f.strictModelName, AddBOS: beh.addBOS,
		Template: tmpl, Stops: beh.stops, Defaults: p, Queue: f.queue, NoPromptCache: !f.promptCache, APIKeys: f.apiKeys,
		LogRequests: f.logRequests, Info: info, Log: stderr, Draft: draft.dec, DraftTokens: f.draftN, DraftMinProbability: f.draftPMin, DFlash: df})
	if err != nil {
		closeDFlash()
		draft.close()
		dec.Close()
		return nil, err
	}
	ok = true
	keys := ""
	if len(f.apiKeys) > 0 {
		keys = fmt.Sprintf(", the API asks for a key (%d)", len(f.apiKeys))
	}
	return &servedModel{srv: srv,
		ready: fmt.Sprintf("%s, %s, queue %d, prompt cache %v, sampling: %v%s%s", f.modelName, slotsOf(f.parallel, nctx/f.parallel), f.queue, f.promptCache, p, specNote, keys),
		close: func() {
			srv.Close()
			closeDFlash()
			draft.close()
			dec.Close()
			m.Close()
		}}, nil
}

// servedDraft is -draft's model and its batched decoder (nil without -draft).
type servedDraft struct {
	m   *decoding.GGUFModel
	dec *decoding.BatchDecoder
}

func (d servedDraft) close() {
	if d.dec != nil {
		d.dec.Close()
		d.m.Close()
	}
}

// openDraft opens -draft on the target's backend (one thread pool for both), gated as the
// target is, with a batched decoder of the target decoder's slots and options; specNote is
// what the ready line says of it.
func (f *serveFlags) openDraft(target *decoding.GGUFModel, dec *decoding.BatchDecoder, opts decoding.DecoderOptions) (d servedDraft, specNote string, err error) {
	if f.draft == "" {
		return d, "", nil
	}
	path := f.draft
	if path == "self" {
		path = f.model
	}
	dm, err := decoding.OpenModel(path, decoding.ModelOptions{Backend: target.Backend(), Mmap: f.mmap})
	if err != nil {
		return d, "", fmt.Errorf("-draft: %w", err)
	}
	if err := speculative.CheckVocab(target, dm); err != nil {
		dm.Close()
		return d, "", fmt.Errorf("-draft: %w", err)
	}
	if _, _, err := gateDecoders(io.Discard, "serve -draft", dm, path, "", opts, *f.allowUnresolved); err != nil {
		dm.Close()
		return d, "", fmt.Errorf("-draft: %w", err)
	}
	ddec, err := decoding.NewBatchDecoder(dm, decoding.BatchDecoderOptions{Slots: dec.Slots(), SlotContext: dec.SlotContext(),
		KVType: opts.KVType, FlashAttention: opts.FlashAttention, Threads: f.Threads, Batch: opts.Batch})
	if err != nil {
		dm.Close()
		return d, "", fmt.Errorf("-draft: %w", err)
	}
	return servedDraft{m: dm, dec: ddec}, fmt.Sprintf(", speculative: draft %s (%d tokens a step, p-min %g)", filepath.Base(path), f.draftN, f.draftPMin), nil
}

// The slots toy serve makes when -parallel is not given: as many as keep minSlotContext
// positions each, at most maxAutoSlots, at least one. Four slots of a 256-position model held
// 64 positions each, too few for a system message and a question.
const (
	minSlotContext = 512
	maxAutoSlots   = 4
)

// sizeSlots chooses the slots when -parallel is 0, from the total context nctx, and returns
// the line that says what each slot holds and how to change it.
func (f *serveFlags) sizeSlots(nctx int) string {
	auto := f.parallel == 0
	if auto {
		f.parallel = max(1, min(maxAutoSlots, nctx/minSlotContext))
	}
	line := fmt.Sprintf("%s (a request's prompt and reply together)", slotsOf(f.parallel, nctx/f.parallel))
	switch {
	case auto:
		line += fmt.Sprintf(" (the context of %d shared among as many slots as keep %d positions each, at most %d; -np sets the slots, -c the context)", nctx, minSlotContext, maxAutoSlots)
	case nctx/f.parallel < minSlotContext:
		line += fmt.Sprintf(" (-c %d shared among -np %d: few positions for a conversation; fewer slots or a larger -c give each more)", nctx, f.parallel)
	default:
		line += fmt.Sprintf(" (-c %d shared among -np %d)", nctx, f.parallel)
	}
	return line
}

// slotsOf says "n slots of c positions each", or "1 slot of c positions".
func slotsOf(n, c int) string {
	if n == 1 {
		return fmt.Sprintf("1 slot of %d positions", c)
	}
	return fmt.Sprintf("%d slots of %d positions each", n, c)
}

// defaultModelID is the model's id in the API when -model-name gives none: for a run's
// checkpoint, runs/<id>/weights/model.gguf, the run's id (its directory's name), and for a
// step's, weights/step-<N>/model.gguf, "<id>-step-<N>"; for any other file its name without
// .gguf. toy's checkpoints are all called model.gguf, so the file's name told them apart from
// nothing.
func defaultModelID(path string) string {
	name := filepath.Base(path)
	if ext := filepath.Ext(name); ext == ".gguf" {
		name = name[:len(name)-len(ext)]
	}
	abs, err := filepath.Abs(path)
	if err != nil || filepath.Base(abs) != "model.gguf" {
		return name
	}
	dir, step := filepath.Dir(abs), ""
	if n, ok := strings.CutPrefix(filepath.Base(dir), "step-"); ok {
		v, err := strconv.Atoi(n)
		if err != nil || v < 0 {
			return name
		}
		dir, step = filepath.Dir(dir), fmt.Sprintf("-step-%d", v)
	}
	if filepath.Base(dir) != runs.WeightsDir {
		return name
	}
	run := filepath.Dir(dir)
	if st, err := os.Stat(filepath.Join(run, runs.EventsFile)); err != nil || !st.Mode().IsRegular() {
		return name
	}
	return filepath.Base(run) + step
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

// toy serve's address when no flag names one: llama-server's.
const (
	defaultHost = "127.0.0.1"
	defaultPort = 8080
)

var defaultAddr = net.JoinHostPort(defaultHost, strconv.Itoa(defaultPort))

// listenAddr is the address toy serve listens on: -addr, whose host -host and whose port -port
// replace (llama-server's flags). -addr given with -host or -port must agree with them: a
// contradiction is a usage error, not settled by a rule of precedence.
func listenAddr(addr string, addrSet bool, host string, hostSet bool, port int, portSet bool) (string, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", usagef("-addr %q: want host:port (%v)", addr, err)
	}
	if hostSet {
		if addrSet && host != h {
			return "", usagef("-addr %s and -host %s disagree: give one of them", addr, host)
		}
		h = host
	}
	if portSet {
		if port < 0 || port > 65535 {
			return "", usagef("-port %d: want 0 to 65535", port)
		}
		if n, err := strconv.Atoi(p); addrSet && (err != nil || n != port) {
			return "", usagef("-addr %s and -port %d disagree: give one of them", addr, port)
		}
		p = strconv.Itoa(port)
	}
	return net.JoinHostPort(h, p), nil
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
	if err := parseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	set := setFlags(fs)
	listen, err := listenAddr(*addr, set["addr"], *host, set["host"], *port, set["port"])
	if err != nil {
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
