package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// needTool returns the path of a program a test needs (absent: see absent).
func needTool(t *testing.T, name, install string) string {
	path, err := exec.LookPath(name)
	if err != nil {
		absent(t, name, install)
	}
	return path
}

// absent ends a test that lacks what it needs: it is skipped, unless it runs under CI (CI
// set), where that is a failure, as .ci/run installs everything (install says how).
func absent(t *testing.T, what, install string) {
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed (CI is set, so this is a failure: %s)", what, install)
	}
	t.Skipf("%s is not installed (%s)", what, install)
}

// TestPageInChromium loads the chat page in headless Chromium (Debian's chromium), sends a
// message as a person would (typed, then Enter), and checks that the reply streams into the
// page: its text grows in several steps and ends non-empty, with the model's name shown.
func TestPageInChromium(t *testing.T) {
	bin := needTool(t, "chromium", "apt-get install chromium")
	// A server with an API key: the page asks for it before it can show the model's name.
	s, _ := newServer(t, 2, 4, 256, func(c *Config) { c.APIKeys = []string{"sesame"} })
	// The tiny model generates faster than a browser reads: the page would get the reply in
	// a few large pieces. Each flush waits a little, as a real model's steps do.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Handler().ServeHTTP(slowFlusher{w}, r)
	}))
	t.Cleanup(ts.Close)
	b := startChromium(t, bin)

	target := b.call(t, "", "Target.createTarget", map[string]any{"url": "about:blank"})
	session := b.call(t, "", "Target.attachToTarget", map[string]any{"targetId": target["targetId"], "flatten": true})["sessionId"].(string)
	b.call(t, session, "Page.navigate", map[string]any{"url": ts.URL + "/"})
	eval := func(js string) any {
		r := b.call(t, session, "Runtime.evaluate", map[string]any{"expression": js, "returnByValue": true})
		require.Nil(t, r["exceptionDetails"], "%s", js)
		return r["result"].(map[string]any)["value"]
	}
	waitFor := func(what, js string) {
		deadline := time.Now().Add(60 * time.Second)
		for eval(js) != true {
			require.True(t, time.Now().Before(deadline), "waiting for %s", what)
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("the page and its key box", `document.readyState === "complete" && !document.getElementById("key").hidden`)
	assert.Equal(t, "", eval(`document.getElementById("model").textContent`), "no model's name without the key")
	eval(`const k = document.getElementById("key"); k.value = "sesame"; k.dispatchEvent(new Event("change")); true`)
	waitFor("the model's name", `document.getElementById("model").textContent === "model: tiny"`)
	assert.Equal(t, "sesame", eval(`localStorage.getItem("toyKey")`), "the page keeps the key")

	// Record the reply's length at every change, then type a message and press Enter.
	eval(`window.lens = []; new MutationObserver(() => { const a = document.querySelector("#log .assistant, #log .error"); if (a) lens.push(a.textContent.length); })
		.observe(document.getElementById("log"), {subtree: true, childList: true, characterData: true}); document.getElementById("msg").focus(); true`)
	b.call(t, session, "Input.insertText", map[string]any{"text": "Hello there"})
	for _, typ := range []string{"keyDown", "keyUp"} {
		b.call(t, session, "Input.dispatchKeyEvent", map[string]any{"type": typ, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13})
	}

	// The server finishes the reply (no end of text: it runs to the slot's context), then the
	// page has read all of it when its text stops changing.
	deadline := time.Now().Add(60 * time.Second)
	for s.metrics.genTokens.Load() == 0 || s.metrics.busy.Load() > 0 {
		require.True(t, time.Now().Before(deadline), "waiting for the reply")
		time.Sleep(50 * time.Millisecond)
	}
	var reply string
	for {
		time.Sleep(200 * time.Millisecond)
		r, _ := eval(`document.querySelector("#log .assistant, #log .error").textContent`).(string)
		if r == reply && r != "" {
			break
		}
		reply = r
		require.True(t, time.Now().Before(deadline), "waiting for the page to show the reply")
	}
	assert.Equal(t, "Hello there", eval(`document.querySelector("#log .user").textContent`))
	assert.Equal(t, "assistant", eval(`document.querySelector("#log div:last-child").className`), "the reply is not an error: %q", reply)
	assert.Equal(t, "", eval(`document.getElementById("msg").value`), "Enter sent the message and cleared the box")
	var lens []int
	for _, l := range eval(`lens`).([]any) {
		lens = append(lens, int(l.(float64)))
	}
	distinct := map[int]bool{}
	for i, l := range lens {
		distinct[l] = true
		if i > 0 {
			assert.GreaterOrEqual(t, l, lens[i-1], "the reply only grows: %v", lens)
		}
	}
	assert.GreaterOrEqual(t, len(distinct), 10, "the reply arrived in pieces: %v", lens)
	assert.Equal(t, len(utf16.Encode([]rune(reply))), lens[len(lens)-1], "JavaScript counts UTF-16 units")
	t.Logf("%d tokens streamed into the page in %d updates: %q…", s.metrics.genTokens.Load(), len(lens), reply[:min(len(reply), 40)])

	// New chat forgets the conversation; Stop ends the next reply midway and keeps what came.
	// (The tiny model has generated all of it by then; the server's side of a client that goes
	// away is TestDisconnect's.)
	eval(`document.getElementById("new").click(); true`)
	assert.Equal(t, 0.0, eval(`document.querySelectorAll("#log div").length`), "New chat cleared the log")
	eval(`document.getElementById("msg").value = "Tell me more"; document.getElementById("send").click(); true`)
	waitFor("the reply's first pieces under a Stop button", `document.getElementById("send").textContent === "Stop" &&
		(document.querySelector("#log .assistant") || {textContent: ""}).textContent.length > 20`)
	eval(`document.getElementById("send").click(); true`)
	waitFor("the Send button back", `document.getElementById("send").textContent === "Send"`)
	stopped, _ := eval(`document.querySelector("#log .assistant").textContent`).(string)
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, stopped, eval(`document.querySelector("#log .assistant").textContent`), "the stopped reply does not grow")
	assert.Less(t, len(stopped), len(reply)/2, "stopped well before a whole reply's length (the first one's: %d bytes)", len(reply))
	assert.Greater(t, len(stopped), 0)
	assert.Equal(t, "assistant", eval(`document.querySelector("#log div:last-child").className`), "a stopped reply is not an error")
	assert.Equal(t, true, eval(`Array.isArray(history) && history.length === 2 && history[1].role === "assistant" &&
		history[1].content === document.querySelector("#log .assistant").textContent`), "the conversation holds the message and the stopped reply")
	t.Logf("stopped after %d of the first reply's %d bytes", len(stopped), len(reply))
}

