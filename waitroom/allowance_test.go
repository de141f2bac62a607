package waitroom

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// The tests of the allowance shift the room's stored times instead of
// waiting: moving open_ms back by d is d more time for the allowance, as if
// d had passed with no tick.

// rate is the admission rate of the allowance tests; their Rooms tick every
// second (the default), so a tick's worth is rate users and the cap 2 × rate.
const rate = 50

// shift moves the room's open_ms back by ms.
func (f fixture) shift(t *testing.T, ms int64) {
	t.Helper()
	if err := f.c.Do(context.Background(), f.c.B().Hincrby().Key(f.rooms.Keys(f.id).Meta()).Field("open_ms").
		Increment(-ms).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

// tick ticks the room once.
func (f fixture) tick(t *testing.T) TickResult {
	t.Helper()
	res, err := f.rooms.Tick(context.Background(), f.id)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// line opens a room at rate with 300 users waiting and 1000 units, and
// starts its admission now.
func line(t *testing.T, tp redistest.Topology, stock int64) fixture {
	t.Helper()
	f := setup(t, tp, stock)
	f.open(t, Settings{AdmitPerSecond: rate, OpensAt: later})
	f.join(t, 300)
	f.startAdmission(t)
	return f
}

// paced checks ticks that each came shifted ms after the previous: they
// let in no more than rate × the time they span (shifted and real) plus
// what the allowance held before the first (carried, in users), and no
// less than a user short of it.
func paced(t *testing.T, f fixture, from TickResult, carried float64, shifted int64, ticks int) TickResult {
	t.Helper()
	last := from
	for range ticks {
		f.shift(t, shifted)
		last = f.tick(t)
	}
	span := float64(int64(ticks)*shifted + last.Now - from.Now)
	most := carried + rate*span/1000
	got := float64(last.Admitted - from.Admitted)
	if got > most || got < float64(rate*int64(ticks)*shifted/1000)-1 {
		t.Fatalf("%d ticks %d ms apart let in %v, want at most %v (rate × %v ms + %v carried) and at least a user short of %d",
			ticks, shifted, got, most, span, carried, rate*int64(ticks)*shifted/1000)
	}
	return last
}

// TestAllowanceAfterStall: a minute with no tick (a crashed instance's
// lease lapsing, a slow machine) is not paid back at once: the first tick
// lets in two ticks' worth at most, and the ticks after it admit at rate.
func TestAllowanceAfterStall(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := line(t, tp, 1000)
		before := f.tick(t)
		f.shift(t, 60_000)
		res := f.tick(t)
		if n := res.Admitted - before.Admitted; n != 2*rate || res.Allowed != res.Admitted {
			t.Fatalf("first tick after a minute with none: %d let in (allowed %d), want the cap, %d", n, res.Allowed, 2*rate)
		}
		paced(t, f, res, 0, 1000, 3)
	})
}

// TestAllowanceNotBankedWhileEmpty: the time a room's line was empty gives
// the crowd that comes later nothing: a minute after the opening with
// nobody waiting, the first tick after 300 users joined lets in one tick's
// worth.
func TestAllowanceNotBankedWhileEmpty(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 1000)
		f.open(t, Settings{AdmitPerSecond: rate, OpensAt: later})
		f.startAdmission(t)
		f.shift(t, 60_000)
		empty := f.tick(t)
		if empty.Admitted != 0 {
			t.Fatalf("empty line: %+v", empty)
		}
		// Less than a user of allowance left.
		if open := f.metaInt(t, "open_ms"); rate*(empty.Now-open) >= 1000 {
			t.Fatalf("open_ms %d at %d: %d ms of allowance kept with nobody waiting", open, empty.Now, empty.Now-open)
		}
		f.join(t, 300)
		paced(t, f, empty, 1, 1000, 3)
	})
}

