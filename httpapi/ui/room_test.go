package ui

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// seriesOf decodes an EventHistory's series.
func seriesOf(t *testing.T, data []byte) map[string][][]any {
	t.Helper()
	var hist struct {
		Series map[string][][]any `json:"series"`
	}
	if err := json.Unmarshal(data, &hist); err != nil {
		t.Fatal(err)
	}
	return hist.Series
}

// TestHubSamplesUnwatchedRoom: once started, the hub puts the latest tick
// of a waiting room into the ring every interval, so a page opened later
// gets the room's admissions and abandons per second of the seconds
// nobody watched, with no read of the promotions.
func TestHubSamplesUnwatchedRoom(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var reads atomic.Int64
		h, err := NewHub(HubConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Source: func(context.Context) ([]Promotion, error) {
				reads.Add(1)
				return nil, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		h.Start()
		// The scheduler's ticks, half-way between the hub's samples: 20
		// let in and 2 abandoned a second, for five seconds.
		time.Sleep(500 * time.Millisecond)
		for i := range 6 {
			h.Tally().Room("r", RoomTick{Admitted: int64(20 * i), Abandoned: int64(2 * i)})
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
		if e.Name != EventHistory {
			t.Fatalf("first event %q", e.Name)
		}
		pts := seriesOf(t, e.Data)["r"]
		var ticked int
		for _, pt := range pts {
			if pt[6] == nil {
				continue
			}
			ticked++
			if pt[5] != nil || pt[4] != nil {
				t.Fatalf("a ticked sample carries figures nobody read: %v", pt)
			}
			if ticked > 1 && (pt[6] != 20.0 || pt[7] != 2.0) {
				t.Fatalf("unwatched room at %v/s admitted, %v/s abandoned; want 20 and 2: %v", pt[6], pt[7], pts)
			}
		}
		if ticked < 5 {
			t.Fatalf("%d samples of the room, want a sample per tick at least: %v", ticked, pts)
		}
		s.Close()
		if err := h.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHistoryRoomTicks: the ring takes the room's latest tick while it is
// fresh; a tick seen twice (one missed) carries the rate on and the next
// one spans both seconds; a room whose ticks stop leaves the ring within
// two of its tick periods; one ticked more slowly than the hub samples
// keeps its figures between ticks; a tick that carries the line puts it
// in the ring.
func TestHistoryRoomTicks(t *testing.T) {
	t.Parallel()
	var tally Tally
	h := newHistory(100, &tally, time.Second)
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	waiting := int64(40)
	// Ticks of "r" at 0.5, 1.5 and 3.5 s (the one at 2.5 s missed, and none
	// after), of "slow" every 5 s, of "line" with its line at 0.5 s.
	ticks := map[float64][]func(){
		0.5: {func() { tally.putRoom("r", RoomTick{Admitted: 0}, at(0.5)) },
			func() { tally.putRoom("slow", RoomTick{Admitted: 0}, at(0.5)) },
			func() { tally.putRoom("line", RoomTick{Admitted: 3, Waiting: &waiting}, at(0.5)) }},
		1.5:  {func() { tally.putRoom("r", RoomTick{Admitted: 10}, at(1.5)) }},
		3.5:  {func() { tally.putRoom("r", RoomTick{Admitted: 30}, at(3.5)) }},
		5.5:  {func() { tally.putRoom("slow", RoomTick{Admitted: 50}, at(5.5)) }},
		10.5: {func() { tally.putRoom("slow", RoomTick{Admitted: 100}, at(10.5)) }},
	}
	for sec := range 16 {
		for _, f := range ticks[float64(sec)-0.5] {
			f()
		}
		h.add(at(float64(sec)), nil)
	}
	var out struct {
		Series map[string][][]any `json:"series"`
	}
	if err := json.Unmarshal(h.marshal(time.Second), &out); err != nil {
		t.Fatal(err)
	}
	// admits are a ring's admissions per second by second, nil where the
	// room's totals were not known (the marshalled points leave out the
	// inside of quiet runs).
	admits := func(id string) map[float64]any {
		m := map[float64]any{}
		h.by[id].each(func(_ int, s sample) {
			m[s.at.Sub(t0).Seconds()] = s.point()[6]
		})
		return m
	}
	r := admits("r")
	// At 1 s the first tick (no rate yet), at 2 s and 3 s 10/s, at 4 s the
	// two seconds of the missed tick, 10/s, carried on while the tick is
	// younger than two of its periods (4 s); from 8 s nothing.
	for sec, want := range map[float64]any{1: 0.0, 2: 10.0, 3: 10.0, 4: 10.0, 5: 10.0, 7: 10.0, 8: nil, 15: nil} {
		if got, ok := r[sec]; !ok || got != want {
			t.Errorf("r at %v s: %v (sampled: %v), want %v", sec, got, ok, want)
		}
	}
	slow := admits("slow")
	// Its first tick has no period yet: gone after three intervals; the
	// second one stays for its period, and the third has a rate.
	for sec, want := range map[float64]any{1: 0.0, 3: 0.0, 4: nil, 5: nil, 6: 0.0, 10: 0.0, 11: 10.0, 15: 10.0} {
		if got := slow[sec]; got != want {
			t.Errorf("slow at %v s: %v, want %v", sec, got, want)
		}
	}
	if pts := out.Series["line"]; len(pts) == 0 || pts[1][5] != 40.0 {
		t.Errorf("the line of a tick that carries it: %v", pts)
	}
}
