package faults

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dibsio/dibs/internal/testkit/pgtest"
)

// TestDatabaseOutage breaks the database in three ways while claims keep
// coming — stopped, read-only, slowed to two seconds per statement — and
// heals it. Claims are accepted all along (they only touch Redis); the
// issuers pause and back off; afterwards every accepted claim is issued and
// not one is dead-lettered.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	outage := pick(5*time.Second, 30*time.Second)

	t.Run("stopped", func(t *testing.T) {
		t.Parallel()
		srv := pgtest.Fresh(t)
		e := newEnv(t, srv.URL())
		p := startDibs(t, serveOpts{redis: e.redis.Addr(), db: e.dbURL})
		dbOutage(t, e, []*dibsProc{p}, outage, true, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := srv.Stop(ctx); err != nil {
				t.Fatalf("stop postgres: %v", err)
			}
		}, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := srv.Start(ctx); err != nil {
				t.Fatalf("start postgres: %v", err)
			}
		})
	})

	t.Run("read-only", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, "")
		name := strings.TrimPrefix(must(url.Parse(e.dbURL)).Path, "/")
		admin := adminConn(t, e.dbURL)
		p := startDibs(t, serveOpts{redis: e.redis.Addr(), db: e.dbURL})
		readOnly := func(on bool) {
			setting := "SET default_transaction_read_only = on"
			if !on {
				setting = "RESET default_transaction_read_only"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %q %s", name, setting)); err != nil {
				t.Fatalf("alter database: %v", err)
			}
			// Sessions read the setting when they start: end the open ones.
			if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, name); err != nil {
				t.Fatalf("terminate backends: %v", err)
			}
		}
		dbOutage(t, e, []*dibsProc{p}, outage, false, func() { readOnly(true) }, func() { readOnly(false) })
	})

	t.Run("slow", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, "")
		x := newProxy(t, "db-slow", dbHost(e.dbURL))
		// Handler deadline (40% of reclaim_min_idle_ms) well above a few
		// two-second statements, so slow batches can still finish.
		cfg := "stream:\n  block_ms: 200\n  reclaim_min_idle_ms: 30000\n  lease_ttl_ms: 1500\n"
		p := startDibs(t, serveOpts{redis: e.redis.Addr(), db: withHost(e.dbURL, x.addr()), config: cfg})
		dbOutage(t, e, []*dibsProc{p}, outage, false, func() { x.latency(2 * time.Second) }, x.heal)
	})
}

// dbOutage runs claims before, during and after an outage of the database
// that breakDB starts and healDB ends, and checks the outcome. With
// unready, the instances must say they are not ready during the outage.
func dbOutage(t *testing.T, e *env, ps []*dibsProc, outage time.Duration, unready bool, breakDB, healDB func()) {
	t.Helper()
	r := rng(t)
	promo := "db-" + strings.ReplaceAll(t.Name()[strings.LastIndexByte(t.Name(), '/')+1:], "-", "")
	const stock = 240
	addrs := make([]string, len(ps))
	for i, p := range ps {
		addrs[i] = p.addr
	}
	createPromotion(t, addrs[0], promo, stock, 1)
	l := newLedger(promo)
	l.burst(addrs, attempts("before-", 40+r.IntN(40), 1), 16, nil)

	breakDB()
	start := time.Now()
	l.burst(addrs, attempts("during-", 100, 1), 16, nil)
	for at, a := range l.finals() {
		if strings.HasPrefix(at.user, "during-") && a.status != 202 && a.code != "sold_out" {
			t.Errorf("claim of %s during the database outage: %v", at.user, a)
		}
	}
	if n := len(l.unknowns()); n > 0 {
		t.Errorf("%d claims without an answer during the database outage", n)
	}
	<-time.After(time.Until(start.Add(outage))) // the outage itself
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	held, err := e.pendingStatuses(ctx, promo)
	cancel()
	if err != nil || held == 0 {
		t.Errorf("the outage held no claim back (%d pending, %v)", held, err)
	}
	if unready {
		for _, p := range ps {
			if st := readiness(p.addr); st != http.StatusServiceUnavailable {
				t.Errorf("%s: /readyz answered %d during the outage, want 503", p.name, st)
			}
		}
	}
	healDB()
	healed := time.Now()
	secs := healed.Sub(start).Seconds()
	for _, p := range ps {
		noise := p.logsBetween(start, healed, backgroundNoise)
		t.Logf("database out for %.1fs: %s logged %d warnings and errors (%.1f/s): %v", secs, p.name, len(noise), float64(len(noise))/secs, byMessage(noise))
		if limit := int(5*secs) + 20; len(noise) > limit {
			t.Errorf("log storm: %d warnings and errors in %.1fs of outage (at most %d expected); last ones:\n%s",
				len(noise), secs, limit, rawLines(noise, 20))
		}
	}

	e.waitDrained(t, promo, pick(60*time.Second, 120*time.Second), ps...)
	t.Logf("every claim accepted so far issued %v after the database came back", time.Since(healed).Round(100*time.Millisecond))
	l.burst(addrs, attempts("after-", 120, 1), 16, nil)
	l.settle(t, addrs, 60*time.Second)
	e.check(t, l, expect{promo: promo, stock: stock, perUser: 1, noDeadLetters: true, exact: true, soldOut: true}, ps...)
}

// adminConn connects to the postgres database of the server holding dbURL,
// for statements about the test's database; closed when the test ends.
func adminConn(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	u := must(url.Parse(dbURL))
	u.Path = "/postgres"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
