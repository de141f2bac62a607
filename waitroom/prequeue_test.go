package waitroom

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

func TestPrequeueOrder(t *testing.T) {
	t.Parallel()
	seed := []byte("a seed of thirty-two bytes .....")
	users := []string{"u3", "u1", "u2", "alice", "bob", "u10"}
	got := PrequeueOrder(seed, users)
	if !slices.Equal(users, []string{"u3", "u1", "u2", "alice", "bob", "u10"}) {
		t.Fatal("PrequeueOrder modified its input")
	}
	// The documented recipe: sort the users by the hex of
	// sha256(seed || user id).
	want := slices.Clone(users)
	key := func(u string) string {
		h := sha256.Sum256(append(slices.Clone(seed), u...))
		return hex.EncodeToString(h[:])
	}
	sort.Slice(want, func(i, j int) bool { return key(want[i]) < key(want[j]) })
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	// Any order of the join list gives the same result.
	rev := slices.Clone(users)
	slices.Reverse(rev)
	if again := PrequeueOrder(seed, rev); !slices.Equal(again, got) {
		t.Fatalf("order of a reversed join list %v, want %v", again, got)
	}
	if other := PrequeueOrder([]byte("another seed of thirty-two bytes"), users); slices.Equal(other, got) {
		t.Logf("two seeds gave one order (possible, 1 in 720): %v", other)
	}
	if h := sha256.Sum256(seed); SeedSHA256(seed) != hex.EncodeToString(h[:]) {
		t.Fatal("SeedSHA256 is not the hex SHA-256 of the seed")
	}
}

