package infer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
)

// notifyInterrupt relays Ctrl-C (SIGINT) to c instead of ending the process, until the
// function it returns is called; tests replace it to send their own.
var notifyInterrupt = func(c chan<- os.Signal) (stop func()) {
	signal.Notify(c, os.Interrupt)
	return func() { signal.Stop(c) }
}

// conversationSetup is what toy generate's flags and the model say of a conversation.
type conversationSetup struct {
	model     *decoding.GGUFModel
	behaviour cli.Behaviour
	// template is -template's name, or the kernel table's; empty: the file's.
	template string
	// plainIfNoTemplate (-i alone) makes a model without a chat template continue plain text
	// instead of refusing.
	plainIfNoTemplate bool
	// system and prompt are the system message and the opening user message (either may be
	// empty).
	system, prompt string
	params         sample.Params
	seedGiven      bool
	n              int
	stops          []string
	start          time.Time
}

// converse holds toy generate's conversation (-cnv, -i) on dec, reading standard input (stdin),
// writing the replies to stdout, the prompts and notes to stderr, and the timing summary there
// at the end.
func converse(stdout, stderr io.Writer, dec *decoding.Decoder, tok *tokenizer.Tokenizer, cs conversationSetup) error {
	c := &conversation{tok: tok, addBOS: cs.behaviour.AddBOS}
	stops := cs.stops
	tmpl, err := cli.ChatTemplate(cs.model, tok, cs.template, cs.behaviour.AddBOS)
	switch {
	case err == nil:
		c.tmpl = &tmpl
		stops = append(stops, tmpl.StopStrings()...)
		if cs.system != "" {
			c.msgs = append(c.msgs, sample.Message{Role: sample.RoleSystem, Content: cs.system})
		}
	case cs.template != "":
		return fmt.Errorf("-template: %w", err)
	case !errors.Is(err, cli.ErrNoChatTemplate):
		return fmt.Errorf("-cnv: %w", err) // a template the file carries, which does not compile
	case !cs.plainIfNoTemplate:
		return fmt.Errorf("-cnv: %w; or -i alone continues plain text", err)
	case cs.system != "":
		return cli.Usagef("-system: a plain-text conversation (-i on a model without a chat template) has no system message; -template names a template")
	default:
		fmt.Fprintf(stderr, "toy generate: -i: the model has no chat template: plain text, each line read appended to it (-template names a template)\n")
	}
	if cs.prompt != "" {
		c.msgs = append(c.msgs, sample.Message{Role: sample.RoleUser, Content: cs.prompt})
	}
	p := cs.params
	drawSeed(&p, cs.seedGiven, stderr)
	interrupts := make(chan os.Signal, 1)
	stop := notifyInterrupt(interrupts)
	defer stop()
	c.loop = &replyLoop{dec: dec, tok: tok, s: sample.NewSampler(p), n: cs.n, stops: stops, interrupts: interrupts,
		timing: &genTiming{load: time.Since(cs.start)}}
	out := bufio.NewWriter(stdout)
	err = c.run(stdin, out, stderr, interrupts)
	out.Flush()
	if ie := (*cli.InterruptedError)(nil); err == nil || errors.As(err, &ie) {
		c.loop.timing.report(stderr)
	}
	return err
}

// conversation is toy generate -cnv (toy chat): the messages so far, each turn rendered whole
// through the chat template and the decoder's cache kept for the prefix the rendering shares
// with what the cache holds (the earlier turns), so that a turn computes only its new tokens.
// Without a template (-i on a model that has none) the conversation is plain text: the
// messages' contents one after the other, continued by the model.
type conversation struct {
	loop *replyLoop
	tok  *tokenizer.Tokenizer
	// tmpl renders the messages; nil: plain text.
	tmpl   *sample.Template
	addBOS bool
	msgs   []sample.Message
}

// render is the conversation's tokens: BOS where the model takes one, then the messages through
// the template with the opening of the assistant's turn (special tokens parsed), or their
// contents one after the other.
func (c *conversation) render() ([]int32, error) {
	var text string
	special := c.tmpl != nil
	if special {
		var err error
		if text, err = c.tmpl.Apply(c.msgs, true); err != nil {
			return nil, err
		}
	} else {
		var b strings.Builder
		for _, m := range c.msgs {
			b.WriteString(m.Content)
		}
		text = b.String()
	}
	ids := c.tok.Encode(text, tokenizer.EncodeOptions{ParseSpecial: special})
	if c.addBOS {
		ids = append([]int32{c.tok.BOS()}, ids...)
	}
	return ids, nil
}

