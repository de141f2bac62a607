package promotion_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/waitroom"
)

func ptr[T any](v T) *T { return &v }

// TestPatchRaiseUnderLoad raises the stock from 1,000 to 1,500 while 3,000
// users claim through three instances: exactly 1,500 accepted, ranks
// 1..1,500 unique, and every accepted claim issued.
func TestPatchRaiseUnderLoad(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ topology, db string }{{"single", "sqlite"}, {"cluster", "postgres"}} {
		t.Run(tc.topology+"/"+tc.db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.topology, tc.db)
			ms := []*promotion.Manager{w.manager(t, "a", nil), w.manager(t, "b", nil), w.manager(t, "c", nil)}
			create(t, ms[0], promotion.Promotion{ID: "raise", Stock: 1000})
			ctx := context.Background()
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				ranks    = map[int64]bool{}
				answered atomic.Int64
				raised   = make(chan struct{})
			)
			const users = 3000
			work := make(chan int)
			for g := range 48 {
				wg.Go(func() {
					for i := range work {
						res, err := ms[(i+g)%3].Claim(ctx, "raise", fmt.Sprintf("u%d", i), "")
						if n := answered.Add(1); n == users/4 {
							close(raised) // the raise goes out a quarter of the way in
						}
						if err != nil {
							if !errors.Is(err, claim.ErrSoldOut) {
								t.Errorf("claim: %v", err)
							}
							continue
						}
						mu.Lock()
						if ranks[res.Rank] {
							t.Errorf("rank %d twice", res.Rank)
						}
						ranks[res.Rank] = true
						mu.Unlock()
					}
				})
			}
			var patched sync.WaitGroup
			done := make(chan struct{})
			patched.Go(func() {
				defer close(done)
				<-raised
				if _, err := ms[1].Patch(ctx, "raise", promotion.Change{Stock: ptr(int64(1500))}); err != nil {
					t.Errorf("raise: %v", err)
				}
				// The other instances learn of the raise by a hint; the last
				// third goes out once none answers from a stale sold-out
				// memory (or the raised stock is taken already).
				if !wait.Until(30*time.Second, func() bool {
					mu.Lock()
					full := len(ranks) >= 1500
					mu.Unlock()
					for _, m := range ms {
						if promotion.Remembers(m, "raise") != "" && !full {
							return false
						}
					}
					return true
				}) {
					t.Errorf("an instance still answers the raised promotion sold out from memory")
				}
			})
			for i := range users {
				if i == users*2/3 {
					// Claims go on while the raise is made; the last third
					// is sent once it is made, so the run cannot end (every
					// late claim answered sold out, from memory in no time)
					// before the raise lands.
					<-done
				}
				work <- i
			}
			close(work)
			wg.Wait()
			patched.Wait()
			if len(ranks) != 1500 {
				t.Fatalf("accepted %d, want 1,500", len(ranks))
			}
			for r := int64(1); r <= 1500; r++ {
				if !ranks[r] {
					t.Fatalf("rank %d missing", r)
				}
			}
			v := waitCounts(t, ms[2], "raise", 1500, 0)
			if v.Stock != 1500 || v.State != promotion.StateSoldOut {
				t.Fatalf("after the run: stock %d, state %s", v.Stock, v.State)
			}
		})
	}
}

