package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRedisRestoredFromOlderSnapshot saves an RDB snapshot of Redis, accepts
// and confirms more claims — on promotions the snapshot holds (one with two
// units per user, the second ones taken after the snapshot) and on one
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
	n1, n2 := 80+r.IntN(40), 80+r.IntN(40)
	// again returns the attempts with new keys: the same users claiming
	// once more.
	again := func(ats []attempt, suffix string) []attempt {
		out := make([]attempt, len(ats))
		for i, at := range ats {
			out[i] = attempt{user: at.user, key: at.key + suffix}
		}
		return out
	}
	secondSlot := make([]attempt, 0, n1)
	for _, at := range attempts("old-", n1, 2) {
		if strings.HasSuffix(at.key, "-1") {
			secondSlot = append(secondSlot, at)
		}
	}
	cases := []struct {
		l              *ledger
		stock, perUser int
		before         []attempt // accepted and confirmed before the snapshot
		after          []attempt // accepted and confirmed after it: the restored Redis forgets them
		next           []attempt // sent as soon as Redis is back
	}{
		{ // a promotion the snapshot holds
			l: newLedger("restored"), stock: 300, perUser: 1,
			before: attempts("old-", n1, 1),
			after:  attempts("lost-", n2, 1),
			next:   append(attempts("new-", 200, 1), again(attempts("lost-", 40, 1), "-again")...),
		},
		{ // two units per user: the second ones taken after the snapshot
			l: newLedger("second-slot"), stock: 500, perUser: 2,
			before: attempts("old-", n1, 1),
			after:  append(secondSlot, attempts("lost-", n2, 1)...),
			next: append(append(attempts("new-", 300, 1), again(attempts("old-", 40, 1), "-third")...),
				again(attempts("lost-", 40, 1), "-again")...),
		},
		{ // a promotion created after the snapshot
			l: newLedger("created-after"), stock: 300, perUser: 1,
			after: attempts("lost-", n2, 1),
			next:  append(attempts("new-", 200, 1), again(attempts("lost-", 40, 1), "-again")...),
		},
	}
	confirm := func(l *ledger, ats []attempt) {
		l.burst(addrs, ats, 16, nil)
		l.settle(t, addrs, 30*time.Second)
		e.waitDrained(t, l.promo, 30*time.Second, p, q)
	}
	for _, c := range cases {
		if c.before != nil {
			createPromotion(t, p.addr, c.l.promo, c.stock, c.perUser)
			confirm(c.l, c.before)
		}
	}
	snapshot := e.saveSnapshot(t)
	for _, c := range cases {
		if c.before == nil {
			createPromotion(t, p.addr, c.l.promo, c.stock, c.perUser)
		}
		confirm(c.l, c.after)
	}

	// Traffic from the moment Redis is back: new users (more than the stock
	// left) and users whose claims the restored Redis forgot, with new keys.
	e.restoreSnapshot(t, snapshot)
	var wg sync.WaitGroup
	for _, c := range cases {
		r.Shuffle(len(c.next), func(i, j int) { c.next[i], c.next[j] = c.next[j], c.next[i] })
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.l.burst(addrs, c.next, 6, nil)
		}()
	}
	wg.Wait()
	for _, c := range cases {
		unknown := len(c.l.unknowns())
		c.l.settle(t, addrs, 60*time.Second)
		codes := map[string]int{}
		finals := c.l.finals()
		for _, at := range c.next {
			a := finals[at]
			codes[fmt.Sprintf("%d %s", a.status, a.code)]++
		}
		t.Logf("%s after the restore: %d claims answered 5xx or not at all at first; final answers %v", c.l.promo, unknown, codes)
		e.check(t, c.l, expect{promo: c.l.promo, stock: c.stock, perUser: c.perUser, noDeadLetters: true}, p, q)
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
