package ui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestRates(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	prev := sample{at: t0, accepted: 10, rejected: 5, issued: 8, watched: true, gAccepted: 100, gSettled: 90,
		room: true, roomAt: t0, admitted: 50, abandoned: 2, admits: 7, abandons: 1}
	cases := []struct {
		name                    string
		s                       sample
		claims, rejects, issues float64
		admits, abandons        float64
	}{
		{"both read: the promotion's own counts", sample{at: t0.Add(2 * time.Second), accepted: 12, rejected: 9, issued: 9,
			watched: true, gAccepted: 140, gSettled: 110, room: true, roomAt: t0.Add(2 * time.Second), admitted: 60, abandoned: 6},
			20, 2, 10, 5, 2},
		{"the room's rates over the time between its figures", sample{at: t0.Add(time.Second), room: true,
			roomAt: t0.Add(4 * time.Second), admitted: 90, abandoned: 10}, 0, 0, 0, 10, 2},
		{"a tick seen again carries the room's rates on", sample{at: t0.Add(time.Second), room: true, roomAt: t0,
			admitted: 50, abandoned: 2}, 0, 0, 0, 7, 1},
		{"not read: this instance's counts", sample{at: t0.Add(2 * time.Second), accepted: 16, rejected: 5, issued: 12},
			3, 0, 2, 0, 0},
		{"a count that fell is no negative rate", sample{at: t0.Add(time.Second), accepted: 1, rejected: 1, issued: 1,
			watched: true, gAccepted: 3, gSettled: 3, room: true, roomAt: t0.Add(time.Second)}, 0, 0, 0, 0, 0},
		{"no time passed", sample{at: t0, accepted: 50}, 0, 0, 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := rates(prev, c.s)
			if got.claims != c.claims || got.rejects != c.rejects || got.issues != c.issues || got.admits != c.admits || got.abandons != c.abandons {
				t.Fatalf("rates %v %v %v %v %v, want %v %v %v %v %v", got.claims, got.rejects, got.issues, got.admits, got.abandons,
					c.claims, c.rejects, c.issues, c.admits, c.abandons)
			}
		})
	}
}

// TestHistoryBounded: a ring keeps its size; a promotion idle for
// ForgetAfter is forgotten with its Tally entry (its room's tick too); one
// still counting is not.
func TestHistoryBounded(t *testing.T) {
	t.Parallel()
	var tally Tally
	h := newHistory(4, &tally, time.Second)
	t0 := time.Unix(1000, 0)
	tally.putRoom("room", RoomTick{Admitted: 1}, t0)
	for i := range 10 {
		tally.Answer("a", "accepted")
		tally.Answer("b", "sold_out")
		h.add(t0.Add(time.Duration(i)*time.Second), []Promotion{{ID: "shown"}})
	}
	if n := h.by["a"].n; n != 4 {
		t.Fatalf("kept %d samples, want 4", n)
	}
	last, _ := h.by["a"].last()
	if last.accepted != 10 || last.claims != 1 {
		t.Fatalf("last sample %+v", last)
	}
	later := t0.Add(ForgetAfter + 10*time.Second)
	tally.Answer("a", "accepted")
	h.add(later, nil)
	if _, ok := h.by["b"]; ok {
		t.Fatal("a promotion idle for a day keeps its ring")
	}
	if _, ok := h.by["shown"]; ok {
		t.Fatal("a promotion no longer shown keeps its ring")
	}
	if _, ok := tally.room("room"); ok || h.by["room"] != nil {
		t.Fatal("a room no longer ticked keeps its ring or its tick")
	}
	if tot := tally.Totals("b"); tot.RejectedSum() != 0 {
		t.Fatalf("a forgotten promotion keeps its tally: %+v", tot)
	}
	if _, ok := h.by["a"]; !ok || tally.Totals("a").Accepted != 11 {
		t.Fatal("a promotion still counting was forgotten")
	}
}

// TestMarshalQuietRuns: a run of samples with nothing to draw is sent as
// its ends; samples taken without a page carry no lag nor room.
func TestMarshalQuietRuns(t *testing.T) {
	t.Parallel()
	var tally Tally
	h := newHistory(100, &tally, time.Second)
	t0 := time.Unix(1000, 0)
	tally.Answer("p", "accepted")
	for i := range 10 {
		if i == 5 {
			tally.Answer("p", "accepted")
		}
		h.add(t0.Add(time.Duration(i)*time.Second), nil)
	}
	var out struct {
		Series map[string][][]any `json:"series"`
	}
	if err := json.Unmarshal(h.marshal(time.Second), &out); err != nil {
		t.Fatal(err)
	}
	var ts []float64
	for _, pt := range out.Series["p"] {
		ts = append(ts, (pt[0].(float64)-1e6)/1000)
		if pt[4] != nil || pt[5] != nil {
			t.Fatalf("a sample taken without a page carries Redis's figures: %v", pt)
		}
	}
	if want := []float64{0, 4, 5, 6, 9}; !slices.Equal(ts, want) {
		t.Fatalf("points at %v s, want %v", ts, want)
	}
}

// TestHubSamplesUnwatched: once started, the hub samples the Tally every
// interval without reading the promotions, so a page opened later gets
// the rates of the seconds nobody watched; Stop ends the loop.
func TestHubSamplesUnwatched(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var reads atomic.Int64
		h, err := NewHub(HubConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Source: func(context.Context) ([]Promotion, error) {
				reads.Add(1)
				return []Promotion{{ID: "p", Accepted: 30}}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		h.Start()
		// Ten of each between two samples (the ticks at 1 s, 2 s, 3 s).
		time.Sleep(500 * time.Millisecond)
		for range 3 {
			for range 10 {
				h.Tally().Answer("p", "accepted")
				h.Tally().Answer("p", "sold_out")
				h.Tally().Answer("p", "not_found") // not the promotion's refusal
			}
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if n := reads.Load(); n != 0 {
			t.Fatalf("%d reads of the promotions with nobody watching", n)
		}
		s, err := h.Subscribe()
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		e := <-s.C
		var hist struct {
			Series map[string][][]any `json:"series"`
		}
		if err := json.Unmarshal(e.Data, &hist); err != nil || e.Name != EventHistory {
			t.Fatalf("first event %q: %v", e.Name, err)
		}
		var claims, rejects float64
		for _, pt := range hist.Series["p"] {
			claims, rejects = max(claims, pt[1].(float64)), max(rejects, pt[2].(float64))
		}
		if claims != 10 || rejects != 10 {
			t.Fatalf("unwatched peak %v claims/s, %v rejected/s; want 10 and 10: %v", claims, rejects, hist.Series["p"])
		}
		if tot := h.Tally().Totals("p"); tot.Accepted != 30 || tot.Rejected["sold_out"] != 30 || len(tot.Rejected) != 1 {
			t.Fatalf("totals %+v", tot)
		}
		s.Close()
		if err := h.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
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