// slowFlusher waits 5 ms before each flush of a streamed reply.
type slowFlusher struct{ http.ResponseWriter }

func (f slowFlusher) Flush() {
	time.Sleep(5 * time.Millisecond)
	f.ResponseWriter.(http.Flusher).Flush()
}

// browser is a headless Chromium driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: JSON messages ending in a NUL byte, commands on the child's fd 3,
// replies and events on its fd 4).
type browser struct {
	cmd     *exec.Cmd
	w       *os.File
	mu      sync.Mutex
	next    int
	replies map[int]chan map[string]any
}

func startChromium(t *testing.T, bin string) *browser {
	toChrome, cmdW, err := os.Pipe()
	require.NoError(t, err)
	fromChrome, chromeW, err := os.Pipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{toChrome, chromeW} // fds 3 and 4
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	toChrome.Close()
	chromeW.Close()
	b := &browser{cmd: cmd, w: cmdW, replies: map[int]chan map[string]any{}}
	go b.read(fromChrome)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b.send(ctx, "", "Browser.close", nil)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		cmdW.Close()
		if t.Failed() {
			t.Logf("chromium's stderr:\n%s", stderr.String())
		}
	})
	return b
}

// read dispatches the replies to their callers (events are dropped).
func (b *browser) read(r *os.File) {
	defer r.Close()
	br := bufio.NewReader(r)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			for id, c := range b.replies {
				close(c)
				delete(b.replies, id)
			}
			b.mu.Unlock()
			return
		}
		var m map[string]any
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil {
			continue
		}
		id, ok := m["id"].(float64)
		if !ok {
			continue
		}
		b.mu.Lock()
		c := b.replies[int(id)]
		delete(b.replies, int(id))
		b.mu.Unlock()
		if c != nil {
			c <- m
		}
	}
}

// send sends a command (to a page's session, or to the browser) and waits for its reply.
func (b *browser) send(ctx context.Context, session, method string, params map[string]any) (map[string]any, error) {
	c := make(chan map[string]any, 1)
	b.mu.Lock()
	b.next++
	id := b.next
	b.replies[id] = c
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	data, _ := json.Marshal(msg)
	if _, err := b.w.Write(append(data, 0)); err != nil {
		return nil, err
	}
	select {
	case m, ok := <-c:
		if !ok {
			return nil, fmt.Errorf("%s: chromium closed the pipe", method)
		}
		if e, bad := m["error"]; bad {
			return nil, fmt.Errorf("%s: %v", method, e)
		}
		r, _ := m["result"].(map[string]any)
		return r, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

func (b *browser) call(t *testing.T, session, method string, params map[string]any) map[string]any {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := b.send(ctx, session, method, params)
	require.NoError(t, err)
	return r
}
