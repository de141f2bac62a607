package stream

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestScalePolicy(t *testing.T) {
	t.Parallel()
	p := ScalePolicy{Min: 1, Max: 3, ActiveTrigger: 3, IdleTrigger: 2, StartMinInterval: 10 * time.Second, StopMinInterval: 60 * time.Second}
	tests := []struct {
		name   string
		state  ScaleState
		full   bool
		now    time.Time
		want   ScaleState
		action ScaleAction
	}{
		{"full below trigger counts", ScaleState{Consumers: 1, ConsecutiveFull: 1, ConsecutiveIdle: 1}, true, t0,
			ScaleState{Consumers: 1, ConsecutiveFull: 2}, ScaleHold},
		{"full reaching trigger starts one (never started)", ScaleState{Consumers: 1, ConsecutiveFull: 2}, true, t0,
			ScaleState{Consumers: 2, LastStarted: t0}, ScaleUp},
		{"full reaching trigger after the interval starts one", ScaleState{Consumers: 2, ConsecutiveFull: 2, LastStarted: t0}, true, t0.Add(10 * time.Second),
			ScaleState{Consumers: 3, LastStarted: t0.Add(10 * time.Second)}, ScaleUp},
		{"full reaching trigger within the interval holds and resets", ScaleState{Consumers: 2, ConsecutiveFull: 2, LastStarted: t0}, true, t0.Add(9 * time.Second),
			ScaleState{Consumers: 2, LastStarted: t0}, ScaleHold},
		{"full reaching trigger at max holds", ScaleState{Consumers: 3, ConsecutiveFull: 2}, true, t0,
			ScaleState{Consumers: 3}, ScaleHold},
		{"not full resets the full streak", ScaleState{Consumers: 2, ConsecutiveFull: 2}, false, t0,
			ScaleState{Consumers: 2, ConsecutiveIdle: 1}, ScaleHold},
		{"idle reaching trigger stops one (never stopped)", ScaleState{Consumers: 2, ConsecutiveIdle: 1}, false, t0,
			ScaleState{Consumers: 1, LastStopped: t0}, ScaleDown},
		{"idle reaching trigger after the interval stops one", ScaleState{Consumers: 3, ConsecutiveIdle: 1, LastStopped: t0}, false, t0.Add(time.Minute),
			ScaleState{Consumers: 2, LastStopped: t0.Add(time.Minute)}, ScaleDown},
		{"idle reaching trigger within the interval holds", ScaleState{Consumers: 3, ConsecutiveIdle: 1, LastStopped: t0}, false, t0.Add(59 * time.Second),
			ScaleState{Consumers: 3, LastStopped: t0}, ScaleHold},
		{"idle reaching trigger at min holds", ScaleState{Consumers: 1, ConsecutiveIdle: 1}, false, t0,
			ScaleState{Consumers: 1}, ScaleHold},
		{"idle below trigger counts", ScaleState{Consumers: 2}, false, t0,
			ScaleState{Consumers: 2, ConsecutiveIdle: 1}, ScaleHold},
		{"a start does not delay a stop", ScaleState{Consumers: 2, ConsecutiveIdle: 1, LastStarted: t0}, false, t0,
			ScaleState{Consumers: 1, LastStarted: t0, LastStopped: t0}, ScaleDown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, act := p.Next(tt.state, tt.full, tt.now)
			if got != tt.want || act != tt.action {
				t.Fatalf("Next(%+v, %v) = %+v, %v; want %+v, %v", tt.state, tt.full, got, act, tt.want, tt.action)
			}
		})
	}
}

// Every reachable state stays within Min..Max and moves by at most one, and
// the intervals are honoured, for every sequence of 8 reads at 1s steps.
func TestScalePolicyExhaustive(t *testing.T) {
	t.Parallel()
	p := ScalePolicy{Min: 2, Max: 4, ActiveTrigger: 2, IdleTrigger: 2, StartMinInterval: 3 * time.Second, StopMinInterval: 2 * time.Second}
	for seq := range 1 << 8 {
		s := ScaleState{Consumers: 3}
		var starts, stops []time.Time
		for i := range 8 {
			now := t0.Add(time.Duration(i) * time.Second)
			full := seq&(1<<i) != 0
			next, act := p.Next(s, full, now)
			switch act {
			case ScaleUp:
				if next.Consumers != s.Consumers+1 || !full {
					t.Fatalf("seq %08b step %d: bad up %+v -> %+v", seq, i, s, next)
				}
				starts = append(starts, now)
			case ScaleDown:
				if next.Consumers != s.Consumers-1 || full {
					t.Fatalf("seq %08b step %d: bad down %+v -> %+v", seq, i, s, next)
				}
				stops = append(stops, now)
			default:
				if next.Consumers != s.Consumers {
					t.Fatalf("seq %08b step %d: hold changed count", seq, i)
				}
			}
			if next.Consumers < p.Min || next.Consumers > p.Max {
				t.Fatalf("seq %08b step %d: %d consumers out of range", seq, i, next.Consumers)
			}
			s = next
		}
		for i := 1; i < len(starts); i++ {
			if starts[i].Sub(starts[i-1]) < p.StartMinInterval {
				t.Fatalf("seq %08b: starts %v too close", seq, starts)
			}
		}
		for i := 1; i < len(stops); i++ {
			if stops[i].Sub(stops[i-1]) < p.StopMinInterval {
				t.Fatalf("seq %08b: stops %v too close", seq, stops)
			}
		}
	}
}

