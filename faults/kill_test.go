package faults

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestKill9DuringClaimBurst kills dibs with SIGKILL at a random point of a
// burst of claims (or just after it, while claims are being confirmed),
// restarts it, and repeats. Clients retry what they got no answer for with
// the same Idempotency-Key. Nothing accepted is lost, nothing is issued
// twice, every retry of an accepted claim gets its original answer, and the
// promotion sells exactly its stock.
func TestKill9DuringClaimBurst(t *testing.T) {
	t.Parallel()
	r := rng(t)
	rounds := pick(4, 12)
	const usersPerRound, perUser = 40, 2
	perRound := usersPerRound * (perUser + 1) // each user tries once more than the limit
	e := newEnv(t, "")
	promo := "kill9"
	stock := rounds * usersPerRound * 3 / 2 // below the users' limit: it sells out
	l := newLedger(promo)
	opts := serveOpts{redis: e.redis.Addr(), db: e.dbURL}
	for round := range rounds {
		p := startDibs(t, opts)
		if round == 0 {
			createPromotion(t, p.addr, promo, stock, perUser)
		}
		killAt := l.answered() + 1 + r.IntN(perRound+perRound/4)
		t.Logf("round %d: kill -9 after answer %d", round, killAt)
		var once sync.Once
		kill := func() { p.Signal(syscall.SIGKILL) }
		l.burst([]string{p.addr}, attempts(fmt.Sprintf("r%d-u", round), usersPerRound, perUser+1), 16, func(n int) {
			if n >= killAt {
				once.Do(kill)
			}
		})
		once.Do(kill) // past the burst: during confirmation
		p.WaitExit(10 * time.Second)
	}
	p := startDibs(t, opts)
	l.settle(t, []string{p.addr}, 60*time.Second)
	l.checkReplays(t, p.addr)
	e.check(t, l, expect{promo: promo, stock: stock, perUser: perUser, noDeadLetters: true, exact: true, soldOut: true}, p)
}
