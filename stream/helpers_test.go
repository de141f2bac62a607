package stream

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/redis/rueidis"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// env is one test's stream on one topology.
type env struct {
	c      rueidis.Client
	stream string
	group  string
}

// setup makes a client and a unique stream key with a hash tag.
func setup(t *testing.T, tp redistest.Topology) env {
	t.Helper()
	c := tp.Client(t)
	p := redistest.Prefix(t)
	e := env{c: c, stream: p + "{promo}:claims", group: "issuers"}
	if err := CreateGroup(context.Background(), c, e.stream, e.group); err != nil {
		t.Fatal(err)
	}
	return e
}

// fastConfig is a configuration with short intervals, so tests finish fast;
// idle stop is off unless a test turns it on.
func fastConfig(mode ReadMode) Config {
	c := DefaultConfig()
	c.ReadMode = mode
	c.Block = 100 * time.Millisecond
	c.PollInterval = 20 * time.Millisecond
	c.IdleTimeout = -1
	c.ReclaimMinIdle = 2 * time.Second
	c.ReclaimInterval = 50 * time.Millisecond
	c.HandlerTimeout = 500 * time.Millisecond
	c.LeaseTTL = 3 * time.Second
	c.MinConsumers = 1
	c.MaxConsumers = 1
	c.Logger = slog.New(slog.DiscardHandler)
	return c
}

// quickReclaimConfig is fastConfig with a reclaim threshold of 100ms, so a
// failed or abandoned entry is redelivered within a few tens of
// milliseconds.
func quickReclaimConfig(mode ReadMode) Config {
	c := fastConfig(mode)
	c.ReclaimMinIdle = 100 * time.Millisecond
	c.HandlerTimeout = 40 * time.Millisecond
	c.ReclaimInterval = 20 * time.Millisecond
	return c
}

var modes = []ReadMode{ReadBlock, ReadPoll}

// eachCase runs f for every read mode on every topology, in parallel.
func eachCase(t *testing.T, f func(t *testing.T, tp redistest.Topology, mode ReadMode)) {
	t.Helper()
	for _, tp := range redistest.Topologies(t) {
		for _, mode := range modes {
			t.Run(tp.Name+"/"+string(mode), func(t *testing.T) {
				t.Parallel()
				f(t, tp, mode)
			})
		}
	}
}

// add appends n entries with fields message=<i> (plus extra) and returns
// their ids.
func (e env) add(t *testing.T, n int, extra ...string) []string {
	t.Helper()
	cmds := make(rueidis.Commands, n)
	for i := range n {
		fv := e.c.B().Xadd().Key(e.stream).Id("*").FieldValue().FieldValue("message", strconv.Itoa(i))
		for j := 0; j+1 < len(extra); j += 2 {
			fv = fv.FieldValue(extra[j], extra[j+1])
		}
		cmds[i] = fv.Build()
	}
	ids := make([]string, n)
	for i, r := range e.c.DoMulti(context.Background(), cmds...) {
		id, err := r.ToString()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

// pending is the group's pending count.
func (e env) pending(t *testing.T) int64 {
	t.Helper()
	gi, err := readGroup(context.Background(), e.c, e.stream, e.group)
	if err != nil {
		t.Fatal(err)
	}
	return gi.pending
}

// xlen is the length of key.
func (e env) xlen(t *testing.T, key string) int64 {
	t.Helper()
	n, err := e.c.Do(context.Background(), e.c.B().Xlen().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// dlq returns the dead-letter entries.
func (e env) dlq(t *testing.T) []rueidis.XRangeEntry {
	t.Helper()
	es, err := e.c.Do(context.Background(), e.c.B().Xrange().Key(e.stream+":dlq").Start("-").End("+").Build()).AsXRange()
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// start starts a pool and stops it when the test ends.
func (e env) start(t *testing.T, instance string, spec Spec, cfg Config) *Pool {
	t.Helper()
	spec.Stream, spec.Group = e.stream, e.group
	p, err := NewPool(e.c, instance, spec, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopPool(t, p) })
	return p
}

func stopPool(t *testing.T, p *Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
	<-p.Done()
}

// recorder collects what a handler saw.
type recorder struct {
	mu         sync.Mutex
	byID       map[string]int     // deliveries to the handler per entry id
	byConsumer map[string]int     // entries per consumer
	deliveries map[string][]int64 // Message.Deliveries seen per id
	deadLetter map[string]DeadLetter
}

func newRecorder() *recorder {
	return &recorder{byID: map[string]int{}, byConsumer: map[string]int{}, deliveries: map[string][]int64{}, deadLetter: map[string]DeadLetter{}}
}

func (r *recorder) see(ctx context.Context, msgs []Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.byID[m.ID]++
		r.byConsumer[ConsumerFromContext(ctx)]++
		r.deliveries[m.ID] = append(r.deliveries[m.ID], m.Deliveries)
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID)
}

func (r *recorder) calls(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

func (r *recorder) onDeadLetter(_ context.Context, d DeadLetter) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deadLetter[d.ID] = d
	return nil
}

func (r *recorder) deadLetters() map[string]DeadLetter {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]DeadLetter, len(r.deadLetter))
	for k, v := range r.deadLetter {
		out[k] = v
	}
	return out
}

// commandCalls returns the calls count of a command from INFO commandstats.
func commandCalls(t *testing.T, c rueidis.Client, cmd string) int64 {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_"+cmd+":") {
			continue
		}
		var calls int64
		rest := strings.TrimPrefix(line, "cmdstat_"+cmd+":")
		if _, err := fmt.Sscanf(rest, "calls=%d", &calls); err != nil {
			t.Fatalf("parse %q: %v", line, err)
		}
		return calls
	}
	return 0
}