func TestPrequeueSettings(t *testing.T) {
	t.Parallel()
	now := time.Now()
	seed := make([]byte, 32)
	for _, tc := range []struct {
		name string
		s    Settings
		ok   bool
	}{
		{"none", Settings{}, true},
		{"good", Settings{OpensAt: now, PrequeueFrom: now.Add(-time.Minute), Seed: seed}, true},
		{"no seed", Settings{OpensAt: now, PrequeueFrom: now.Add(-time.Minute)}, false},
		{"short seed", Settings{OpensAt: now, PrequeueFrom: now.Add(-time.Minute), Seed: seed[:MinSeedLen-1]}, false},
		{"at the opening", Settings{OpensAt: now, PrequeueFrom: now, Seed: seed}, false},
		{"after the opening", Settings{OpensAt: now, PrequeueFrom: now.Add(time.Second), Seed: seed}, false},
	} {
		if err := tc.s.withDefaults().validate(); (err == nil) != tc.ok {
			t.Errorf("%s: validate = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// silentFor records user's last check-in d before Redis's present.
func (f fixture) silentFor(t *testing.T, user string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	tm, err := f.c.Do(ctx, f.c.B().Time().Build()).AsIntSlice()
	if err != nil {
		t.Fatal(err)
	}
	f.setSeen(t, user, tm[0]*1000+tm[1]/1000-d.Milliseconds())
}

// openPrequeue opens the room with a prequeue collecting since a minute ago
// and an opening an hour ahead (startAdmission brings it to the present),
// and returns its seed.
func (f fixture) openPrequeue(t *testing.T, s Settings) []byte {
	t.Helper()
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	s.OpensAt, s.PrequeueFrom, s.Seed = later, time.Now().Add(-time.Minute), seed
	f.open(t, s)
	return seed
}

func TestPrequeueShuffle(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 1000)
		ctx := context.Background()
		seed := f.openPrequeue(t, Settings{AdmitPerSecond: 1})
		// The join list, in a known order of joining.
		users := make([]string, 40)
		for i := range users {
			users[i] = "u" + strconv.Itoa(i+1)
			st, err := f.rooms.Join(ctx, f.id, users[i])
			if err != nil || st.Status != StatusPrequeue || st.Place != 0 || st.Position != 0 ||
				!st.ShuffleAt.Equal(later.Truncate(time.Millisecond)) {
				t.Fatalf("join of %s during the prequeue: %+v, %v; want prequeue, shuffle at %v", users[i], st, err, later)
			}
		}
		if st, err := f.rooms.Join(ctx, f.id, users[0]); err != nil || st.Status != StatusPrequeue {
			t.Fatalf("joining again during the prequeue: %+v, %v", st, err)
		}
		if st, err := f.rooms.Status(ctx, f.id, users[5], true); err != nil || st.Status != StatusPrequeue {
			t.Fatalf("status during the prequeue: %+v, %v", st, err)
		}
		if _, err := f.rooms.Prequeue(ctx, f.id, 0, 10); !errors.Is(err, ErrNotShuffled) {
			t.Fatalf("audit list before the shuffle: %v, want ErrNotShuffled", err)
		}
		// Ticks before the opening shuffle nothing.
		if res, err := f.rooms.Tick(ctx, f.id); err != nil || res.Admitted != 0 {
			t.Fatalf("tick before the opening: %+v, %v", res, err)
		}
		if cn, err := f.rooms.Counts(ctx, f.id); err != nil || cn.Prequeue != 40 || cn.Joined != 0 || cn.Waiting != 40 {
			t.Fatalf("counts before the shuffle: %+v, %v", cn, err)
		}

		f.startAdmission(t)
		res, err := f.rooms.Tick(ctx, f.id)
		if err != nil {
			t.Fatal(err)
		}
		// Recompute the order from the revealed seed and the join list.
		order := PrequeueOrder(seed, users)
		if slices.Equal(order, users) {
			t.Fatal("the shuffle kept the order of joining")
		}
		for i, u := range order {
			st, err := f.rooms.Status(ctx, f.id, u, true)
			switch {
			case err != nil:
				t.Fatal(err)
			case st.Status == StatusWaiting && st.Place == int64(i+1):
			case st.Status == StatusAdmitted && int64(i) < res.Admitted:
			default:
				t.Fatalf("%s, %d. in the seed's order: %+v (admitted %d)", u, i+1, st, res.Admitted)
			}
		}
		list, err := f.rooms.Prequeue(ctx, f.id, 0, 100)
		if err != nil || list.Total != 40 || !slices.Equal(list.Users, order) {
			t.Fatalf("audit list %+v, %v; want %v", list, err, order)
		}
		if page, err := f.rooms.Prequeue(ctx, f.id, 35, 10); err != nil || !slices.Equal(page.Users, order[35:]) {
			t.Fatalf("audit page from 35: %+v, %v", page, err)
		}
		// Joins after the shuffle take places after it, in order of joining.
		for i, u := range []string{"late1", "late2"} {
			st, err := f.rooms.Join(ctx, f.id, u)
			if err != nil || st.Status != StatusWaiting || st.Place != int64(41+i) {
				t.Fatalf("%s joining after the shuffle: %+v, %v; want place %d", u, st, err, 41+i)
			}
		}
		if st, err := f.rooms.Join(ctx, f.id, order[39]); err != nil || st.Status != StatusWaiting || st.Place != 40 {
			t.Fatalf("the last of the shuffle joining again: %+v, %v; want place 40", st, err)
		}
		// Admission follows the shuffled places, then the later joins.
		if err := f.c.Do(ctx, f.c.B().Hset().Key(f.rooms.Keys(f.id).Meta()).FieldValue().
			FieldValue(f.rateField(t), "1000").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		f.admitUntil(t, 42)
		for i, u := range append(order, "late1", "late2") {
			st, err := f.rooms.Status(ctx, f.id, u, false)
			if err != nil || st.Status != StatusAdmitted || st.Pass.ID != int64(i+1) {
				t.Fatalf("%s (place %d): %+v, %v; want pass %d", u, i+1, st, err, i+1)
			}
		}
	})
}

func TestPrequeueBeforeItsWindow(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 10)
		ctx := context.Background()
		f.open(t, Settings{OpensAt: later, PrequeueFrom: later.Add(-time.Minute), Seed: make([]byte, 32)})
		_, err := f.rooms.Join(ctx, f.id, "early")
		if !errors.Is(err, ErrNotStarted) || !errors.Is(err, claim.ErrNotStarted) {
			t.Fatalf("join before the prequeue opens: %v, want ErrNotStarted", err)
		}
		if cn, err := f.rooms.Counts(ctx, f.id); err != nil || cn.Prequeue != 0 || cn.Joined != 0 {
			t.Fatalf("counts after a refused join: %+v, %v", cn, err)
		}
		if _, err := f.rooms.Prequeue(ctx, f.id, 0, 1); !errors.Is(err, ErrNotShuffled) {
			t.Fatalf("audit list: %v, want ErrNotShuffled", err)
		}
		plain := setup(t, tp, 10)
		plain.open(t, Settings{OpensAt: later})
		if _, err := plain.rooms.Prequeue(ctx, plain.id, 0, 1); !errors.Is(err, ErrNoPrequeue) {
			t.Fatalf("audit list of a room without a prequeue: %v, want ErrNoPrequeue", err)
		}
		if _, err := plain.rooms.Prequeue(ctx, "missing", 0, 1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("audit list of a missing room: %v, want ErrNotFound", err)
		}
	})
}

