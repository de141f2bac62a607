package promotion_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/stream"
)

// loseLast makes Redis forget the last n of the ranks 1..total of promotion
// id and the users u<rank> who held them, in one script, as a crash under
// appendfsync everysec or a restore from an older snapshot would.
func loseLast(t *testing.T, e *rbEnv, id string, total, n int) {
	t.Helper()
	k := claim.KeysFor(e.prefix, id)
	script := forgetStatusLua + `redis.call('DECRBY', KEYS[1], ARGV[1])
for r = ARGV[2] - ARGV[1] + 1, ARGV[2] do
  redis.call('HDEL', KEYS[2], 'u' .. r)
  redis.call('HDEL', KEYS[3], 'u' .. r)
  forget_status(KEYS[4], KEYS[5], r)
end
return 1`
	err := e.client.Do(context.Background(), e.client.B().Eval().Script(script).Numkeys(5).
		Key(k.Seq(), k.Users(), k.ByUser(), k.Status(), k.StatusBytes()).Arg(fmt.Sprint(n), fmt.Sprint(total)).Build()).Error()
	if err != nil {
		t.Fatal(err)
	}
}

// settledOnce checks the database after a loss: every user holds at most one
// issued row, and no rank is issued twice.
func settledOnce(t *testing.T, e *rbEnv, id string, users []string) map[string]int64 {
	t.Helper()
	ranks := map[int64]string{}
	out := map[string]int64{}
	for _, u := range users {
		rows, err := e.st.ListIssued(context.Background(), id, u)
		if err != nil || len(rows) != 1 {
			t.Fatalf("%s holds %d issued rows (%v), want 1", u, len(rows), err)
		}
		if other, ok := ranks[rows[0].Rank]; ok {
			t.Fatalf("rank %d issued to %s and %s", rows[0].Rank, other, u)
		}
		ranks[rows[0].Rank] = u
		out[u] = rows[0].Rank
	}
	return out
}

func users(n int, extra ...string) []string {
	out := make([]string, 0, n+len(extra))
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("u%d", i))
	}
	return append(out, extra...)
}

// TestFenceCatchesLossBeforeFirstClaim: Redis forgets its last two ranks
// (both issued) and claims arrive at once, long before any re-check. The
// very first claim is refused with ErrLost (answered unavailable), the
// promotion is rebuilt, and the claims that follow take ranks above every
// rank the database holds; the user whose claim Redis forgot is still at
// the limit.
func TestFenceCatchesLossBeforeFirstClaim(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			e := rbSetupWith(t, rbOpts{db: db, recheck: time.Hour})
			e.create(t, promotion.Promotion{ID: "fence", Stock: 20, PerUserLimit: 1})
			for i := 1; i <= 10; i++ {
				e.mustClaim(t, "fence", fmt.Sprintf("u%d", i))
			}
			e.waitSettled(t, "fence", 10, 0)
			e.waitAcked(t, "fence", 10)
			loseLast(t, e, "fence", 10, 2)

			_, err := e.m.Claim(context.Background(), "fence", "n1", "")
			if !errors.Is(err, claim.ErrLost) || !errors.Is(err, claim.ErrRebuilding) {
				t.Fatalf("first claim after the loss: %v, want ErrLost", err)
			}
			rep := e.report(t)
			if rep.Seq < 10 {
				t.Fatalf("rebuilt to seq %d, want at least 10", rep.Seq)
			}
			if r := e.mustClaim(t, "fence", "n1"); r.Rank != 11 {
				t.Fatalf("n1 got rank %d, want 11", r.Rank)
			}
			if r := e.mustClaim(t, "fence", "n2"); r.Rank != 12 {
				t.Fatalf("n2 got rank %d, want 12", r.Rank)
			}
			if _, _, err := e.claim(t, "fence", "u9"); !errors.Is(err, claim.ErrAlreadyClaimed) {
				t.Fatalf("u9 after the loss: %v, want ErrAlreadyClaimed", err)
			}
			e.waitSettled(t, "fence", 12, 0)
			settledOnce(t, e, "fence", users(10, "n1", "n2"))
		})
	}
}

