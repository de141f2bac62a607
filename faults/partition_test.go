package faults

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestPartitionOneOfThree runs three dibs instances on one Redis and one
// PostgreSQL and cuts one of them off from Redis (a blackhole in its proxy)
// in the middle of a burst, while the other two keep serving. The cut-off
// instance answers its claims 503 unavailable; the two others take over the
// entries it had in hand once its leases lapse and confirm everything,
// before the partition heals; afterwards the third resumes, and no claim is
// lost or issued twice.
func TestPartitionOneOfThree(t *testing.T) {
	t.Parallel()
	r := rng(t)
	outage := pick(6*time.Second, 20*time.Second)
	e := newEnv(t, "")
	x := newProxy(t, "partition", e.redis.Addr())
	a := startDibs(t, serveOpts{redis: x.addr(), db: e.dbURL, instance: "a"})
	b := startDibs(t, serveOpts{redis: e.redis.Addr(), db: e.dbURL, instance: "b"})
	c := startDibs(t, serveOpts{redis: e.redis.Addr(), db: e.dbURL, instance: "c"})
	all := []string{a.addr, b.addr, c.addr}
	promo := "partition"
	const stock = 500
	createPromotion(t, b.addr, promo, stock, 1)
	l := newLedger(promo)

	// The cut comes at a random point of a burst spread over all three.
	cutAt := 20 + r.IntN(120)
	var once sync.Once
	var cut time.Time
	l.burst(all, attempts("before-", 180, 1), 24, func(n int) {
		if n >= cutAt {
			once.Do(func() { cut = time.Now(); x.blackhole() })
		}
	})
	once.Do(func() { cut = time.Now(); x.blackhole() })
	t.Logf("instance a cut off from Redis after answer %d, for at least %v", cutAt, outage)

	// The two others go on; a's claims fail.
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		onA []answer
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ans := l.claim(context.Background(), a.addr, attempt{user: fmt.Sprintf("on-a-%d", i), key: fmt.Sprintf("k-on-a-%d", i)})
			mu.Lock()
			onA = append(onA, ans)
			mu.Unlock()
		}()
	}
	l.burst([]string{b.addr, c.addr}, attempts("during-", 150, 1), 16, nil)
	wg.Wait()
	outageAnswers(t, onA)
	l.settle(t, []string{b.addr, c.addr}, 30*time.Second)
	// b and c confirm everything, a's entries in hand included, while a is
	// still cut off.
	e.waitDrained(t, promo, 30*time.Second, b, c)
	drained := time.Since(cut)
	if st := readiness(a.addr); st != http.StatusServiceUnavailable {
		t.Errorf("/readyz of the cut-off instance answered %d, want 503", st)
	}
	if st := readiness(b.addr); st != http.StatusOK {
		t.Errorf("/readyz of an instance that reaches Redis answered %d, want 200", st)
	}
	<-time.After(time.Until(cut.Add(outage))) // the outage itself
	x.heal()
	t.Logf("b and c confirmed everything %v after the cut; partition healed after %v", drained.Round(100*time.Millisecond), time.Since(cut).Round(100*time.Millisecond))

	waitReady(t, a.addr, 30*time.Second)
	l.burst(all, attempts("after-", 150, 1), 24, nil)
	l.settle(t, all, 60*time.Second)
	l.checkReplays(t, a.addr)
	e.check(t, l, expect{promo: promo, stock: stock, perUser: 1, noDeadLetters: true, exact: true}, a, b, c)
}
