package faults

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestRedisKill9AppendfsyncAlways kills redis-server with SIGKILL at a
// random point of a burst of claims and restarts it on its append-only file
// (appendfsync always) while the burst goes on, several times. Every claim
// answered 202 survives: it is issued exactly once, and a retry with its
// Idempotency-Key gets the original answer.
func TestRedisKill9AppendfsyncAlways(t *testing.T) {
	t.Parallel()
	r := rng(t)
	rounds := pick(3, 8)
	const usersPerRound = 120
	e := newEnv(t, "")
	promo := "aof"
	stock := rounds * usersPerRound * 3 / 4
	l := newLedger(promo)
	p := startDibs(t, serveOpts{redis: e.redis.Addr(), db: e.dbURL})
	createPromotion(t, p.addr, promo, stock, 1)
	for round := range rounds {
		killAt := l.answered() + 1 + r.IntN(usersPerRound*3/4)
		down := time.Duration(r.IntN(1500)) * time.Millisecond
		t.Logf("round %d: kill -9 redis-server after answer %d, restart %v later", round, killAt, down)
		var once sync.Once
		restarted := make(chan error, 1)
		l.burst([]string{p.addr}, attempts(fmt.Sprintf("r%d-u", round), usersPerRound, 1), 16, func(n int) {
			if n >= killAt {
				once.Do(func() {
					if err := e.redis.Kill(); err != nil {
						t.Errorf("kill redis: %v", err)
					}
					go func() {
						<-time.After(down) // the outage itself
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						defer cancel()
						restarted <- e.redis.Restart(ctx)
					}()
				})
			}
		})
		once.Do(func() { restarted <- nil }) // the burst ended before the kill point
		if err := <-restarted; err != nil {
			t.Fatalf("restart redis: %v", err)
		}
	}
	l.settle(t, []string{p.addr}, 60*time.Second)
	l.checkReplays(t, p.addr)
	e.check(t, l, expect{promo: promo, stock: stock, perUser: 1, noDeadLetters: true, exact: true, soldOut: true}, p)
}

// TestRedisUnreachable puts Redis out of dibs's reach through the proxy:
// first a blackhole (every byte dropped, no connection closed), then
// connection resets. Meanwhile claims keep coming: each is answered 503
// unavailable with Retry-After, nothing half-done is left behind, and the
// consumers back off instead of filling the log. Once Redis is reachable
// again everything resumes: the claims retried with their keys are
// accepted once, and every accepted claim is issued.
func TestRedisUnreachable(t *testing.T) {
	t.Parallel()
	r := rng(t)
	hole, resets := pick(5*time.Second, 10*time.Second), pick(3*time.Second, 10*time.Second)
	e := newEnv(t, "")
	x := newProxy(t, "redis-unreachable", e.redis.Addr())
	p := startDibs(t, serveOpts{redis: x.addr(), db: e.dbURL})
	promo := "unreachable"
	const stock = 300
	createPromotion(t, p.addr, promo, stock, 1)
	l := newLedger(promo)
	l.burst([]string{p.addr}, attempts("before-", 60+r.IntN(60), 1), 16, nil)

	// Claims keep coming during the outage, a few every 50 ms.
	cut := time.Now()
	x.blackhole()
	t.Logf("blackhole for %v, then resets for %v", hole, resets)
	stop := make(chan struct{})
	during := l.trickle([]string{p.addr}, "during-", 50*time.Millisecond, stop, nil)
	<-time.After(hole) // the outage itself
	if st := readiness(p.addr); st != http.StatusServiceUnavailable {
		t.Errorf("/readyz answered %d while Redis was out of reach, want 503", st)
	}
	x.heal()
	x.reset()
	<-time.After(resets) // the outage itself
	healed := time.Now()
	x.heal()
	close(stop)
	outageAnswers(t, within(<-during, cut, healed))

	noise := p.logsBetween(cut, healed, backgroundNoise)
	secs := healed.Sub(cut).Seconds()
	t.Logf("%d warnings and errors in %.1fs of outage (%.1f/s), request failures aside: %v", len(noise), secs, float64(len(noise))/secs, byMessage(noise))
	if limit := int(5*secs) + 20; len(noise) > limit {
		t.Errorf("log storm: %d warnings and errors in %.1fs of outage (at most %d expected); last ones:\n%s",
			len(noise), secs, limit, rawLines(noise, 20))
	}

	waitReady(t, p.addr, 30*time.Second)
	l.settle(t, []string{p.addr}, 60*time.Second)
	e.waitDrained(t, promo, 60*time.Second, p)
	t.Logf("ready, the claims of the outage retried and everything issued %v after Redis came back", time.Since(healed).Round(100*time.Millisecond))
	l.burst([]string{p.addr}, attempts("after-", 40, 1), 16, nil)
	l.settle(t, []string{p.addr}, 60*time.Second)
	l.checkReplays(t, p.addr)
	e.check(t, l, expect{promo: promo, stock: stock, perUser: 1, noDeadLetters: true, exact: true}, p)
}

// within returns the answers of requests sent and answered in [from, to].
func within(ts []timed, from, to time.Time) []answer {
	var out []answer
	for _, t := range ts {
		if t.sent.After(from) && t.done.Before(to) {
			out = append(out, t.a)
		}
	}
	return out
}

// byMessage counts log lines by message.
func byMessage(ls []logLine) map[string]int {
	out := map[string]int{}
	for _, l := range ls {
		out[l.msg]++
	}
	return out
}

func rawLines(ls []logLine, n int) string {
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	s := ""
	for _, l := range ls {
		s += l.raw + "\n"
	}
	return s
}
