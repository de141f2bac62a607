package promotion_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
)

// heldStore is a store whose issuance is down until released (IssueBatch
// answers ErrUnavailable, as a database outage would) and whose list of
// undrained promotions, once held, waits until released: so a Manager's
// loop can be stopped in the middle of a re-check.
type heldStore struct {
	store.Store
	issuing  atomic.Bool
	mu       sync.Mutex
	listing  chan struct{} // closed to release ListUndrained; nil: not held
	inList   chan struct{} // receives once a held ListUndrained waits
	inListed sync.Once
}

func holdIssuance(st store.Store) *heldStore { return &heldStore{Store: st} }

func (s *heldStore) IssueBatch(ctx context.Context, is []store.Issue) ([]store.Outcome, error) {
	if !s.issuing.Load() {
		return nil, fmt.Errorf("issuance held by the test: %w", store.ErrUnavailable)
	}
	return s.Store.IssueBatch(ctx, is)
}

func (s *heldStore) releaseIssuance() { s.issuing.Store(true) }

// holdListing makes the next ListUndrained wait until the returned release
// is called; waiting returns once one does wait.
func (s *heldStore) holdListing() (waiting func(t *testing.T), release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listing, s.inList = make(chan struct{}), make(chan struct{})
	in, out := s.inList, s.listing
	var once sync.Once
	return func(t *testing.T) {
			t.Helper()
			select {
			case <-in:
			case <-time.After(30 * time.Second):
				t.Fatal("timed out waiting for a re-check to list the promotions")
			}
		}, func() {
			once.Do(func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				close(out)
				s.listing = nil
			})
		}
}

func (s *heldStore) ListUndrained(ctx context.Context) ([]store.Promotion, error) {
	s.mu.Lock()
	hold, in := s.listing, s.inList
	s.mu.Unlock()
	if hold != nil {
		s.inListed.Do(func() { close(in) })
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.ListUndrained(ctx)
}

// journalManager starts a manager in w over st whose pool reads one entry
// at a time with one consumer: while issuance is held, that consumer keeps
// retrying the first entry it read, and every later claim stays unread in
// the work stream, where a loss of Redis's writes takes it.
func journalManager(t *testing.T, w world, st store.Store, cfg promotion.Config) *promotion.Manager {
	t.Helper()
	cfg.Stream = fastStream()
	cfg.Stream.BatchSize, cfg.Stream.MinConsumers, cfg.Stream.MaxConsumers = 1, 1, 1
	w.st = st
	return w.startManager(t, cfg)
}

// issuedAs checks that every claim answered is issued once, at the rank
// and slot it was answered with, and that nothing else is issued.
func issuedAs(t *testing.T, st store.Store, id string, answered map[string][]promotion.Claimed) {
	t.Helper()
	ranks := map[int64]string{}
	for user, cs := range answered {
		rows, err := st.ListIssued(context.Background(), id, user)
		if err != nil || len(rows) != len(cs) {
			t.Fatalf("%s holds %d issued rows (%v), want %d", user, len(rows), err, len(cs))
		}
		for i, c := range cs {
			if rows[i].Rank != c.Rank || rows[i].Slot != c.Slot || rows[i].ClaimID != c.ClaimID {
				t.Errorf("%s's claim %d issued as %+v, answered %+v", user, i+1, rows[i], c)
			}
			if other, dup := ranks[c.Rank]; dup {
				t.Errorf("rank %d issued to %s and %s", c.Rank, other, user)
			}
			ranks[c.Rank] = user
		}
	}
}

// TestJournalPutsBackClaimsRedisLost: claims are answered 202 while the
// database cannot confirm them, so they sit unread in the work stream; then
// Redis forgets the last four (their ranks, statuses, users and stream
// entries), as a crash under appendfsync everysec would. The instance that
// answered them puts them back from its journal — after the promotion was
// rebuilt — and once the database is back every claim is issued exactly
// once, at the rank and slot it was answered with. The users' limits and
// Idempotency-Keys hold, new claims rank after them, and later re-checks
// put nothing back twice.
func TestJournalPutsBackClaimsRedisLost(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", db)
			held := holdIssuance(w.st)
			var requeued atomic.Int64
			m := journalManager(t, w, held, promotion.Config{Instance: "a",
				OnRequeued: func(_ string, n int) { requeued.Add(int64(n)) }})
			ctx := context.Background()
			create(t, m, promotion.Promotion{ID: "journal", Stock: 20, PerUserLimit: 2})
			answered := map[string][]promotion.Claimed{}
			claimAs := func(user, key string) {
				t.Helper()
				res, err := m.Claim(ctx, "journal", user, key)
				if err != nil {
					t.Fatalf("claim of %s: %v", user, err)
				}
				answered[user] = append(answered[user], res)
			}
			for i := 1; i <= 6; i++ {
				claimAs(fmt.Sprintf("u%d", i), "")
			}
			claimAs("u5", "")
			claimAs("u7", "key-7")
			if r := answered["u5"][1]; r.Rank != 7 || r.Slot != 2 {
				t.Fatalf("u5's second claim: %+v, want rank 7 slot 2", r)
			}

			redistest.LoseClaimsFrom(t, w.client, claim.KeysFor(w.prefix, "journal"), 5)
			wait.For(t, 30*time.Second, "the four lost claims put back", func() bool { return requeued.Load() >= 4 })
			// Back in Redis before any is issued: the users are at their
			// limits, and a retry gets its original answer.
			if _, err := m.Claim(ctx, "journal", "u5", ""); !errors.Is(err, promotion.ErrAlreadyClaimed) {
				t.Fatalf("third claim of u5: %v, want ErrAlreadyClaimed", err)
			}
			if res, err := m.Claim(ctx, "journal", "u7", "key-7"); err != nil || !res.Replayed || res.Rank != 8 {
				t.Fatalf("retry of u7: %+v, %v; want its original rank 8", res, err)
			}
			cs, err := m.UserClaims(ctx, "journal", "u6")
			if err != nil || len(cs) != 1 || cs[0].Rank != 6 || cs[0].Status != claim.StatusPending {
				t.Fatalf("u6's claims: %+v, %v; want rank 6 pending", cs, err)
			}

			held.releaseIssuance()
			waitCounts(t, m, "journal", 8, 0)
			claimAs("n1", "")
			if r := answered["n1"][0]; r.Rank != 9 {
				t.Fatalf("claim after the repair: rank %d, want 9", r.Rank)
			}
			waitCounts(t, m, "journal", 9, 0)
			issuedAs(t, w.st, "journal", answered)
			if n := requeued.Load(); n != 4 {
				t.Fatalf("%d claims put back, want 4: once each", n)
			}
		})
	}
}

