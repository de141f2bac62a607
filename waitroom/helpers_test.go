package waitroom

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// testKeys are signing keys for tests.
var testKeys = []Key{{ID: "k1", Secret: bytes.Repeat([]byte{7}, MinSecretLen)}}

// fixture is one test's promotion with a waiting room on one topology.
type fixture struct {
	c      rueidis.Client
	tp     redistest.Topology
	prefix string
	id     string
	gate   *claim.Gate
	rooms  *Rooms
}

// setup opens promotion "p" with stock units in the claim gate (open from
// an hour ago for a day) and Rooms on the same prefix.
func setup(t testing.TB, tp redistest.Topology, stock int64) fixture {
	t.Helper()
	return setupLimit(t, tp, stock, 1, claim.LayoutDefault)
}

// setupLimit is setup with the promotion's per-user limit and the claim
// gate's layout.
func setupLimit(t testing.TB, tp redistest.Topology, stock int64, limit int, layout claim.Layout) fixture {
	t.Helper()
	c := tp.Client(t)
	p := redistest.Prefix(t)
	g, err := claim.New(c, claim.Config{Prefix: p, Layout: layout})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := g.Open(context.Background(), claim.Promotion{
		ID: "p", Stock: stock, PerUserLimit: limit,
		StartsAt: now.Add(-time.Hour), EndsAt: now.Add(24 * time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	rooms, err := New(c, Config{Prefix: p, Keys: testKeys, Layout: layoutOf(tp)})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{c: c, tp: tp, prefix: p, id: "p", gate: g, rooms: rooms}
}

// open creates the room with s.
func (f fixture) open(t testing.TB, s Settings) {
	t.Helper()
	if _, err := f.rooms.Open(context.Background(), f.id, s); err != nil {
		t.Fatal(err)
	}
}

// known is a Config.Known that lists the fixture's room, with no start or
// end known.
func (f fixture) known() []Known { return []Known{{ID: f.id}} }

// join joins users u1..un in order and returns their ids.
func (f fixture) join(t *testing.T, n int) []string {
	t.Helper()
	users := make([]string, n)
	for i := range users {
		users[i] = "u" + strconv.Itoa(i+1)
		if _, err := f.rooms.Join(context.Background(), f.id, users[i]); err != nil {
			t.Fatal(err)
		}
	}
	return users
}

// startAdmission moves the opening of a room opened with a far OpensAt to
// Redis's present, once its users have joined, and returns it (ms).
func (f fixture) startAdmission(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	tm, err := f.c.Do(ctx, f.c.B().Time().Build()).AsIntSlice()
	if err != nil {
		t.Fatal(err)
	}
	now := tm[0]*1000 + tm[1]/1000
	if err := f.c.Do(ctx, f.c.B().Hset().Key(f.rooms.Keys(f.id).Meta()).FieldValue().
		FieldValue("open_ms", strconv.FormatInt(now, 10)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	return now
}

// later is an opening far enough ahead that nobody is let in before
// startAdmission.
var later = time.Now().Add(time.Hour)

// admitUntil ticks until n users are admitted in total and returns the
// last tick and the tokens handed out on the way, by user.
func (f fixture) admitUntil(t *testing.T, n int64) (TickResult, map[string]string) {
	t.Helper()
	tokens := map[string]string{}
	var res TickResult
	wait.For(t, 5*time.Second, strconv.FormatInt(n, 10)+" admitted", func() bool {
		var err error
		if res, err = f.rooms.Tick(context.Background(), f.id); err != nil {
			t.Fatal(err)
		}
		for _, a := range res.New {
			tokens[a.Pass.User] = a.Token
		}
		return res.Admitted >= n
	})
	return res, tokens
}

// eachTopology runs f on the single node and on the Cluster, with rooms
// opened in LayoutCompact, and on the single node with rooms opened in
// LayoutClassic (see classic), in parallel.
func eachTopology(t *testing.T, f func(t *testing.T, tp redistest.Topology)) {
	t.Helper()
	tps := redistest.Topologies(t)
	for _, tp := range append(tps, classic(tps[0])) {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			f(t, tp)
		})
	}
}
