package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRedisRestoredFromOlderSnapshot saves an RDB snapshot of Redis, accepts
// and confirms more claims — on a promotion the snapshot holds, and on one
// created after it — then kills redis-server and brings it back from the old
// snapshot, with new claims arriving at once on two instances, among them
// users the restored Redis has forgotten. Redis has lost history the
// database holds: dibs must fence that loss before it collides. No unit is
// sold twice, no user gets more than the limit, every claim answered 202 is
// issued (a claim that collides is re-ranked or resolved to the user's
// issued claim, never dead-lettered), and nothing stays pending.
func TestRedisRestoredFromOlderSnapshot(t *testing.T) {
	t.Parallel()
	r := rng(t)
	e := newEnv(t, "")
	p := startDibs(t, serveOpts{redis: e.redis.Addr(), db: e.dbURL, instance: "p"})
	q := startDibs(t, serveOpts{redis: e.redis.Addr(), db: e.dbURL, instance: "q"})
	addrs := []string{p.addr, q.addr}
	const stock = 300
	older, newer := "restored", "created-after"
	createPromotion(t, p.addr, older, stock, 1)
	lo, ln := newLedger(older), newLedger(newer)

	lo.burst(addrs, attempts("old-", 80+r.IntN(40), 1), 16, nil)
	lo.settle(t, addrs, 30*time.Second)
	e.waitDrained(t, older, 30*time.Second, p, q)
	snapshot := e.saveSnapshot(t)

	// Accepted and confirmed after the snapshot: the database holds these,
	// the restored Redis will not.
	createPromotion(t, p.addr, newer, stock, 1)
	for _, l := range []*ledger{lo, ln} {
		l.burst(addrs, attempts("lost-", 80+r.IntN(40), 1), 16, nil)
		l.settle(t, addrs, 30*time.Second)
		e.waitDrained(t, l.promo, 30*time.Second, p, q)
	}

	// Traffic from the moment Redis is back: new users (more than the stock
	// left) and users whose claims the restored Redis forgot, with new keys.
	next := append(attempts("new-", 200, 1), attempts("lost-", 40, 1)...)
	for i := len(next) - 40; i < len(next); i++ {
		next[i].key += "-again"
	}
	r.Shuffle(len(next), func(i, j int) { next[i], next[j] = next[j], next[i] })
	e.restoreSnapshot(t, snapshot)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ln.burst(addrs, next, 8, nil)
	}()
	lo.burst(addrs, next, 8, nil)
	<-done
	for _, l := range []*ledger{lo, ln} {
		unknown := len(l.unknowns())
		l.settle(t, addrs, 60*time.Second)
		codes := map[string]int{}
		finals := l.finals()
		for _, at := range next {
			a := finals[at]
			codes[fmt.Sprintf("%d %s", a.status, a.code)]++
		}
		t.Logf("%s after the restore: %d claims answered 5xx or not at all at first; final answers %v", l.promo, unknown, codes)
		e.check(t, l, expect{promo: l.promo, stock: stock, perUser: 1, noDeadLetters: true}, p, q)
	}
}

// saveSnapshot saves Redis's data to an RDB file and returns a copy of it.
func (e *env) saveSnapshot(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.rdb.Do(ctx, e.rdb.B().Save().Build()).Error(); err != nil {
		t.Fatalf("SAVE: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(e.redis.Dir(), "dump.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "snapshot.rdb")
	if err := os.WriteFile(snap, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return snap
}

// restoreSnapshot kills redis-server and starts it again on the snapshot
// alone: the append-only directory is replaced by one whose only file is
// the snapshot, as its base.
func (e *env) restoreSnapshot(t *testing.T, snap string) {
	t.Helper()
	if err := e.redis.Kill(); err != nil {
		t.Fatal(err)
	}
	aof := filepath.Join(e.redis.Dir(), "appendonlydir")
	if err := os.RemoveAll(aof); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(aof, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(aof, "restore.base.rdb"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(aof, "appendonly.aof.manifest"), []byte("file restore.base.rdb seq 1 type b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.redis.Restart(ctx); err != nil {
		t.Fatalf("restart redis on the snapshot: %v", err)
	}
}