// TestJournalCollisionIsReranked: Redis forgets two claims an instance
// answered, and another instance — whose fence never saw them — answers one
// of the lost ranks again before the first instance notices. The first
// instance puts its claims back (one of them as a collision), and the
// issuer gives one of the two claims of that rank a new rank: every claim
// answered 202 is issued, once, and nothing is oversold.
func TestJournalCollisionIsReranked(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", db)
			heldA, heldB := holdIssuance(w.st), holdIssuance(w.st)
			a := journalManager(t, w, heldA, promotion.Config{Instance: "a"})
			b := journalManager(t, w, heldB, promotion.Config{Instance: "b"})
			ctx := context.Background()
			create(t, a, promotion.Promotion{ID: "collide", Stock: 20, PerUserLimit: 1})
			for i := 1; i <= 4; i++ {
				if _, err := a.Claim(ctx, "collide", fmt.Sprintf("u%d", i), ""); err != nil {
					t.Fatal(err)
				}
			}
			// a's loop waits in a re-check while Redis loses ranks 3 and 4
			// and b answers rank 3 again.
			waiting, release := heldA.holdListing()
			t.Cleanup(release)
			waiting(t)
			redistest.LoseClaimsFrom(t, w.client, claim.KeysFor(w.prefix, "collide"), 3)
			n1, err := b.Claim(ctx, "collide", "n1", "")
			if err != nil || n1.Rank != 3 {
				t.Fatalf("n1 on the other instance: %+v, %v; want rank 3, the one no fence saw", n1, err)
			}
			release()

			heldA.releaseIssuance()
			heldB.releaseIssuance()
			waitCounts(t, a, "collide", 5, 0)
			got := settledOnce(t, &rbEnv{st: w.st}, "collide", users(4, "n1"))
			if got["u3"] != 3 && got["n1"] != 3 || got["u3"] != 5 && got["n1"] != 5 {
				t.Fatalf("ranks after the collision: u3 %d, n1 %d; want 3 and 5", got["u3"], got["n1"])
			}
			v, err := a.Get(ctx, "collide")
			if err != nil || v.Counts.Accepted != 5 || *v.Counts.Remaining != 15 {
				t.Fatalf("counts %+v, %v; want 5 accepted, 15 remaining", v.Counts, err)
			}
			if dls, err := a.DeadLetters(ctx, "collide", "", 10); err != nil || len(dls) != 0 {
				t.Fatalf("dead letters: %+v, %v; want none", dls, err)
			}
		})
	}
}

