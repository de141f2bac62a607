package ui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestRates(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ser := series{
		{at: at(0), accepted: 0},
		{at: at(1), accepted: 100},
		{at: at(2), accepted: 300},
		{at: at(3), accepted: 400},
	}
	cases := []struct {
		name              string
		ser               series
		s                 sample
		wantRate, wantLag float64
	}{
		{"first sample", nil, sample{at: at(0), accepted: 5}, 0, 0},
		{"all settled", ser, sample{at: at(4), accepted: 400, settled: 400}, 0, 0},
		{"rate from the last sample", ser, sample{at: at(5), accepted: 600, settled: 600}, 100, 0},
		{"lag: settled reached the count of 2 s before", ser, sample{at: at(4), accepted: 400, settled: 300}, 0, 2},
		{"lag: between samples counts the older one", ser, sample{at: at(4), accepted: 400, settled: 250}, 0, 3},
		{"lag: older than the history", ser[1:], sample{at: at(4), accepted: 400, settled: 50}, 0, 3},
		{"a count that fell is no negative rate", ser, sample{at: at(4), accepted: 10, settled: 10}, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := rates(c.ser, c.s)
			if got.claimsPerSecond != c.wantRate || got.lag != c.wantLag {
				t.Fatalf("rate %v lag %v, want %v %v", got.claimsPerSecond, got.lag, c.wantRate, c.wantLag)
			}
		})
	}
}

func TestHistoryBounded(t *testing.T) {
	t.Parallel()
	h := newHistory(3)
	for i := range 10 {
		h.add(time.Unix(int64(i), 0), []Promotion{{ID: "a", Accepted: int64(i)}, {ID: "b"}})
	}
	if n := len(h.by["a"]); n != 4 {
		t.Fatalf("kept %d samples, want 4", n)
	}
	h.add(time.Unix(11, 0), []Promotion{{ID: "a"}})
	if _, ok := h.by["b"]; ok {
		t.Fatal("a promotion no longer listed keeps its history")
	}
}

// TestHubFanOut: however many subscribers, the promotions are read once
// per interval; each subscriber gets the history first, then snapshots;
// past MaxSubscribers Subscribe refuses; the loop ends with the last
// subscription.
func TestHubFanOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var reads atomic.Int64
		h, err := NewHub(HubConfig{MaxSubscribers: 3, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Source: func(context.Context) ([]Promotion, error) {
				n := reads.Add(1)
				if n == 3 {
					return nil, errors.New("redis away")
				}
				return []Promotion{{ID: "p", Accepted: n * 10}}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		var subs []*Subscription
		for range 3 {
			s, err := h.Subscribe()
			if err != nil {
				t.Fatal(err)
			}
			subs = append(subs, s)
		}
		if _, err := h.Subscribe(); !errors.Is(err, ErrFull) {
			t.Fatalf("fourth subscriber: %v", err)
		}
		synctest.Wait()
		for _, s := range subs {
			if e := <-s.C; e.Name != EventHistory {
				t.Fatalf("first event %q", e.Name)
			}
			if e := <-s.C; e.Name != EventSnapshot {
				t.Fatalf("second event %q", e.Name)
			}
		}
		if n := reads.Load(); n != 1 {
			t.Fatalf("%d reads for three subscribers joining at once", n)
		}
		time.Sleep(time.Second) // fake time: the next tick
		synctest.Wait()
		var snaps [3]Snapshot
		for i, s := range subs {
			e := <-s.C
			if err := json.Unmarshal(e.Data, &snaps[i]); err != nil {
				t.Fatal(err)
			}
		}
		if reads.Load() != 2 || snaps[0].Promotions[0].Accepted != 20 || snaps[0].Promotions[0].ClaimsPerSecond != 10 {
			t.Fatalf("after one tick: %d reads, %+v", reads.Load(), snaps[0])
		}
		time.Sleep(time.Second) // a failed read repeats the last promotions
		synctest.Wait()
		var failed Snapshot
		_ = json.Unmarshal((<-subs[0].C).Data, &failed)
		if failed.Error == "" || len(failed.Promotions) != 1 || failed.Promotions[0].Accepted != 20 {
			t.Fatalf("failed read: %+v", failed)
		}
		for _, s := range subs {
			s.Close()
			s.Close()
		}
		if err := h.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		before := reads.Load()
		time.Sleep(10 * time.Second)
		if reads.Load() != before {
			t.Fatal("the hub reads with nobody watching")
		}
		// A new subscriber starts it again.
		s, err := h.Subscribe()
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if e := <-s.C; e.Name != EventHistory {
			t.Fatalf("restart: %q", e.Name)
		}
		s.Close()
		_ = h.Wait(t.Context())
	})
}
