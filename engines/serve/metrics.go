package serve

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type atomicCounter struct{ n atomic.Int64 }

func (c *atomicCounter) next() int64 { return c.n.Add(1) }

// ttftBuckets are the upper bounds (seconds) of the time-to-first-token histogram.
var ttftBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// rateWindow is the span over which /metrics reports generation tokens per second.
const rateWindow = 10 * time.Second

// metrics are the server's counters, served in Prometheus' text format.
type metrics struct {
	slots                   int
	busy, queued, cancelled atomic.Int64
	promptTokens, genTokens atomic.Int64
	cachedTokens            atomic.Int64
	sharedTokens            atomic.Int64
	spec                    *specMetrics // the drafter's proposals and acceptances; nil without one

	mu       sync.Mutex
	requests map[[2]string]int64 // (endpoint, status) → count
	ttft     []int64             // per bucket, then +Inf
	ttftSum  float64
	ttftN    int64
	steps    []stepSample // the steps of the last rateWindow
}

type stepSample struct {
	at     time.Time
	tokens int
}

func (m *metrics) init(slots int) {
	m.slots = slots
	m.requests = map[[2]string]int64{}
	m.ttft = make([]int64, len(ttftBuckets)+1)
}

func (m *metrics) request(endpoint string, status int) {
	m.mu.Lock()
	m.requests[[2]string{endpoint, fmt.Sprint(status)}]++
	m.mu.Unlock()
}

func (m *metrics) firstToken(d time.Duration) {
	s := d.Seconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	i := sort.SearchFloat64s(ttftBuckets, s)
	m.ttft[i]++
	m.ttftSum += s
	m.ttftN++
}

func (m *metrics) step(tokens int, _ time.Duration) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.steps = append(m.steps, stepSample{now, tokens})
	m.trim(now)
}

// trim drops the steps older than rateWindow.
func (m *metrics) trim(now time.Time) {
	i := 0
	for i < len(m.steps) && now.Sub(m.steps[i].at) > rateWindow {
		i++
	}
	m.steps = append(m.steps[:0], m.steps[i:]...)
}

// tokensPerSecond is the generation rate over the last rateWindow.
func (m *metrics) tokensPerSecond() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.trim(time.Now())
	n := 0
	for _, s := range m.steps {
		n += s.tokens
	}
	return float64(n) / rateWindow.Seconds()
}

func (m *metrics) serve(w http.ResponseWriter, r *http.Request) {
	tps := m.tokensPerSecond()
	var b strings.Builder
	metric := func(name, typ, help string) { fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ) }
	metric("toy_requests_total", "counter", "HTTP requests by endpoint and status code.")
	m.mu.Lock()
	var keys [][2]string
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		fmt.Fprintf(&b, "toy_requests_total{endpoint=%q,code=%q} %d\n", k[0], k[1], m.requests[k])
	}
	metric("toy_time_to_first_token_seconds", "histogram", "Time from a request's arrival to its first generated token.")
	var cum int64
	for i, le := range ttftBuckets {
		cum += m.ttft[i]
		fmt.Fprintf(&b, "toy_time_to_first_token_seconds_bucket{le=\"%g\"} %d\n", le, cum)
	}
	cum += m.ttft[len(ttftBuckets)]
	fmt.Fprintf(&b, "toy_time_to_first_token_seconds_bucket{le=\"+Inf\"} %d\n", cum)
	fmt.Fprintf(&b, "toy_time_to_first_token_seconds_sum %g\ntoy_time_to_first_token_seconds_count %d\n", m.ttftSum, m.ttftN)
	m.mu.Unlock()
	for _, g := range []struct {
		name, typ, help string
		v               any
	}{
		{"toy_queue_depth", "gauge", "Requests waiting for a slot.", m.queued.Load()},
		{"toy_slots", "gauge", "Sequences decoded at once (-parallel).", m.slots},
		{"toy_slots_busy", "gauge", "Slots running a request.", m.busy.Load()},
		{"toy_prompt_tokens_total", "counter", "Prompt tokens computed.", m.promptTokens.Load()},
		{"toy_prompt_tokens_cached_total", "counter", "Prompt tokens whose keys and values were cached (not computed again): by the slot's last sequence or copied from another slot's.", m.cachedTokens.Load()},
		{"toy_prompt_tokens_shared_total", "counter", "Cached prompt tokens whose keys and values were copied from another slot's sequence (a prefix requests share).", m.sharedTokens.Load()},
		{"toy_generated_tokens_total", "counter", "Tokens generated.", m.genTokens.Load()},
		{"toy_cancelled_requests_total", "counter", "Requests whose client went away before the end.", m.cancelled.Load()},
		{"toy_generation_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s, all slots together.", tps},
	} {
		metric(g.name, g.typ, g.help)
		fmt.Fprintf(&b, "%s %v\n", g.name, g.v)
	}
	m.spec.write(&b, metric)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, b.String())
}

// specMetrics count the drafter's proposals and the verifications' acceptances, per slot.
type specMetrics struct {
	proposals, acceptances []atomic.Int64
}

func newSpecMetrics(slots int) *specMetrics {
	return &specMetrics{proposals: make([]atomic.Int64, slots), acceptances: make([]atomic.Int64, slots)}
}

func (m *specMetrics) proposed(slot, n int) { m.proposals[slot].Add(int64(n)) }

func (m *specMetrics) accepted(slot, n int) { m.acceptances[slot].Add(int64(n)) }

// write adds the speculative counters to a /metrics page (nothing without a drafter).
func (m *specMetrics) write(b *strings.Builder, metric func(name, typ, help string)) {
	if m == nil {
		return
	}
	for _, c := range []struct {
		name, help string
		v          []atomic.Int64
	}{
		{"toy_draft_proposed_tokens", "Tokens the drafter proposed", m.proposals},
		{"toy_draft_accepted_tokens", "Proposed tokens the target accepted", m.acceptances},
	} {
		var total int64
		metric(c.name+"_total", "counter", c.help+", all slots.")
		for i := range c.v {
			total += c.v[i].Load()
		}
		fmt.Fprintf(b, "%s_total %d\n", c.name, total)
		metric("toy_slot_"+strings.TrimPrefix(c.name, "toy_")+"_total", "counter", c.help+", per slot.")
		for i := range c.v {
			fmt.Fprintf(b, "toy_slot_%s_total{slot=\"%d\"} %d\n", strings.TrimPrefix(c.name, "toy_"), i, c.v[i].Load())
		}
	}
}