// TestPrequeueShufflesOnce: two Rooms instances tick at once, in small
// chunks, while users keep joining: every place 1..N goes to exactly one
// user, the prequeue's users hold 1..(its size) in the seed's order, and
// everyone who joined after the seal holds a later place.
func TestPrequeueShufflesOnce(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 1000)
		ctx := context.Background()
		seed := f.openPrequeue(t, Settings{AdmitPerSecond: 1})
		f.join(t, 60)
		f.startAdmission(t)
		var wg sync.WaitGroup
		for range 2 {
			rooms, err := New(tp.Client(t), Config{Prefix: f.prefix, Keys: testKeys, TickBatch: 7})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				wg.Go(func() {
					for range 5 {
						if _, err := rooms.Tick(ctx, f.id); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
		}
		wg.Go(func() {
			for i := range 30 {
				if _, err := f.rooms.Join(ctx, f.id, "c"+strconv.Itoa(i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
		wg.Wait()
		if t.Failed() {
			return
		}
		k := f.rooms.Keys(f.id)
		members, err := f.c.Do(ctx, f.c.B().Smembers().Key(k.Prequeue()).Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		places := f.placesOf(t)
		admitted, err := f.c.Do(ctx, f.c.B().Hgetall().Key(k.Admitted()).Build()).AsStrMap()
		if err != nil {
			t.Fatal(err)
		}
		order := PrequeueOrder(seed, members)
		n := len(order)
		if n < 60 {
			t.Fatalf("prequeue of %d users, want at least the 60 who joined before the opening", n)
		}
		owner := map[int64]string{}
		for u, v := range places {
			if prev, dup := owner[v]; dup {
				t.Fatalf("place %d held by %s and %s", v, prev, u)
			}
			owner[v] = u
		}
		for i, u := range order {
			if _, in := admitted[u]; in {
				continue // admitted: its place was passed
			}
			if owner[int64(i+1)] != u {
				t.Fatalf("place %d: %q, want %s (the seed's order)", i+1, owner[int64(i+1)], u)
			}
		}
		for i := range 30 {
			u := "c" + strconv.Itoa(i)
			if slices.Contains(members, u) {
				continue
			}
			if v := places[u]; v <= int64(n) {
				if _, in := admitted[u]; !in {
					t.Fatalf("%s joined after the seal: place %d, want after %d", u, v, n)
				}
			}
		}
		if total := len(places) + len(admitted); total != n+30-(len(members)-60) {
			t.Fatalf("%d users placed or admitted, want %d", total, n+30-(len(members)-60))
		}
		list, err := f.rooms.Prequeue(ctx, f.id, 0, 1000)
		if err != nil || !slices.Equal(list.Users, order) {
			t.Fatalf("audit list %v, %v; want %v once each", list.Users, err, order)
		}
	})
}

// TestAbandonAfterIsPerRoom: a user last seen 30 s ago (Redis time) has
// abandoned a room with a 10 s abandonment time, and is still waiting in
// one with the default 120 s, until the room's setting is changed.
func TestAbandonAfterIsPerRoom(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		ctx := context.Background()
		short := setup(t, tp, 100)
		short.open(t, Settings{AdmitPerSecond: 1, AbandonAfter: 10 * time.Second, OpensAt: later})
		long := setup(t, tp, 100)
		long.open(t, Settings{AdmitPerSecond: 1, OpensAt: later})
		for _, f := range []fixture{short, long} {
			f.join(t, 3)
			f.silentFor(t, "u1", 30*time.Second)
		}
		if st, err := short.rooms.Status(ctx, short.id, "u1", false); err != nil || st.Status != StatusAbandoned {
			t.Fatalf("u1 in the 10 s room: %+v, %v; want abandoned", st, err)
		}
		if st, err := long.rooms.Status(ctx, long.id, "u1", false); err != nil || st.Status != StatusWaiting {
			t.Fatalf("u1 in the 120 s room: %+v, %v; want waiting", st, err)
		}
		short.startAdmission(t)
		res, _ := short.admitUntil(t, 1)
		if res.New[0].Pass.User != "u2" || res.Skipped != 1 {
			t.Fatalf("first admission in the 10 s room: %+v; want u2 with u1 skipped", res)
		}
		// Opening the room again changes its abandonment time.
		long.open(t, Settings{AdmitPerSecond: 1, AbandonAfter: 10 * time.Second, OpensAt: later})
		if st, err := long.rooms.Status(ctx, long.id, "u1", false); err != nil || st.Status != StatusAbandoned {
			t.Fatalf("u1 once the room's time is 10 s: %+v, %v; want abandoned", st, err)
		}
	})
}

// TestPrequeueAbandonment: a prequeue user who stops checking in has
// abandoned; joining again during the prequeue is collected again, and the
// user keeps the one entry of the join list.
func TestPrequeueAbandonment(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 100)
		ctx := context.Background()
		f.openPrequeue(t, Settings{AbandonAfter: 10 * time.Second})
		f.join(t, 2)
		f.silentFor(t, "u1", 30*time.Second)
		if st, err := f.rooms.Status(ctx, f.id, "u1", true); err != nil || st.Status != StatusAbandoned {
			t.Fatalf("u1 silent for 30 s: %+v, %v; want abandoned", st, err)
		}
		if st, err := f.rooms.Join(ctx, f.id, "u1"); err != nil || st.Status != StatusPrequeue {
			t.Fatalf("u1 joining again: %+v, %v; want prequeue", st, err)
		}
		if cn, err := f.rooms.Counts(ctx, f.id); err != nil || cn.Prequeue != 2 {
			t.Fatalf("counts: %+v, %v; want 2 in the prequeue", cn, err)
		}
	})
}
