package promotion_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"
	_ "modernc.org/sqlite"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/pgtest"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
	_ "github.com/dibsio/dibs/store/postgres"
	_ "github.com/dibsio/dibs/store/sqlite"
	"github.com/dibsio/dibs/stream"
)

// world is one test's Redis topology, database and key prefix; managers
// made from it share all three, like instances of one deployment.
type world struct {
	client rueidis.Client
	st     store.Store
	dbURL  string
	prefix string
}

func newWorld(t testing.TB, topology, db string) world {
	t.Helper()
	var w world
	for _, tp := range redistest.Topologies(t) {
		if tp.Name == topology {
			w.client = tp.Client(t)
		}
	}
	w.dbURL = "sqlite://" + filepath.Join(t.TempDir(), "dibs.db")
	if db == "postgres" {
		w.dbURL = pgtest.URL(t)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, w.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	w.st = st
	w.prefix = redistest.Prefix(t)
	return w
}

func fastStream() stream.Config {
	sc := stream.DefaultConfig()
	sc.Block = 100 * time.Millisecond
	sc.PollInterval = 20 * time.Millisecond
	sc.ReclaimMinIdle = time.Second
	sc.HandlerTimeout = 400 * time.Millisecond
	sc.ReclaimInterval = 100 * time.Millisecond
	sc.LeaseTTL = 2 * time.Second
	sc.Logger = slog.New(slog.DiscardHandler)
	return sc
}

// manager starts a manager (an instance) in w, stopped at cleanup.
func (w world) manager(t *testing.T, instance string, tune func(*stream.Config)) *promotion.Manager {
	t.Helper()
	sc := fastStream()
	if tune != nil {
		tune(&sc)
	}
	return w.start(t, promotion.Config{
		Prefix: w.prefix, Instance: instance, Stream: sc,
		RecheckInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
}

// start starts a manager with cfg in w, stopped at cleanup.
func (w world) start(t *testing.T, cfg promotion.Config) *promotion.Manager {
	t.Helper()
	m, err := promotion.New(w.client, w.st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Stop(ctx); err != nil {
			t.Errorf("stop %s: %v", cfg.Instance, err)
		}
	})
	return m
}

func waitCounts(t *testing.T, m *promotion.Manager, id string, issued, failed int64) promotion.View {
	t.Helper()
	var (
		v   promotion.View
		err error
	)
	if !wait.Until(30*time.Second, func() bool {
		v, err = m.Get(context.Background(), id)
		return err == nil && v.Counts.Issued == issued && v.Counts.Failed == failed && v.Counts.Pending == 0
	}) {
		t.Fatalf("timed out after 30s waiting for %s: %d issued, %d failed, none pending; last seen %+v (error %v)",
			id, issued, failed, v.Counts, err)
	}
	return v
}

func create(t *testing.T, m *promotion.Manager, p promotion.Promotion) {
	t.Helper()
	if _, err := m.Create(context.Background(), p); err != nil {
		t.Fatalf("create %s: %v", p.ID, err)
	}
}

// groupIdle reports whether the issuers group has nothing pending or undelivered.
func groupIdle(t *testing.T, w world, id string) bool {
	t.Helper()
	k := claim.KeysFor(w.prefix, id)
	groups, err := w.client.Do(context.Background(), w.client.B().XinfoGroups().Key(k.Stream()).Build()).ToArray()
	if err != nil || len(groups) == 0 {
		return false
	}
	g, _ := groups[0].AsMap()
	pend, lag := g["pending"], g["lag"]
	p, _ := pend.AsInt64()
	l, err := lag.AsInt64()
	return err == nil && p == 0 && l == 0
}

// TestRedeliveryIssuesNothingNew puts copies of already-issued claims back
// into the stream: they are acknowledged as duplicates and issue nothing.
// An entry that holds a taken rank for another user — what a Redis that
// lost writes hands out — is neither issued under that rank nor dropped:
// it is re-ranked, and issued once, under a rank of its own.
func TestRedeliveryIssuesNothingNew(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", db)
			m := w.manager(t, "a", nil)
			ctx := context.Background()
			create(t, m, promotion.Promotion{ID: "redeliver", Stock: 5})
			var copies []map[string]string
			for i := 0; i < 3; i++ {
				user := fmt.Sprintf("u%d", i)
				res, err := m.Claim(ctx, "redeliver", user, "")
				if err != nil {
					t.Fatal(err)
				}
				copies = append(copies, map[string]string{"claim_id": res.ClaimID, "user": user,
					"rank": fmt.Sprint(res.Rank), "slot": fmt.Sprint(res.Slot), "at": "1"})
			}
			waitCounts(t, m, "redeliver", 3, 0)
			copies = append(copies, map[string]string{"claim_id": "redeliver#1", "user": "intruder",
				"rank": "1", "slot": "1", "at": "1"})
			k := claim.KeysFor(w.prefix, "redeliver")
			for _, e := range copies {
				args := w.client.B().Xadd().Key(k.Stream()).Id("*").FieldValue()
				for f, v := range e {
					args = args.FieldValue(f, v)
				}
				if err := w.client.Do(ctx, args.Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
			m.Registry().Wake("redeliver")
			wait.For(t, 30*time.Second, "the group to drain", func() bool { return groupIdle(t, w, "redeliver") })
			waitCounts(t, m, "redeliver", 4, 0)
			for i := 0; i < 3; i++ {
				got, _ := w.st.ListIssued(ctx, "redeliver", fmt.Sprintf("u%d", i))
				if len(got) != 1 {
					t.Fatalf("u%d has %d rows", i, len(got))
				}
			}
			got, err := w.st.ListIssued(ctx, "redeliver", "intruder")
			if err != nil || len(got) != 1 || got[0].Rank != 4 || got[0].ClaimID != "redeliver#4" {
				t.Fatalf("re-ranked intruder: %+v %v", got, err)
			}
			cs, err := m.UserClaims(ctx, "redeliver", "intruder")
			if err != nil || len(cs) != 1 || cs[0].Rank != 4 {
				t.Fatalf("intruder's claims: %+v %v", cs, err)
			}
			if dls, err := m.DeadLetters(ctx, "redeliver", "", 10); err != nil || len(dls) != 0 {
				t.Fatalf("dead letters %+v %v", dls, err)
			}
		})
	}
}

// poison makes the database refuse issued rows of users named poison*, as a
// bad row would; drop undoes it.
func poison(t *testing.T, w world, db string) (drop func()) {
	t.Helper()
	ctx := context.Background()
	if db == "sqlite" {
		conn, err := sql.Open("sqlite", w.dbURL[len("sqlite://"):]+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		exec := func(q string) {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		exec(`CREATE TRIGGER poison BEFORE INSERT ON issued WHEN NEW.user_id LIKE 'poison%' BEGIN SELECT RAISE(ABORT, 'poisoned row'); END`)
		return func() { exec(`DROP TRIGGER poison`) }
	}
	conn, err := pgx.Connect(ctx, w.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	exec := func(q string) {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE FUNCTION poison() RETURNS trigger AS $$ BEGIN
		IF NEW.user_id LIKE 'poison%' THEN RAISE EXCEPTION 'poisoned row'; END IF;
		RETURN NEW; END $$ LANGUAGE plpgsql`)
	exec(`CREATE TRIGGER poison BEFORE INSERT ON issued FOR EACH ROW EXECUTE FUNCTION poison()`)
	return func() { exec(`DROP TRIGGER poison ON issued`) }
}

// TestDeadLetterReplayAndVoid: claims the database refuses are retried up
// to max_deliveries and dead-lettered, without failing the good claims
// read in the same batch; once the cause is fixed, a replay issues one under
// its own claim id and a void returns the other's unit to stock.
func TestDeadLetterReplayAndVoid(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", db)
			drop := poison(t, w, db)
			m := w.manager(t, "a", func(sc *stream.Config) { sc.MaxDeliveries = 2 })
			ctx := context.Background()
			create(t, m, promotion.Promotion{ID: "dl", Stock: 4})
			for _, u := range []string{"good1", "poison1", "good2", "poison2"} {
				if _, err := m.Claim(ctx, "dl", u, ""); err != nil {
					t.Fatal(err)
				}
			}
			waitCounts(t, m, "dl", 2, 2)
			if _, err := m.Claim(ctx, "dl", "late", ""); !errors.Is(err, claim.ErrSoldOut) {
				t.Fatalf("a failed claim must keep its unit: %v", err)
			}
			dls, err := m.DeadLetters(ctx, "dl", "", 10)
			if err != nil || len(dls) != 2 {
				t.Fatalf("dead letters %+v %v", dls, err)
			}
			for _, d := range dls {
				if d.Deliveries < 2 || d.Reason == "" {
					t.Fatalf("dead letter %+v", d)
				}
			}
			cs, _ := m.UserClaims(ctx, "dl", "poison1")
			if len(cs) != 1 || cs[0].Status != claim.StatusFailed {
				t.Fatalf("poison1 status %+v", cs)
			}
			drop()

			// Two concurrent replays of the same claim replay it once.
			var wg sync.WaitGroup
			var mu sync.Mutex
			replayed := 0
			for i := 0; i < 2; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n, err := m.Replay(ctx, "dl", []string{dls[0].ClaimID})
					if err != nil {
						t.Errorf("replay: %v", err)
					}
					mu.Lock()
					replayed += n
					mu.Unlock()
				}()
			}
			wg.Wait()
			if replayed != 1 {
				t.Fatalf("replayed %d times", replayed)
			}
			n, err := m.Void(ctx, "dl", []string{dls[1].ClaimID, dls[0].ClaimID})
			if err != nil || n != 1 {
				t.Fatalf("void: %d %v (the replayed claim must not be voided)", n, err)
			}
			v := waitCounts(t, m, "dl", 3, 0)
			if v.Counts.Accepted != 3 || *v.Counts.Remaining != 1 {
				t.Fatalf("after replay and void: %+v", v.Counts)
			}
			if _, err := m.Claim(ctx, "dl", "late", ""); err != nil {
				t.Fatalf("the voided unit is back in stock: %v", err)
			}
			waitCounts(t, m, "dl", 4, 0)
			if n, _ := m.Replay(ctx, "dl", nil); n != 0 {
				t.Fatalf("replay all after everything settled: %d", n)
			}
		})
	}
}

// TestInstancesShareOnePromotion runs three instances on one Redis Cluster
// and one Postgres: claims spread over them never oversell, and every
// accepted claim is issued once.
func TestInstancesShareOnePromotion(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "cluster", "postgres")
	ms := []*promotion.Manager{w.manager(t, "a", nil), w.manager(t, "b", nil), w.manager(t, "c", nil)}
	create(t, ms[0], promotion.Promotion{ID: "shared", Stock: 300})
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ranks := map[int64]bool{}
	for i := 0; i < 900; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := ms[i%3].Claim(ctx, "shared", fmt.Sprintf("u%d", i%600), "")
			if err != nil {
				if !errors.Is(err, claim.ErrSoldOut) && !errors.Is(err, claim.ErrAlreadyClaimed) {
					t.Errorf("claim: %v", err)
				}
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ranks[res.Rank] {
				t.Errorf("rank %d twice", res.Rank)
			}
			ranks[res.Rank] = true
		}()
	}
	wg.Wait()
	if len(ranks) != 300 {
		t.Fatalf("accepted %d of stock 300", len(ranks))
	}
	v := waitCounts(t, ms[1], "shared", 300, 0)
	if v.State != promotion.StateSoldOut {
		t.Fatalf("state %s", v.State)
	}
}

// TestResumeOnStart: claims accepted while no instance runs are issued by
// the next instance that starts, found from the database.
func TestResumeOnStart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	ctx := context.Background()
	first, err := promotion.New(w.client, w.st, promotion.Config{Prefix: w.prefix, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	create(t, first, promotion.Promotion{ID: "resume", Stock: 50})
	// No instance runs: claims go straight through the gate.
	gate := first.Gate()
	for i := 0; i < 20; i++ {
		if _, err := gate.Claim(ctx, "resume", fmt.Sprintf("u%d", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	m := w.manager(t, "b", nil)
	waitCounts(t, m, "resume", 20, 0)
}

// TestIdleStopAndRestart: a promotion's pool stops after its idle timeout
// and the next accepted claim starts it again.
func TestIdleStopAndRestart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	m := w.manager(t, "a", func(sc *stream.Config) { sc.IdleTimeout = 200 * time.Millisecond })
	ctx := context.Background()
	create(t, m, promotion.Promotion{ID: "idle", Stock: 10})
	if _, err := m.Claim(ctx, "idle", "u1", ""); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, m, "idle", 1, 0)
	wait.For(t, 30*time.Second, "the idle stop", func() bool { return !m.Registry().Running("idle") })
	if _, err := m.Claim(ctx, "idle", "u2", ""); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, m, "idle", 2, 0)
}

// TestDrainedAfterEnd: a closed promotion whose claims are all issued is
// marked drained and no longer watched.
func TestDrainedAfterEnd(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	m := w.manager(t, "a", func(sc *stream.Config) { sc.IdleTimeout = 100 * time.Millisecond })
	ctx := context.Background()
	create(t, m, promotion.Promotion{ID: "done", Stock: 10})
	create(t, m, promotion.Promotion{ID: "live", Stock: 10})
	for _, u := range []string{"u1", "u2"} {
		if _, err := m.Claim(ctx, "done", u, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Close(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, m, "done", 2, 0)
	wait.For(t, 30*time.Second, "the promotion to be drained", func() bool {
		p, err := w.st.GetPromotion(ctx, "done")
		return err == nil && p.Drained
	})
	list, err := w.st.ListUndrained(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "live" {
		t.Fatalf("undrained %+v %v", list, err)
	}
}

// TestUserClaimsFollowTheDatabase: a claim whose row is committed reads
// issued even before its acknowledgement reaches Redis.
func TestUserClaimsFollowTheDatabase(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	ctx := context.Background()
	m, err := promotion.New(w.client, w.st, promotion.Config{Prefix: w.prefix, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	create(t, m, promotion.Promotion{ID: "truth", Stock: 5})
	res, err := m.Gate().Claim(ctx, "truth", "u1", "")
	if err != nil {
		t.Fatal(err)
	}
	if cs, err := m.UserClaims(ctx, "truth", "u1"); err != nil || len(cs) != 1 || cs[0].Status != claim.StatusPending {
		t.Fatalf("before the commit: %+v %v", cs, err)
	}
	if _, err := w.st.IssueBatch(ctx, []store.Issue{{ClaimID: res.ClaimID, PromotionID: "truth", UserID: "u1",
		Rank: res.Rank, Slot: res.Slot, AcceptedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	cs, err := m.UserClaims(ctx, "truth", "u1")
	if err != nil || len(cs) != 1 || cs[0].Status != claim.StatusIssued || cs[0].IssuedAt.IsZero() {
		t.Fatalf("after the commit, before the ack: %+v %v", cs, err)
	}
}