// TestCollisionIsReranked covers the window no fence sees: an instance that
// never knew of the lost ranks answers them again, to a new user and to a
// user whose claim Redis forgot. Neither claim is dropped or dead-lettered,
// and nothing is oversold: the promotion is rebuilt, the new user's claim is
// re-ranked above the database's ranks and issued, and the returning user's
// second claim resolves to the one the user holds.
func TestCollisionIsReranked(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			a := rbSetupWith(t, rbOpts{db: db, recheck: time.Hour, instance: "a"})
			b := rbSetupWith(t, rbOpts{client: a.client, st: a.st, prefix: a.prefix, recheck: time.Hour, instance: "b"})
			a.create(t, promotion.Promotion{ID: "twice", Stock: 20, PerUserLimit: 1})
			for i := 1; i <= 10; i++ {
				a.mustClaim(t, "twice", fmt.Sprintf("u%d", i))
			}
			a.waitSettled(t, "twice", 10, 0)
			a.waitAcked(t, "twice", 10)
			loseLast(t, a, "twice", 10, 2)

			// An instance with no fence for the promotion answers ranks 9
			// and 10 again. Both claims run in one script, so no issuer
			// sees the first collision before the second claim is taken.
			twice := "local function claim(KEYS, ARGV)\n" + claim.ClaimScriptSource() + "\nend\n" +
				"local a = claim(KEYS, {ARGV[1], '', ARGV[3], '0'})\n" +
				"local b = claim(KEYS, {ARGV[2], '', ARGV[3], '0'})\n" +
				"return {a[2], b[2]}"
			keys := claim.ClaimScriptKeys(a.prefix, "twice")
			ranks, err := a.client.Do(context.Background(), a.client.B().Eval().Script(twice).Numkeys(int64(len(keys))).
				Key(keys...).Arg("n1", "u10", "twice").Build()).AsIntSlice()
			if err != nil || len(ranks) != 2 || ranks[0] != 9 || ranks[1] != 10 {
				t.Fatalf("claims of n1 and u10 got ranks %v (%v), want 9 and 10: the lost ranks", ranks, err)
			}
			b.m.Registry().Wake("twice")
			wait.For(t, 30*time.Second, "n1 re-ranked and issued", func() bool {
				rows, err := a.st.ListIssued(context.Background(), "twice", "n1")
				return err == nil && len(rows) == 1
			})
			a.waitSettled(t, "twice", 11, 0)
			got := settledOnce(t, a, "twice", users(10, "n1"))
			if got["n1"] != 11 || got["u10"] != 10 {
				t.Fatalf("ranks after the collision: n1 %d, u10 %d; want 11 and 10", got["n1"], got["u10"])
			}
			cs, err := b.m.UserClaims(context.Background(), "twice", "n1")
			if err != nil || len(cs) != 1 || cs[0].Rank != 11 || cs[0].ClaimID != "twice#11" {
				t.Fatalf("n1's claims: %+v, %v; want rank 11", cs, err)
			}
			if dls, err := a.m.DeadLetters(context.Background(), "twice", "", 10); err != nil || len(dls) != 0 {
				t.Fatalf("dead letters: %+v, %v; want none", dls, err)
			}
			v, err := a.m.Get(context.Background(), "twice")
			if err != nil || v.Counts.Accepted != 11 || *v.Counts.Remaining != 9 {
				t.Fatalf("counts %+v, %v; want 11 accepted, 9 remaining", v.Counts, err)
			}
		})
	}
}

// TestReplayOfAClaimRedisForgot: a replay whose claim Redis holds no status
// for (Redis lost it, and the rebuild that restores it has read its page
// before the replay) does nothing in Redis and is not marked applied; once
// the claim's status is back, the sweep applies the replay and the claim is
// issued. Marked applied at once, it would stay replayed with no stream
// entry: invisible, and never issued.
func TestReplayOfAClaimRedisForgot(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", db)
			drop := poison(t, w, db)
			m := w.manager(t, "a", func(sc *stream.Config) { sc.MaxDeliveries = 1 })
			ctx := context.Background()
			create(t, m, promotion.Promotion{ID: "forgot", Stock: 4})
			res, err := m.Claim(ctx, "forgot", "poison1", "")
			if err != nil {
				t.Fatal(err)
			}
			waitCounts(t, m, "forgot", 0, 1)
			drop()
			k := claim.KeysFor(w.prefix, "forgot")
			rank := fmt.Sprint(res.Rank)
			// The dead letter is recorded in the database before its status
			// in Redis: forget the status only once it is written.
			wait.For(t, 10*time.Second, "the failed status in Redis", func() bool {
				return statusOf(t, w.client, k, rank) == "f"
			})
			// Two re-checks, the second begun after the status was written:
			// the journal has seen the claim failed and forgotten it, so the
			// status forgotten below is not taken for a loss and rebuilt
			// before the replay.
			rechecks(t, m)(2)
			setStatus(t, w.client, k, rank, "")
			if n, err := m.Replay(ctx, "forgot", []string{res.ClaimID}); err != nil || n != 1 {
				t.Fatalf("replay: %d, %v", n, err)
			}
			un, err := w.st.ListUnappliedDeadLetters(ctx, time.Now().Add(time.Hour), 10)
			if err != nil || len(un) != 1 || un[0].ClaimID != res.ClaimID {
				t.Fatalf("unapplied after a replay Redis could not apply: %+v, %v; want the claim", un, err)
			}
			// The rebuild's page, read before the replay, writes the claim
			// back as failed; the sweep then applies the replay.
			setStatus(t, w.client, k, rank, "f")
			waitCounts(t, m, "forgot", 1, 0)
		})
	}
}
