package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/toyml/toy/engines/kernelrt"
	"github.com/toyml/toy/engines/llama"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/serve"
	"github.com/toyml/toy/ggml"
)

// runServe serves a model over HTTP with OpenAI's API (engines/serve): it listens at once
// (/health answers 503 while loading), loads the model, runs the kernel gate and prints the
// audit, then serves until SIGTERM or SIGINT, when it stops taking requests and lets the
// running ones finish within -shutdown-timeout.
func runServe(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var d decoderFlags
	d.register(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (host:port)")
	parallel := fs.Int("parallel", 4, "sequences decoded at once (slots); -c is shared among them")
	queue := fs.Int("queue", 64, "requests that may wait for a slot; more are refused with 429")
	modelName := fs.String("model-name", "", "the model's id in the API (default: the file's name without .gguf); also matched against the kernel table's names")
	templateName := fs.String("template", "", "chat template (chatml, gemma; default: the model's)")
	allowUnresolved := registerGate(fs)
	shutdown := fs.Duration("shutdown-timeout", 30*time.Second, "on SIGTERM, how long running requests may take to finish before they are cancelled")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: toy serve -m MODEL [flags]

Serves a GGUF model over HTTP with OpenAI's API: POST /v1/chat/completions, POST
/v1/completions (stream: true for server-sent events), GET /v1/models, GET /health, GET
/metrics (Prometheus), and a chat page at /. Requests are decoded together (continuous
batching, -parallel slots; -c is the total context, shared among them as llama-server does).
Sampling defaults come from the kernel table's default preset, as in toy generate.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if *parallel < 1 {
		return usagef("-parallel %d: want at least 1", *parallel)
	}
	if *queue < 0 {
		return usagef("-queue %d: want 0 or more", *queue)
	}
	if d.ctxFull != "error" {
		return usagef("-ctx-full %s: toy serve does not shift the context; a reply stops at the end of its slot's context (finish_reason length)", d.ctxFull)
	}
	opts, err := d.options()
	if err != nil {
		return err
	}
	if d.model == "" {
		return usagef("-m MODEL is required")
	}
	if *modelName == "" {
		*modelName = filepath.Base(d.model)
		if ext := filepath.Ext(*modelName); ext == ".gguf" {
			*modelName = (*modelName)[:len(*modelName)-len(ext)]
		}
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	var front serve.Front
	hs := &http.Server{Handler: &front, ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stderr, "toy serve: listening on http://%s (loading %s)\n", ln.Addr(), d.model)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	m, tok, err := d.openModel(stderr, "serve")
	if err != nil {
		hs.Close()
		return err
	}
	defer m.Close()
	// The boot-time gate: the table's entry for the model, its audit printed; an unresolved
	// lookup refuses to serve unless allowed.
	// The server samples on the host: it dispatches none of toy's own kernels.
	t := buildTarget()
	entry, named := resolveEntry(stderr, t, modelRef(m, d.model, *modelName))
	r, err := gate(t, entry, kernelrt.Dispatch{}, *allowUnresolved)
	if err != nil {
		hs.Close()
		return err
	}
	info := map[string]any{"backend": ggml.BackendKind, "architecture": m.Arch.Name, "kernel_entry": nil, "kernel_entry_names_model": named}
	if entry != nil {
		fmt.Fprintf(stderr, "toy serve: kernel table %s: %s resolves to %s\n", t.Name, d.model, entry.Name)
		for _, l := range r.Lines() {
			fmt.Fprintf(stderr, "toy serve:   audit: %s\n", l)
		}
		if len(r.Lines()) == 0 {
			fmt.Fprintf(stderr, "toy serve:   audit: no kernel lookups (ggml's kernels are compiled in)\n")
		}
		info["kernel_target"], info["kernel_entry"], info["kernel_unresolved"] = t.Name, entry.Name, len(r.Unresolved)
	}
	p := sample.DefaultParams()
	if entry != nil && named {
		applyPreset(&p, entry, map[string]bool{})
	}
	beh := modelBehaviour(m, tok, entry, named)
	if *templateName == "" {
		*templateName = beh.template
	}
	var tmpl *sample.Template
	if t, err := chatTemplate(m, *templateName); err == nil {
		tmpl = &t
	} else if *templateName != "" {
		hs.Close()
		return err
	} else {
		fmt.Fprintf(stderr, "toy serve: the model has no chat template: /v1/chat/completions is refused (-template names one)\n")
	}
	nctx := d.ctx
	if nctx == 0 {
		nctx = m.Arch.Context
	}
	if nctx/(*parallel) < 2 {
		hs.Close()
		return usagef("-c %d among -parallel %d leaves fewer than 2 positions a slot", nctx, *parallel)
	}
	dec, err := llama.NewBatchDecoder(m, llama.BatchDecoderOptions{Slots: *parallel, SlotContext: nctx / *parallel,
		KVType: opts.KVType, FlashAttention: opts.FlashAttention, Threads: d.threads, Batch: opts.Batch})
	if err != nil {
		hs.Close()
		return err
	}
	defer dec.Close()
	srv, err := serve.New(serve.Config{Model: m, Decoder: dec, Tokenizer: tok, ModelName: *modelName, AddBOS: beh.addBOS,
		Template: tmpl, Stops: beh.stops, Defaults: p, Queue: *queue, Info: info, Log: stderr})
	if err != nil {
		hs.Close()
		return err
	}
	front.Ready(srv.Handler())
	fmt.Fprintf(stderr, "toy serve: ready: %s, %d slots of %d positions, queue %d, sampling %+v\n", *modelName, *parallel, nctx / *parallel, *queue, p)

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