// TestPatchLowerAndPause: a lower stock below what is accepted is refused
// with nothing changed in the database or Redis; one above works. A pause
// stops the next claim on every instance, a resume restores them; an end
// moved earlier ends the promotion and one moved later reopens it.
func TestPatchLowerAndPause(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	ms := []*promotion.Manager{w.manager(t, "a", nil), w.manager(t, "b", nil), w.manager(t, "c", nil)}
	create(t, ms[0], promotion.Promotion{ID: "low", Stock: 10})
	ctx := context.Background()
	for i := range 5 {
		if _, err := ms[i%3].Claim(ctx, "low", fmt.Sprintf("u%d", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ms[0].Patch(ctx, "low", promotion.Change{Stock: ptr(int64(4)), Name: ptr("renamed")}); !errors.Is(err, promotion.ErrStockBelowAccepted) {
		t.Fatalf("lower below accepted: %v", err)
	}
	v, err := ms[1].Get(ctx, "low")
	if err != nil || v.Stock != 10 || v.Name == "renamed" || *v.Counts.Remaining != 5 {
		t.Fatalf("after a refused lower: %+v, %v", v, err)
	}
	if st, _ := ms[0].Gate().State(ctx, "low"); st.Stock != 10 {
		t.Fatalf("Redis stock after a refused lower: %d", st.Stock)
	}
	if v, err = ms[0].Patch(ctx, "low", promotion.Change{Stock: ptr(int64(6))}); err != nil || v.Stock != 6 || *v.Counts.Remaining != 1 {
		t.Fatalf("lower above accepted: %+v, %v", v, err)
	}

	if _, err := ms[2].Patch(ctx, "low", promotion.Change{Paused: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if _, err := m.Claim(ctx, "low", fmt.Sprintf("p%d", i), ""); !errors.Is(err, promotion.ErrPaused) {
			t.Fatalf("claim on instance %d after the pause: %v, want ErrPaused", i, err)
		}
	}
	if v, err = ms[0].Patch(ctx, "low", promotion.Change{Paused: ptr(false)}); err != nil || v.Paused {
		t.Fatalf("resume: %+v, %v", v, err)
	}
	if _, err := ms[1].Claim(ctx, "low", "p1", ""); err != nil {
		t.Fatalf("claim after the resume: %v", err)
	}

	now := time.Now()
	// Started at its creation: move the end to before the start (refused),
	// then to just after it, over already.
	v, _ = ms[0].Get(ctx, "low")
	if _, err := ms[0].Patch(ctx, "low", promotion.Change{EndsAt: ptr(v.StartsAt.Add(-time.Second))}); err == nil {
		t.Fatal("an end before the start was taken")
	}
	end := v.StartsAt.Add(time.Millisecond)
	if end.Before(now) {
		if _, err := ms[0].Patch(ctx, "low", promotion.Change{EndsAt: &end}); err != nil {
			t.Fatal(err)
		}
		for i, m := range ms {
			if _, err := m.Claim(ctx, "low", fmt.Sprintf("e%d", i), ""); !errors.Is(err, promotion.ErrEnded) {
				t.Fatalf("claim on instance %d after an earlier end: %v", i, err)
			}
		}
		// Ended by Redis itself (the drain check closes it), then reopened.
		if ended, _, err := ms[0].Gate().Ended(ctx, "low"); err != nil || !ended {
			t.Fatalf("Ended: %v %v", ended, err)
		}
	}
	if _, err := ms[0].Patch(ctx, "low", promotion.Change{EndsAt: ptr(now.Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	if _, err := ms[2].Claim(ctx, "low", "e2", ""); !errors.Is(err, promotion.ErrSoldOut) {
		t.Fatalf("claim after a later end: %v, want sold out (6 of 6 taken)", err)
	}
	if _, err := ms[0].Close(ctx, "low"); err != nil {
		t.Fatal(err)
	}
	if _, err := ms[0].Patch(ctx, "low", promotion.Change{EndsAt: ptr(now.Add(2 * time.Hour)), Stock: ptr(int64(20))}); err != nil {
		t.Fatal(err)
	}
	if _, err := ms[1].Claim(ctx, "low", "x", ""); !errors.Is(err, promotion.ErrEnded) {
		t.Fatalf("claim on a closed promotion after a later end: %v", err)
	}
}

// TestRevoke revokes issued claims: a coupon shows revoked, points are
// debited once however often the revoke is repeated, and with
// revoke_returns_stock the unit is claimable again, without it not.
func TestRevoke(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", db)
			m := w.manager(t, "a", nil)
			ctx := context.Background()
			create(t, m, promotion.Promotion{ID: "cp", Stock: 2})
			create(t, m, promotion.Promotion{ID: "pt", Stock: 2, Kind: promotion.KindPoint, Value: 30, RevokeReturnsStock: true})
			for _, id := range []string{"cp", "pt"} {
				for _, u := range []string{"a", "b"} {
					if _, err := m.Claim(ctx, id, u, ""); err != nil {
						t.Fatal(err)
					}
				}
				waitCounts(t, m, id, 2, 0)
			}
			res, err := m.Revoke(ctx, "cp", []string{"cp#1", "cp#9", "pt#1"})
			if err != nil || res.Revoked != 1 || len(res.Skipped) != 2 {
				t.Fatalf("revoke coupon: %+v, %v", res, err)
			}
			cs, err := m.UserClaims(ctx, "cp", "a")
			if err != nil || len(cs) != 1 || cs[0].Status != promotion.StatusRevoked || cs[0].Grant.Code != "" {
				t.Fatalf("revoked coupon claim: %+v, %v", cs, err)
			}
			if _, err := m.Claim(ctx, "cp", "c", ""); !errors.Is(err, promotion.ErrSoldOut) {
				t.Fatalf("claim after a revoke without return: %v", err)
			}
			for range 3 {
				if _, err := m.Revoke(ctx, "pt", []string{"pt#2"}); err != nil {
					t.Fatal(err)
				}
			}
			if b, err := w.st.Balance(ctx, "b"); err != nil || b.Points != 0 {
				t.Fatalf("balance of b after the revokes: %+v, %v", b, err)
			}
			if b, _ := w.st.Balance(ctx, "a"); b.Points != 30 {
				t.Fatalf("balance of a: %+v", b)
			}
			if _, err := m.Claim(ctx, "pt", "c", ""); err != nil {
				t.Fatalf("claim after a revoke with return: %v", err)
			}
			if _, err := m.Claim(ctx, "pt", "d", ""); !errors.Is(err, promotion.ErrSoldOut) {
				t.Fatalf("second claim after one unit returned: %v", err)
			}
			v := waitCounts(t, m, "pt", 2, 0)
			if v.Counts.Revoked != 1 || *v.Counts.Remaining != 0 {
				t.Fatalf("counts after the revoke: %+v", v.Counts)
			}
			// The revokes' events, one per claim, and a change's, once
			// however often it is applied.
			for range 2 {
				if _, err := m.Patch(ctx, "cp", promotion.Change{Paused: ptr(true)}); err != nil {
					t.Fatal(err)
				}
			}
			evs, err := w.st.Events(ctx, 0, []string{store.EventClaimRevoked, store.EventPromotionChanged}, 10)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range evs {
				got = append(got, e.Type+" "+e.ClaimID+e.PromotionID)
			}
			if want := []string{"claim.revoked cp#1cp", "claim.revoked pt#2pt", "promotion.changed cp"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("events %q, want %q", got, want)
			}
		})
	}
}

// TestPatchRaiseReopensRoom: a sold-out promotion with a waiting room lets
// nobody else in; raising its stock resumes admission.
func TestPatchRaiseReopensRoom(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	var ahead atomic.Int64
	m := roomManager(t, w, &ahead)
	rooms := m.Rooms()
	ctx := context.Background()
	create(t, m, promotion.Promotion{ID: "room", Stock: 1,
		WaitingRoom: promotion.WaitingRoom{Enabled: true, AdmitPerSecond: 1000, EntryTTLSeconds: 60}})
	for _, u := range []string{"u1", "u2", "u3"} {
		if _, err := rooms.Join(ctx, "room", u); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := rooms.Tick(ctx, "room"); err != nil || res.Admitted != 1 {
		t.Fatalf("first tick: %+v, %v", res, err)
	}
	st, err := rooms.Status(ctx, "room", "u1", false)
	if err != nil || st.Token == "" {
		t.Fatalf("u1's standing: %+v, %v", st, err)
	}
	if _, err := m.ClaimWithToken(ctx, "room", "u1", "", st.Token); err != nil {
		t.Fatal(err)
	}
	if res, err := rooms.Tick(ctx, "room"); err != nil || res.Admitted != 1 || res.State != "sold_out" {
		t.Fatalf("tick when sold out: %+v, %v", res, err)
	}
	if _, err := m.Patch(ctx, "room", promotion.Change{Stock: ptr(int64(3))}); err != nil {
		t.Fatal(err)
	}
	res, err := rooms.Tick(ctx, "room")
	if err != nil || res.Admitted != 3 || res.State != "open" {
		t.Fatalf("tick after the raise: %+v, %v", res, err)
	}
}

// TestPatchRoomLevers: a PATCH changes the waiting room's levers in the
// database and in Redis at once (the rate re-based, not counted from the
// opening), names them in the change, refuses values out of bounds and
// promotions without a waiting room, and this instance's join path knows
// the new difficulty.
func TestPatchRoomLevers(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "cluster", "postgres")
	var ahead atomic.Int64
	m := roomManager(t, w, &ahead)
	ctx := context.Background()
	create(t, m, promotion.Promotion{ID: "room", Stock: 10, StartsAt: time.Now().Add(-time.Hour),
		WaitingRoom: promotion.WaitingRoom{Enabled: true, AdmitPerSecond: 10, MaxActive: 4}})
	create(t, m, promotion.Promotion{ID: "plain", Stock: 10})
	meta := func() map[string]string {
		t.Helper()
		got, err := w.client.Do(ctx, w.client.B().Hgetall().Key(waitroom.KeysFor(w.prefix, "room").Meta()).Build()).AsStrMap()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// The rate's field: rate2 in a room of the compact layout, rate in a
	// classic one.
	rate := func(m map[string]string) string {
		if m["layout"] == "2" {
			return m["rate2"]
		}
		return m["rate"]
	}
	before := meta()
	if before["max_active"] != "4" || rate(before) != "10" {
		t.Fatalf("room created with %v", before)
	}
	v, changed, err := m.PatchChanged(ctx, "room", promotion.Change{WaitingRoom: &promotion.RoomChange{
		AdmitPerSecond: ptr(500), MaxActive: ptr(0), Message: ptr("Ten left"), PowDifficulty: ptr(12)}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"waiting_room.admit_per_second", "waiting_room.max_active", "waiting_room.message", "waiting_room.pow_difficulty"}
	if r := v.WaitingRoom; fmt.Sprint(changed) != fmt.Sprint(want) || r.AdmitPerSecond != 500 || r.MaxActive != 0 ||
		r.Message != "Ten left" || r.PowDifficulty != 12 {
		t.Fatalf("changed %v, room %+v", changed, v.WaitingRoom)
	}
	after := meta()
	if rate(after) != "500" || after["msg"] != "Ten left" || after["pow"] != "12" || after["max_active"] != "" {
		t.Fatalf("room meta after the change: %v", after)
	}
	// An hour at 10/s is 36,000 users' worth: at 500/s the opening moves
	// to 72 s ago, not an hour.
	open0, _ := strconv.ParseInt(before["open_ms"], 10, 64)
	open1, _ := strconv.ParseInt(after["open_ms"], 10, 64)
	if ago := time.Since(time.UnixMilli(open1)); open1 <= open0 || ago < 71*time.Second || ago > 80*time.Second {
		t.Fatalf("open_ms %d → %d (%s ago), want about 72 s ago", open0, open1, ago)
	}
	if d := m.RoomPowDifficulty("room"); d != 12 {
		t.Fatalf("the difficulty known here: %d, want 12", d)
	}
	if got, err := m.Get(ctx, "room"); err != nil || got.WaitingRoom.Message != "Ten left" {
		t.Fatalf("read back: %+v, %v", got.WaitingRoom, err)
	}
	for _, c := range []struct {
		id    string
		room  promotion.RoomChange
		field string
	}{
		{"plain", promotion.RoomChange{Message: ptr("hi")}, "waiting_room"},
		{"room", promotion.RoomChange{AdmitPerSecond: ptr(0)}, "waiting_room.admit_per_second"},
		{"room", promotion.RoomChange{MaxActive: ptr(-1)}, "waiting_room.max_active"},
		{"room", promotion.RoomChange{PowDifficulty: ptr(promotion.MaxPowDifficulty + 1)}, "waiting_room.pow_difficulty"},
		{"room", promotion.RoomChange{Message: ptr(strings.Repeat("x", promotion.MaxRoomMessageLen+1))}, "waiting_room.message"},
	} {
		var ve *promotion.ValidationError
		if _, err := m.Patch(ctx, c.id, promotion.Change{WaitingRoom: &c.room}); !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("PATCH %s %+v: %v, want a validation error of %s", c.id, c.room, err, c.field)
		}
	}
	if got := meta(); rate(got) != "500" || got["msg"] != "Ten left" {
		t.Fatalf("refused changes changed the room: %v", got)
	}
}