func TestInitialConsumers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		total    int64
		min, max int
		want     int
	}{
		{0, 1, 32, 1}, {-5, 2, 32, 2}, {1, 1, 32, 1}, {1000, 1, 32, 1}, {1001, 1, 32, 2},
		{10_000, 1, 32, 10}, {10_000, 12, 32, 12}, {1_000_000, 1, 32, 32}, {5000, 3, 3, 3},
	}
	for _, tt := range tests {
		if got := InitialConsumers(tt.total, tt.min, tt.max); got != tt.want {
			t.Errorf("InitialConsumers(%d, %d, %d) = %d, want %d", tt.total, tt.min, tt.max, got, tt.want)
		}
	}
}

func TestIdleDue(t *testing.T) {
	t.Parallel()
	timeout := 30 * time.Second
	tests := []struct {
		name            string
		now, last, prev time.Time
		timeout         time.Duration
		want            bool
	}{
		{"before the timeout", t0.Add(29 * time.Second), t0, time.Time{}, timeout, false},
		{"at the timeout", t0.Add(30 * time.Second), t0, time.Time{}, timeout, true},
		{"rechecked too soon", t0.Add(40 * time.Second), t0, t0.Add(35 * time.Second), timeout, false},
		{"recheck after a quarter", t0.Add(43 * time.Second), t0, t0.Add(35 * time.Second), timeout, true},
		{"disabled", t0.Add(time.Hour), t0, time.Time{}, -1, false},
		{"a message resets", t0.Add(40 * time.Second), t0.Add(20 * time.Second), time.Time{}, timeout, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := idleDue(tt.now, tt.last, tt.prev, tt.timeout); got != tt.want {
				t.Fatalf("idleDue = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPollDelayAndBackoff(t *testing.T) {
	t.Parallel()
	iv := 100 * time.Millisecond
	want := []time.Duration{25 * time.Millisecond, 50 * time.Millisecond, iv, iv, iv}
	var total time.Duration
	for i, w := range want {
		if got := pollDelay(i+1, iv); got != w {
			t.Errorf("pollDelay(%d) = %s, want %s", i+1, got, w)
		}
		total += pollDelay(i+1, iv)
	}
	// Settled, an empty pool reads once per interval.
	if total < time.Duration(len(want)-2)*iv {
		t.Errorf("5 empty reads span %s", total)
	}
	for n, w := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 10: time.Second} {
		if got := backoff(n, 100*time.Millisecond, time.Second); got != w {
			t.Errorf("backoff(%d) = %s, want %s", n, got, w)
		}
	}
}

func TestErrorKindsClassify(t *testing.T) {
	t.Parallel()
	base := errors.New("x")
	tests := []struct {
		err  error
		kind string
		is   []error
	}{
		{Transient(base), FailureTransient, []error{ErrTransient, base}},
		{Permanent(base), FailurePermanent, []error{ErrPermanent, base}},
		{Malformed(base), FailureMalformed, []error{ErrMalformed, ErrPermanent, base}},
		{fmt.Errorf("wrapped: %w", Malformed(base)), FailureMalformed, []error{ErrMalformed, ErrPermanent}},
		{panicError("boom"), FailurePanic, []error{ErrPanic}},
		{base, FailureError, []error{base}},
	}
	for _, tt := range tests {
		if got := failureKind(tt.err); got != tt.kind {
			t.Errorf("failureKind(%v) = %s, want %s", tt.err, got, tt.kind)
		}
		for _, target := range tt.is {
			if !errors.Is(tt.err, target) {
				t.Errorf("errors.Is(%v, %v) = false", tt.err, target)
			}
		}
	}
	if Transient(nil) != nil || Permanent(nil) != nil || Malformed(nil) != nil {
		t.Error("kinds of nil must be nil")
	}
	if errors.Is(Transient(base), ErrPermanent) {
		t.Error("transient is permanent")
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	d := DefaultConfig()
	if d.BatchSize != 100 || !d.TrimAcked || d.ReadMode != ReadBlock || d.Block != 2*time.Second ||
		d.PollInterval != 100*time.Millisecond || d.IdleTimeout != 30*time.Second || d.MinConsumers != 1 ||
		d.MaxConsumers != 32 || d.ConsecutiveActiveTrigger != 10 || d.ConsecutiveIdleTrigger != 10 ||
		d.StartConsumerMinInterval != 2*time.Second || d.StopConsumerMinInterval != time.Minute ||
		d.ReclaimMinIdle != 30*time.Second || d.MaxDeliveries != 5 || d.HandlerTimeout != 12*time.Second ||
		d.DeadLetterMaxLen != 10000 || d.BatchWait != 5*time.Millisecond {
		t.Fatalf("defaults = %+v", d)
	}
	if err := d.validate(); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		field string
		mod   func(*Config)
	}{
		{"BatchSize", func(c *Config) { c.BatchSize = -1 }},
		{"BatchWait", func(c *Config) { c.BatchWait = -time.Millisecond }},
		{"BatchWait", func(c *Config) { c.BatchWait = 6 * time.Second }}, // with the 12s handler deadline, reaches ReclaimMinIdle
		{"ReadMode", func(c *Config) { c.ReadMode = "push" }},
		{"MaxConsumers", func(c *Config) { c.MinConsumers, c.MaxConsumers = 5, 4 }},
		{"HandlerTimeout", func(c *Config) { c.HandlerTimeout = 15 * time.Second }},
		{"MaxDeliveries", func(c *Config) { c.MaxDeliveries = -1 }},
		{"DeadLetterMaxLen", func(c *Config) { c.DeadLetterMaxLen = -2 }},
	}
	for _, b := range bad {
		c := DefaultConfig()
		b.mod(&c)
		if err := c.withDefaults().validate(); err == nil || !strings.Contains(err.Error(), b.field) {
			t.Errorf("%s: validate = %v", b.field, err)
		}
	}

	y := `
batch_size: 50
batch_wait_ms: 20
trim_acked: false
read_mode: poll
block_ms: 500
poll_interval_ms: 250
idle_timeout_seconds: 60
max_consumers_per_instance: 8
reclaim_min_idle_ms: 10000
max_deliveries: 7
dead_letter_max_len: 500
`
	c := DefaultConfig()
	if err := yaml.Unmarshal([]byte(y), &c); err != nil {
		t.Fatal(err)
	}
	c = c.withDefaults()
	if c.BatchSize != 50 || c.TrimAcked || c.ReadMode != ReadPoll || c.Block != 500*time.Millisecond ||
		c.PollInterval != 250*time.Millisecond || c.IdleTimeout != time.Minute || c.MaxConsumers != 8 ||
		c.MinConsumers != 1 || c.ReclaimMinIdle != 10*time.Second || c.HandlerTimeout != 4*time.Second || c.MaxDeliveries != 7 ||
		c.DeadLetterMaxLen != 500 || c.BatchWait != 20*time.Millisecond {
		t.Fatalf("from YAML = %+v", c)
	}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	unbounded := DefaultConfig()
	if err := yaml.Unmarshal([]byte("dead_letter_max_len: -1\n"), &unbounded); err != nil {
		t.Fatal(err)
	}
	if unbounded = unbounded.withDefaults(); unbounded.DeadLetterMaxLen != -1 || unbounded.validate() != nil {
		t.Fatalf("dead_letter_max_len -1 = %d (%v)", unbounded.DeadLetterMaxLen, unbounded.validate())
	}
	var back Config
	if err := yaml.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if back.withDefaults().BatchSize != 50 || back.PollInterval != c.PollInterval || back.ReclaimMinIdle != c.ReclaimMinIdle ||
		back.DeadLetterMaxLen != 500 || back.BatchWait != 20*time.Millisecond {
		t.Fatalf("round trip = %+v", back)
	}
	off := DefaultConfig()
	if err := yaml.Unmarshal([]byte("batch_wait_ms: 0\n"), &off); err != nil {
		t.Fatal(err)
	}
	if off = off.withDefaults(); off.BatchWait != 0 || off.validate() != nil {
		t.Fatalf("batch_wait_ms 0 = %s (%v)", off.BatchWait, off.validate())
	}
	if (Config{}).withDefaults().BatchWait != 0 {
		t.Fatal("the zero Config waits for batches")
	}
}
