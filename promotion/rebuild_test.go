package promotion_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/pgtest"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// rbEnv is one manager over real Redis and a real database, with the
// reports of its successful rebuilds.
type rbEnv struct {
	client  rueidis.Client
	st      store.Store
	url     string // the database's URL ("" if shared with another rbEnv)
	prefix  string
	m       *promotion.Manager
	rebuilt chan promotion.RebuildReport
}

// rbSetup starts a manager on client (the shared single node if nil) and a
// fresh database of kind db.
func rbSetup(t *testing.T, db string, client rueidis.Client) *rbEnv {
	t.Helper()
	return rbSetupWith(t, rbOpts{db: db, client: client})
}

// rbOpts shape an rbEnv: by default a fresh database of kind db, the shared
// single node, instance "rb" and a re-check every 50 ms.
type rbOpts struct {
	db       string
	client   rueidis.Client
	st       store.Store // shared with another rbEnv if set (then prefix too)
	prefix   string
	instance string
	recheck  time.Duration
	onHalted func(id string, halted bool)
}

func rbSetupWith(t *testing.T, o rbOpts) *rbEnv {
	t.Helper()
	if o.client == nil {
		o.client = redistest.Client(t)
	}
	ctx := context.Background()
	st, url := o.st, ""
	if st == nil {
		url = "sqlite://" + filepath.Join(t.TempDir(), "dibs.db")
		if o.db == "postgres" {
			url = pgtest.URL(t)
		}
		var err error
		if st, err = store.Open(ctx, url); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if o.prefix == "" {
		o.prefix = redistest.Prefix(t)
	}
	if o.instance == "" {
		o.instance = "rb"
	}
	if o.recheck == 0 {
		o.recheck = 50 * time.Millisecond
	}
	client := o.client
	e := &rbEnv{client: client, st: st, url: url, prefix: o.prefix, rebuilt: make(chan promotion.RebuildReport, 16)}
	var err error
	sc := stream.DefaultConfig()
	sc.Block = 100 * time.Millisecond
	sc.PollInterval = 20 * time.Millisecond
	sc.ReclaimMinIdle = time.Second
	sc.HandlerTimeout = 400 * time.Millisecond
	sc.ReclaimInterval = 100 * time.Millisecond
	sc.LeaseTTL = 2 * time.Second
	sc.Logger = slog.New(slog.DiscardHandler)
	e.m, err = promotion.New(client, st, promotion.Config{
		Prefix: e.prefix, Instance: o.instance, Stream: sc,
		RecheckInterval: o.recheck, Logger: slog.New(slog.DiscardHandler),
		OnHalted: o.onHalted,
		OnRebuild: func(r promotion.RebuildReport) {
			if r.Err != nil && !errors.Is(r.Err, claim.ErrRebuildBusy) {
				t.Logf("rebuild of %s failed: %v", r.PromotionID, r.Err)
			}
			if r.Err == nil {
				select {
				case e.rebuilt <- r:
				default:
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.m.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return e
}

// report waits for the next successful rebuild.
func (e *rbEnv) report(t *testing.T) promotion.RebuildReport {
	t.Helper()
	select {
	case r := <-e.rebuilt:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for a rebuild")
		return promotion.RebuildReport{}
	}
}

// waitSettled waits until the database holds issued rows and failed dead
// letters as given and nothing is pending.
func (e *rbEnv) waitSettled(t *testing.T, id string, issued, failed int64) {
	t.Helper()
	wait.For(t, 30*time.Second, fmt.Sprintf("%s: %d issued, %d failed", id, issued, failed), func() bool {
		v, err := e.m.Get(context.Background(), id)
		return err == nil && v.Counts.Issued == issued && v.Counts.Failed == failed && v.Counts.Pending == 0
	})
}

// waitAcked waits until Redis shows the claims of ranks 1..n issued: the
// acknowledgements, which follow the database's commit, are all done.
func (e *rbEnv) waitAcked(t *testing.T, id string, n int) {
	t.Helper()
	k := claim.KeysFor(e.prefix, id)
	wait.For(t, 30*time.Second, fmt.Sprintf("%s: ranks 1..%d acknowledged", id, n), func() bool {
		for r := 1; r <= n; r++ {
			if !strings.HasPrefix(statusOf(t, e.client, k, fmt.Sprint(r)), "i") {
				return false
			}
		}
		return true
	})
}

// claim claims for user, waiting out a rebuild: a claim answered
// ErrRebuilding is retried after the next successful rebuild, whose report
// it returns (nil if it did not wait).
func (e *rbEnv) claim(t *testing.T, id, user string) (promotion.Claimed, *promotion.RebuildReport, error) {
	t.Helper()
	var waited *promotion.RebuildReport
	for {
		res, err := e.m.Claim(context.Background(), id, user, "")
		if !errors.Is(err, claim.ErrRebuilding) {
			return res, waited, err
		}
		rep := e.report(t)
		waited = &rep
	}
}

func (e *rbEnv) mustClaim(t *testing.T, id, user string) promotion.Claimed {
	t.Helper()
	res, _, err := e.claim(t, id, user)
	if err != nil {
		t.Fatalf("claim of %s in %s: %v", user, id, err)
	}
	return res
}

func (e *rbEnv) create(t *testing.T, p promotion.Promotion) {
	t.Helper()
	if _, err := e.m.Create(context.Background(), p); err != nil {
		t.Fatalf("create %s: %v", p.ID, err)
	}
}

// forget deletes every key of promotion id at once, as a flush of Redis
// would: one DEL (the keys share the promotion's slot), so the re-check
// cannot rebuild the promotion between two deletions and have the later
// ones take what it restored.
func (e *rbEnv) forget(t *testing.T, id string) {
	t.Helper()
	k := claim.KeysFor(e.prefix, id)
	if err := e.client.Do(context.Background(), e.client.B().Del().Key(k.State()...).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

// TestRebuildAfterRedisLostPromotion: Redis loses a promotion in the middle
// of it (FLUSHALL of the whole server, or its keys deleted). Claims after
// the loss wait for the rebuild; then no user gets a unit beyond the limit,
// ranks continue above the database's, the stock counts the rows already
// issued, and every claim is issued exactly once.
func TestRebuildAfterRedisLostPromotion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, db string
		flushAll bool
	}{
		{"sqlite/flushall", "sqlite", true},
		{"postgres/keys-deleted", "postgres", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var client rueidis.Client
			if tc.flushAll {
				srv := redistest.Fresh(t, redisserver.Options{AppendFsync: "off"})
				client = redistest.Topology{Name: "single", Addrs: []string{srv.Addr()}}.Client(t)
			}
			e := rbSetup(t, tc.db, client)
			const stock = 30
			e.create(t, promotion.Promotion{ID: "lost", Stock: stock, PerUserLimit: 2})
			for i := range 10 {
				e.mustClaim(t, "lost", fmt.Sprintf("u%d", i))
			}
			if r := e.mustClaim(t, "lost", "u0"); r.Rank != 11 || r.Slot != 2 {
				t.Fatalf("u0's second claim = %+v, want rank 11 slot 2", r)
			}
			e.waitSettled(t, "lost", 11, 0)

			if tc.flushAll {
				if err := client.Do(context.Background(), client.B().Flushall().Build()).Error(); err != nil {
					t.Fatal(err)
				}
			} else {
				e.forget(t, "lost")
			}

			// u0 holds its limit in the database: the rebuild must know.
			// (The first claim normally meets the rebuild; the re-check may
			// also have rebuilt first. Either way a rebuild ran.)
			_, rep, err := e.claim(t, "lost", "u0")
			if !errors.Is(err, claim.ErrAlreadyClaimed) {
				t.Fatalf("u0 after the loss: %v, want ErrAlreadyClaimed", err)
			}
			if rep == nil {
				r := e.report(t)
				rep = &r
			}
			if !rep.Created || rep.Floor != 11 || rep.Seq != 11 || rep.Claims != 11 || rep.Restored.Users != 11 {
				t.Fatalf("rebuild report %+v, want created, floor and seq 11, 11 claims and 11 user raises", *rep)
			}
			// u1 holds one of two: its second unit ranks above the database's max.
			if r := e.mustClaim(t, "lost", "u1"); r.Rank != 12 || r.Slot != 2 {
				t.Fatalf("u1 after the loss = %+v, want rank 12 slot 2", r)
			}
			accepted := 0
			for i := 0; ; i++ {
				res, _, err := e.claim(t, "lost", fmt.Sprintf("n%d", i))
				if errors.Is(err, claim.ErrSoldOut) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if want := int64(13 + i); res.Rank != want {
					t.Fatalf("new claim %d got rank %d, want %d", i, res.Rank, want)
				}
				accepted++
			}
			if accepted != stock-12 {
				t.Fatalf("%d new claims accepted after the loss, want %d (stock %d, 12 taken)", accepted, stock-12, stock)
			}
			e.waitSettled(t, "lost", stock, 0)
			for user, want := range map[string]int{"u0": 2, "u1": 2, "u2": 1, "n0": 1} {
				rows, err := e.st.ListIssued(context.Background(), "lost", user)
				if err != nil || len(rows) != want {
					t.Errorf("%s holds %d issued rows (%v), want %d", user, len(rows), err, want)
				}
			}
			cs, err := e.m.UserClaims(context.Background(), "lost", "u0")
			if err != nil || len(cs) != 2 || cs[0].Status != claim.StatusIssued || cs[1].Rank != 11 {
				t.Fatalf("u0's claims after the rebuild = %+v, %v", cs, err)
			}
		})
	}
}

// TestRecheckRepairsLostLastSecond simulates Redis losing its last writes
// (a crash under appendfsync everysec): the last three claims, already
// issued, vanish from the counters. The re-check sees the rank counter
// behind the database and rebuilds.
func TestRecheckRepairsLostLastSecond(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			e := rbSetup(t, db, nil)
			e.create(t, promotion.Promotion{ID: "last", Stock: 20, PerUserLimit: 1})
			for i := range 10 {
				e.mustClaim(t, "last", fmt.Sprintf("u%d", i))
			}
			e.waitSettled(t, "last", 10, 0)
			e.waitAcked(t, "last", 10)

			// One script, so the re-check never sees half of the loss.
			k := claim.KeysFor(e.prefix, "last")
			lose := forgetStatusLua + `redis.call('DECRBY', KEYS[1], 3)
redis.call('HDEL', KEYS[2], 'u7', 'u8', 'u9')
redis.call('HDEL', KEYS[3], 'u7', 'u8', 'u9')
for r = 8, 10 do forget_status(KEYS[4], KEYS[5], r) end
return 1`
			err := e.client.Do(context.Background(), e.client.B().Eval().Script(lose).Numkeys(5).
				Key(k.Seq(), k.Users(), k.ByUser(), k.Status(), k.StatusBytes()).Build()).Error()
			if err != nil {
				t.Fatal(err)
			}

			rep := e.report(t)
			if rep.PromotionID != "last" || rep.Created || rep.Floor != 10 || rep.Seq != 10 {
				t.Fatalf("report %+v, want promotion last, not created, floor and seq 10", rep)
			}
			if rep.Restored.Users != 3 || rep.Restored.Statuses != 3 || rep.Claims != 10 {
				t.Fatalf("restored %+v from %d claims, want 3 users and 3 statuses from 10", rep.Restored, rep.Claims)
			}
			if _, _, err := e.claim(t, "last", "u8"); !errors.Is(err, claim.ErrAlreadyClaimed) {
				t.Fatalf("u8 after the repair: %v, want ErrAlreadyClaimed", err)
			}
			if r := e.mustClaim(t, "last", "new"); r.Rank != 11 {
				t.Fatalf("new claim after the repair got rank %d, want 11", r.Rank)
			}
			e.waitSettled(t, "last", 11, 0)
			cs, err := e.m.UserClaims(context.Background(), "last", "u9")
			if err != nil || len(cs) != 1 || cs[0].Rank != 10 || cs[0].Status != claim.StatusIssued {
				t.Fatalf("u9's claims after the repair = %+v, %v", cs, err)
			}
		})
	}
}

// TestClaimsWaitForRebuild: while a promotion is rebuilding, claims and
// grants answer ErrRebuilding. A rebuild held by someone else is left
// alone; once its hold is given up, the manager takes the rebuild over and
// finishes it.
func TestClaimsWaitForRebuild(t *testing.T) {
	t.Parallel()
	e := rbSetup(t, "sqlite", nil)
	ctx := context.Background()
	e.create(t, promotion.Promotion{ID: "held", Stock: 10, PerUserLimit: 1})
	e.create(t, promotion.Promotion{ID: "grants", Mode: promotion.ModeGrant})
	e.mustClaim(t, "held", "u0")
	begin := func(id string) *claim.Rebuild {
		t.Helper()
		p, err := e.st.GetPromotion(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		hold, err := e.m.Gate().BeginRebuild(ctx, claim.Promotion{ID: p.ID, Grant: p.Mode == promotion.ModeGrant,
			Stock: p.Stock, PerUserLimit: p.PerUserLimit, StartsAt: p.StartsAt, EndsAt: p.EndsAt},
			"operator", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return hold
	}
	hold, ghold := begin("held"), begin("grants")
	if _, err := e.m.Claim(ctx, "held", "u1", ""); !errors.Is(err, claim.ErrRebuilding) {
		t.Fatalf("claim while rebuilding: %v, want ErrRebuilding", err)
	}
	if _, err := e.m.Grant(ctx, "grants", []string{"a"}); !errors.Is(err, claim.ErrRebuilding) {
		t.Fatalf("grant while rebuilding: %v, want ErrRebuilding", err)
	}
	if _, err := e.m.Rebuild(ctx, "held"); !errors.Is(err, claim.ErrRebuildBusy) {
		t.Fatalf("Rebuild of a held promotion: %v, want ErrRebuildBusy", err)
	}
	if err := hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ghold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		rep := e.report(t)
		if rep.Reason != "marked rebuilding with no rebuild running" {
			t.Errorf("rebuild of %s for %q, want the re-check's takeover", rep.PromotionID, rep.Reason)
		}
	}
	if r := e.mustClaim(t, "held", "u1"); r.Rank != 2 {
		t.Fatalf("claim after the takeover got rank %d, want 2", r.Rank)
	}
	if res, err := e.m.Grant(ctx, "grants", []string{"a"}); err != nil || res.Enqueued != 1 {
		t.Fatalf("grant after the takeover = %+v, %v", res, err)
	}
}

// TestRebuildOfHealthyPromotionChangesNothing: a rebuild over state that
// lost nothing writes nothing and lowers nothing.
func TestRebuildOfHealthyPromotionChangesNothing(t *testing.T) {
	t.Parallel()
	e := rbSetup(t, "sqlite", nil)
	ctx := context.Background()
	e.create(t, promotion.Promotion{ID: "ok", Stock: 10, PerUserLimit: 1})
	for i := range 5 {
		e.mustClaim(t, "ok", fmt.Sprintf("u%d", i))
	}
	e.waitSettled(t, "ok", 5, 0)
	e.waitAcked(t, "ok", 5)
	// Redis ahead of the database, as with claims not yet confirmed: the
	// counter must not come down to the database's 5.
	k := claim.KeysFor(e.prefix, "ok")
	if err := e.client.Do(ctx, e.client.B().Incrby().Key(k.Seq()).Increment(2).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	rep, err := e.m.Rebuild(ctx, "ok")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Restored != (claim.RestoreStats{}) || rep.Floor != 5 || rep.Seq != 7 || rep.Created {
		t.Fatalf("rebuild of a healthy promotion: %+v; want nothing restored, floor 5, seq kept at 7", rep)
	}
	if r := e.mustClaim(t, "ok", "next"); r.Rank != 8 {
		t.Fatalf("claim after the rebuild got rank %d, want 8", r.Rank)
	}
	if _, err := e.m.Rebuild(ctx, "missing"); !errors.Is(err, promotion.ErrNotFound) {
		t.Fatalf("Rebuild of an unknown promotion: %v, want ErrNotFound", err)
	}
}