// TestJournalKeepsEveryClaimThroughStall: the database confirms nothing
// while 12,000 claims (more than an earlier journal's 10,000 per promotion)
// are answered as fast as 32 clients can: every one is journaled, none is
// dropped, the inbox never fills, and while they wait each prune reads a
// slice or two at the confirmation front, not the whole journal. Then Redis
// loses the last 50 claims: the rebuild has the journal read every claim,
// and it puts those 50 back. Once the database is back, every claim is
// issued once and the journal empties.
func TestJournalKeepsEveryClaimThroughStall(t *testing.T) {
	t.Parallel()
	const n = 12_000
	w := newWorld(t, "single", "sqlite")
	held := holdIssuance(w.st)
	var requeued, dropped, prunes, journaled atomic.Int64
	m := journalManager(t, w, held, promotion.Config{Instance: "a",
		OnRequeued:       func(_ string, n int) { requeued.Add(int64(n)) },
		OnJournalDropped: func(_ string, n int) { dropped.Add(int64(n)) },
		OnJournal: func(claims int, _ int64) {
			journaled.Store(int64(claims))
			prunes.Add(1)
		}})
	ctx := context.Background()
	create(t, m, promotion.Promotion{ID: "stall", Stock: n + 100, PerUserLimit: 1})
	var next atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for range 32 {
		wg.Go(func() {
			for i := next.Add(1); i <= n; i = next.Add(1) {
				if _, err := m.Claim(ctx, "stall", fmt.Sprintf("u%d", i), ""); err != nil {
					t.Errorf("claim %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	rate := float64(n) / time.Since(began).Seconds()
	wait.For(t, 30*time.Second, "every claim journaled", func() bool { return journaled.Load() == n })
	if d := dropped.Load(); d != 0 {
		t.Fatalf("%d claims dropped from the journal, want none", d)
	}
	t.Logf("%.0f claims/s; inbox peak %d claims", rate, promotion.JournalInboxPeak(m))

	// While the database confirms nothing, a prune reads the front only.
	reads, from := promotion.JournalReads(m), prunes.Load()
	wait.For(t, 30*time.Second, "three more prunes", func() bool { return prunes.Load() >= from+3 })
	if got, most := promotion.JournalReads(m)-reads, (prunes.Load()-from+1)*2; got > most {
		t.Fatalf("%d slices read over %d prunes of a stalled journal, want at most %d: the front only", got, prunes.Load()-from, most)
	}

	redistest.LoseClaimsFrom(t, w.client, claim.KeysFor(w.prefix, "stall"), n-49)
	wait.For(t, 60*time.Second, "the 50 lost claims put back", func() bool { return requeued.Load() >= 50 })
	held.releaseIssuance()
	// 12,000 claims through one SQLite writer, under the race detector and
	// beside the rest of the suite: a generous deadline, and the count seen
	// last if it passes.
	var issued int64
	if !wait.Until(5*time.Minute, func() bool {
		c, err := w.st.Counts(ctx, "stall")
		if err == nil {
			issued = c.Issued
		}
		return err == nil && c.Issued == n
	}) {
		t.Fatalf("%d of %d claims issued after 5 minutes", issued, n)
	}
	wait.For(t, 30*time.Second, "the journal emptied", func() bool { return journaled.Load() == 0 })
	if d, r := dropped.Load(), requeued.Load(); d != 0 || r != 50 {
		t.Fatalf("%d dropped, %d put back; want 0 and 50", d, r)
	}
}

// TestJournalOverBudgetDropsNewest: the journals hold at most JournalBytes;
// a claim that finds the budget spent (the database confirming nothing) is
// not journaled, and counted. After a loss, the claims the journal holds
// are put back, and those it did not keep are the loss the budget allows.
func TestJournalOverBudgetDropsNewest(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	held := holdIssuance(w.st)
	var requeued, dropped atomic.Int64
	// Room for the first block: eight claims.
	m := journalManager(t, w, held, promotion.Config{Instance: "a", JournalBytes: promotion.JournalFirstBlock(),
		OnRequeued:       func(_ string, n int) { requeued.Add(int64(n)) },
		OnJournalDropped: func(_ string, n int) { dropped.Add(int64(n)) }})
	ctx := context.Background()
	create(t, m, promotion.Promotion{ID: "full", Stock: 20, PerUserLimit: 1})
	for i := 1; i <= 10; i++ {
		if _, err := m.Claim(ctx, "full", fmt.Sprintf("u%d", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, 30*time.Second, "two claims not journaled", func() bool { return dropped.Load() >= 2 })
	redistest.LoseClaimsFrom(t, w.client, claim.KeysFor(w.prefix, "full"), 7)
	wait.For(t, 30*time.Second, "the journal's two lost claims put back", func() bool { return requeued.Load() >= 2 })
	held.releaseIssuance()
	wait.For(t, 30*time.Second, "eight claims issued", func() bool {
		c, err := w.st.Counts(ctx, "full")
		return err == nil && c.Issued == 8
	})
	if n := dropped.Load(); n != 2 {
		t.Fatalf("%d claims dropped, want 2", n)
	}
	for i := 1; i <= 10; i++ {
		want := 1
		if i > 8 {
			want = 0
		}
		user := fmt.Sprintf("u%d", i)
		rows, err := w.st.ListIssued(ctx, "full", user)
		if err != nil || len(rows) != want {
			t.Errorf("%s holds %d issued rows (%v), want %d", user, len(rows), err, want)
		}
	}
}

// TestJournalBytesIsValidated: a negative JournalBytes is refused with an
// error naming the field.
func TestJournalBytesIsValidated(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	_, err := promotion.New(w.client, w.st, promotion.Config{JournalBytes: -1})
	if err == nil || !strings.Contains(err.Error(), "Config.JournalBytes") {
		t.Fatalf("New with JournalBytes -1: %v, want an error naming Config.JournalBytes", err)
	}
}