// TestAllowanceWithManyTickers: four instances ticking a room at once
// after a stall let in no more than one would.
func TestAllowanceWithManyTickers(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := line(t, tp, 1000)
		before := f.tick(t)
		f.shift(t, 60_000)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			results []TickResult
			start   = make(chan struct{})
		)
		for range 4 {
			rooms, err := New(tp.Client(t), Config{Prefix: f.prefix, Keys: testKeys})
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				<-start
				res, err := rooms.Tick(context.Background(), f.id)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				results = append(results, res)
			})
		}
		close(start)
		wg.Wait()
		var first, last, total int64
		seen := map[int64]bool{}
		for _, res := range results {
			if first == 0 || res.Now < first {
				first = res.Now
			}
			last = max(last, res.Now)
			total += int64(len(res.New))
			for _, a := range res.New {
				if seen[a.Pass.ID] {
					t.Fatalf("pass %d handed out twice", a.Pass.ID)
				}
				seen[a.Pass.ID] = true
			}
		}
		if most := 2*rate + rate*(last-first)/1000; total > most {
			t.Fatalf("4 tickers at once after a stall let in %d, want at most %d", total, most)
		}
		if c, err := f.rooms.Counts(context.Background(), f.id); err != nil || c.Admitted != before.Admitted+total {
			t.Fatalf("counts %+v, %v; want %d admitted", c, err, before.Admitted+total)
		}
	})
}

// TestTickV1BesideV2: during a rolling upgrade the previous release's tick
// script (v1, testdata/room_tick_v1.lua) and this one tick the same room:
// v1 reads the allowance v2 left (it does not pay back what v2 capped),
// neither hands a place or a pass out twice, and neither promises more
// than the stock; v2 goes on from the state v1 left.
func TestTickV1BesideV2(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("testdata/room_tick_v1.lua")
	if err != nil {
		t.Fatal(err)
	}
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		const stock = 120
		f := line(t, classic(tp), stock)
		batch := strconv.Itoa(DefaultTickBatch)
		v1 := func() TickResult {
			t.Helper()
			vals, err := f.c.Do(context.Background(), f.c.B().Eval().Script(string(src)).Numkeys(11).
				Key(previousRoom(f.rooms.Keys(f.id))...).Arg(batch, batch).Build()).ToArray()
			if err != nil {
				t.Fatal(err)
			}
			state, _ := vals[0].ToString()
			res, err := f.rooms.decodeTickHead(f.id, state, vals, previousTickHead)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		var passes []Admission
		keep := func(res TickResult) TickResult {
			passes = append(passes, res.New...)
			return res
		}
		// v1 first, on the room as it leaves it.
		f.shift(t, 200)
		keep(v1())
		before := keep(f.tick(t))
		f.shift(t, 60_000)
		capped := keep(f.tick(t))
		if n := capped.Admitted - before.Admitted; n > 2*rate {
			t.Fatalf("v2 after a stall let in %d, want at most %d", n, 2*rate)
		}
		res := keep(v1())
		if most := rate * (res.Now - capped.Now) / 1000; res.Admitted-capped.Admitted > most {
			t.Fatalf("v1 right after v2 let in %d, want at most %d: it paid back what v2 capped", res.Admitted-capped.Admitted, most)
		}
		// A stall v1 pays back in full, as it always did, up to the stock.
		f.shift(t, 60_000)
		res = keep(v1())
		if res.Admitted != stock || res.Live != stock {
			t.Fatalf("v1 after a stall: %+v, want the stock (%d) admitted and live, no more", res, stock)
		}
		res = keep(f.tick(t))
		if res.State != "open" || res.Admitted != stock || len(res.New) != 0 {
			t.Fatalf("v2 after v1: %+v", res)
		}
		for i, a := range passes {
			if a.Pass.ID != int64(i+1) || a.Pass.User != "u"+strconv.Itoa(i+1) {
				t.Fatalf("pass %d went to %s with id %d, want id %d to u%d", i, a.Pass.User, a.Pass.ID, i+1, i+1)
			}
		}
	})
}