// turn answers the conversation's last message: it keeps the cache's positions that the
// rendering begins with, computes the rest, writes the reply to out followed by a newline and
// adds it to the conversation (as far as it came, when it was stopped).
func (c *conversation) turn(out *bufio.Writer, stderr io.Writer) error {
	ids, err := c.render()
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return errors.New("the conversation encodes to no tokens")
	}
	dec, timing := c.loop.dec, c.loop.timing
	keep := min(decoding.CommonPrefix(dec.History(), ids), len(ids)-1) // the last token's logits start the reply
	if err := dec.Truncate(keep); err != nil {
		return err
	}
	t0 := time.Now()
	logits, err := dec.Prompt(ids[keep:])
	if errors.Is(err, decoding.ErrContextFull) {
		return fmt.Errorf("the conversation's %d tokens do not fit the context of %d (-c sets a larger one)", len(ids), dec.MaxContext())
	}
	if err != nil {
		return err
	}
	timing.promptTime += time.Since(t0)
	timing.promptTokens += len(ids)
	timing.reused += keep
	text, end, err := c.loop.reply(out, ids, logits)
	fmt.Fprintln(out)
	out.Flush()
	if err != nil {
		return err
	}
	switch end {
	case endContextFull:
		contextFullNote(stderr, dec)
	case endInterrupted:
		fmt.Fprintf(stderr, "toy generate: reply stopped (Ctrl-C at the prompt ends the conversation)\n")
	}
	c.msgs = append(c.msgs, sample.Message{Role: sample.RoleAssistant, Content: text})
	return nil
}

// readStatus is how reading a message ended.
type readStatus int

const (
	readMessage readStatus = iota
	readEOF
	readInterrupted
)

// read waits for the next message: a line, or lines joined while each ends with a backslash
// (llama.cpp's way of typing several), without their line ends.
func read(lines <-chan string, interrupts <-chan os.Signal) (string, readStatus) {
	var msg strings.Builder
	for {
		select {
		case <-interrupts:
			return "", readInterrupted
		case line, ok := <-lines:
			if !ok {
				if msg.Len() > 0 {
					return msg.String(), readMessage
				}
				return "", readEOF
			}
			if more, found := strings.CutSuffix(line, `\`); found {
				msg.WriteString(more)
				msg.WriteString("\n")
				continue
			}
			msg.WriteString(line)
			return msg.String(), readMessage
		}
	}
}

// run answers the conversation's opening message, if it has one (-p or -f), then each message
// read from in, a line each, until /exit, the end of in or Ctrl-C at the prompt (an
// cli.InterruptedError). The prompt "> " goes to stderr, the replies to out.
func (c *conversation) run(in io.Reader, out *bufio.Writer, stderr io.Writer, interrupts <-chan os.Signal) error {
	done := make(chan struct{})
	defer close(done)
	lines, readErr := readLines(in, done)
	if n := len(c.msgs); n > 0 && c.msgs[n-1].Role == sample.RoleUser {
		if c.tmpl == nil {
			fmt.Fprint(out, c.msgs[n-1].Content) // plain text: the prompt is echoed, as toy generate does
		}
		if err := c.turn(out, stderr); err != nil {
			return err
		}
	}
	for {
		fmt.Fprint(stderr, "> ")
		msg, status := read(lines, interrupts)
		switch status {
		case readEOF:
			fmt.Fprintln(stderr)
			if err := readErr(); err != nil {
				return fmt.Errorf("reading standard input: %w", err)
			}
			return nil
		case readInterrupted:
			fmt.Fprintln(stderr)
			return &cli.InterruptedError{Err: errors.New("Ctrl-C at the prompt: the conversation ends")}
		}
		switch strings.TrimSpace(msg) {
		case "":
			continue
		case "/exit":
			return nil
		}
		if !utf8.ValidString(msg) {
			fmt.Fprintf(stderr, "toy generate: the message is not UTF-8 text: not sent\n")
			continue
		}
		if c.tmpl == nil {
			msg += "\n" // plain text: the line as typed, its end included
		}
		c.msgs = append(c.msgs, sample.Message{Role: sample.RoleUser, Content: msg})
		if err := c.turn(out, stderr); err != nil {
			return err
		}
	}
}

// readLines sends each line of r, without its line end, on the channel it returns, which it
// closes at the end of r, when reading r fails (the function it returns then gives the error,
// once the channel is closed) or when done is closed.
func readLines(r io.Reader, done <-chan struct{}) (<-chan string, func() error) {
	ch := make(chan string)
	var readErr error
	go func() {
		defer close(ch)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				readErr = err
				return
			}
			if line != "" {
				line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
				select {
				case ch <- line:
				case <-done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return ch, func() error { return readErr }
}
