package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	issuers "github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/store"
)

// granted returns the claims of promotion p for ranks from..to (one user
// per rank), each with the grant iss makes for it.
func granted(t *testing.T, iss issuers.Issuer, p store.Promotion, from, to int64, user func(rank int64) (string, int)) []store.Issue {
	t.Helper()
	at := now()
	out := make([]store.Issue, 0, to-from+1)
	for r := from; r <= to; r++ {
		u, slot := user(r)
		is := issue(p.ID, r, u, slot, at)
		g, err := iss.Grant(t.Context(), p, is)
		if err != nil {
			t.Fatal(err)
		}
		is.Grant = g
		out = append(out, is)
	}
	return out
}

func userPerRank(r int64) (string, int) { return fmt.Sprintf("u%d", r), 1 }

// allIssued pages through every issued row of the promotion.
func allIssued(t *testing.T, s store.Store, promotionID string) []store.Issued {
	t.Helper()
	var all []store.Issued
	after := int64(0)
	for {
		page, err := s.IssuedByRank(t.Context(), promotionID, after, 5000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		after = page[len(page)-1].Rank
	}
}

// testCodesUnique issues 100,000 coupon claims in batches: every claim gets
// a code, valid by its check character, none twice; a redelivered batch
// (with fresh codes) is Duplicate and keeps the codes written first.
func testCodesUnique(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := promo("codes")
	p.Stock = 100_000
	mustCreate(t, s, p)
	codes, err := issuers.NewCodes(issuers.CodeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	coupon := issuers.Coupon{Codes: codes}
	const n, batch = 100_000, 1000
	want := make(map[string]string, n) // claim id → code
	for from := int64(1); from <= n; from += batch {
		b := granted(t, coupon, p, from, from+batch-1, userPerRank)
		out, err := s.IssueBatch(ctx, b)
		if err != nil {
			t.Fatalf("batch at %d: %v", from, err)
		}
		for i, o := range out {
			if o != store.Inserted {
				t.Fatalf("claim %s: %s", b[i].ClaimID, o)
			}
			want[b[i].ClaimID] = b[i].Grant.Code
		}
	}

	// A redelivery of a batch, its codes made anew, writes nothing.
	again := granted(t, coupon, p, 5001, 5000+batch, userPerRank)
	out, err := s.IssueBatch(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o != store.Duplicate {
			t.Fatalf("redelivered claim %s: %s", again[i].ClaimID, o)
		}
	}

	all := allIssued(t, s, p.ID)
	if len(all) != n {
		t.Fatalf("%d issued rows, want %d", len(all), n)
	}
	seen := make(map[string]string, n)
	for _, is := range all {
		g := is.Grant
		if g.Code != want[is.ClaimID] {
			t.Fatalf("claim %s holds code %q, want %q (the first one written)", is.ClaimID, g.Code, want[is.ClaimID])
		}
		if !codes.Valid(g.Code) {
			t.Fatalf("claim %s: code %q fails its check character", is.ClaimID, g.Code)
		}
		if other, ok := seen[g.Code]; ok {
			t.Fatalf("code %q issued to %s and %s", g.Code, other, is.ClaimID)
		}
		seen[g.Code] = is.ClaimID
		if g.Value != p.Value || !g.ExpiresAt.IsZero() || g.Points != 0 {
			t.Fatalf("claim %s: grant %+v, want value %d, no expiry, no points", is.ClaimID, g, p.Value)
		}
	}
}

// testCodeCollision makes codes collide: with the code already stored,
// with each other in one batch, and again after being made anew. Each
// collision is made anew inside the transaction and never fails the batch;
// only a claim that finds no free code fails, with ErrCodeTaken, and then
// nothing of its call is written.
func testCodeCollision(t *testing.T, s store.Store) {
	p := promo("tiny")
	mustCreate(t, s, p)
	if _, err := s.IssueBatch(t.Context(), granted(t, fixedCode(takenCode, nil), p, 1, 1, userPerRank)); err != nil {
		t.Fatal(err)
	}
	t.Run("made anew", func(t *testing.T) { testCodeMadeAnew(t, s, p) })
	t.Run("random", func(t *testing.T) { testCodeRandom(t, s, p) })
	t.Run("none free", func(t *testing.T) { testCodeNoneFree(t, s, p) })
}

// takenCode is the code testCodeCollision stores first.
const takenCode = "TAKEN"

// fixedCode grants every claim code, made anew by next (nil: none).
func fixedCode(code string, next func() (string, error)) issuers.Issuer {
	return issuers.IssuerFunc(func(context.Context, store.Promotion, store.Issue) (issuers.Grant, error) {
		return issuers.Grant{Code: code, Value: 1, NewCode: next}, nil
	})
}

// testCodeMadeAnew: four claims hold the taken code; the codes made anew
// are the taken one again, then fresh ones.
func testCodeMadeAnew(t *testing.T, s store.Store, p store.Promotion) {
	seq := []string{takenCode, "N1", "N2", "N3", "N4"}
	var mu sync.Mutex
	next := func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		c := seq[0]
		seq = seq[1:]
		return c, nil
	}
	b := granted(t, fixedCode(takenCode, next), p, 2, 5, userPerRank)
	out, err := s.IssueBatch(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for i, o := range out {
		if o != store.Inserted {
			t.Fatalf("claim %s: %s", b[i].ClaimID, o)
		}
	}
	for _, is := range allIssued(t, s, p.ID) {
		if got[is.Grant.Code] {
			t.Fatalf("code %q issued twice", is.Grant.Code)
		}
		got[is.Grant.Code] = true
	}
	for _, c := range []string{takenCode, "N1", "N2", "N3", "N4"} {
		if !got[c] {
			t.Errorf("code %q not issued; issued %v", c, got)
		}
	}
}

// testCodeRandom: 16 claims in a space of 256 codes, all starting on one
// code.
func testCodeRandom(t *testing.T, s store.Store, p store.Promotion) {
	codes, err := issuers.NewCodes(issuers.CodeConfig{Alphabet: "AB", Length: 9})
	if err != nil {
		t.Fatal(err)
	}
	start, err := codes.New()
	if err != nil {
		t.Fatal(err)
	}
	b := granted(t, fixedCode(start, codes.New), p, 100, 115, userPerRank)
	if _, err := s.IssueBatch(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, is := range allIssued(t, s, p.ID) {
		if is.Rank < 100 {
			continue
		}
		if seen[is.Grant.Code] || !codes.Valid(is.Grant.Code) {
			t.Fatalf("claim %s: code %q repeated or invalid", is.ClaimID, is.Grant.Code)
		}
		seen[is.Grant.Code] = true
	}
	if len(seen) != 16 {
		t.Fatalf("%d codes, want 16", len(seen))
	}
}

// testCodeNoneFree: a claim that finds no free code, with no NewCode or
// one that makes the taken code always, fails its call with ErrCodeTaken,
// and nothing of the call is written.
func testCodeNoneFree(t *testing.T, s store.Store, p store.Promotion) {
	ctx := t.Context()
	always := func() (string, error) { return takenCode, nil }
	for name, iss := range map[string]issuers.Issuer{"no NewCode": fixedCode(takenCode, nil), "always taken": fixedCode(takenCode, always)} {
		good := granted(t, fixedCode("GOOD", nil), p, 200, 200, userPerRank)
		bad := granted(t, iss, p, 201, 201, userPerRank)
		_, err := s.IssueBatch(ctx, append(good, bad...))
		if !errors.Is(err, store.ErrCodeTaken) {
			t.Fatalf("%s: IssueBatch = %v, want ErrCodeTaken", name, err)
		}
		for _, u := range []string{"u200", "u201"} {
			rows, err := s.ListIssued(ctx, p.ID, u)
			if err != nil || len(rows) != 0 {
				t.Fatalf("%s: %s has %v, %v after a failed call, want nothing", name, u, rows, err)
			}
		}
	}
}

// testPointsConcurrent credits 10,000 claims of one user from several
// goroutines, every batch delivered twice and others redelivered at
// random: the balance is 10,000 × value, one ledger entry per claim.
func testPointsConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := promo("points")
	p.Kind, p.Mode, p.Value, p.Stock, p.PerUserLimit = store.KindPoint, store.ModeGrant, 7, 10_000, 10_000
	mustCreate(t, s, p)
	const n, batch, writers = 10_000, 50, 8
	all := granted(t, issuers.Point{}, p, 1, n, func(r int64) (string, int) { return "spender", int(r) })
	// Another user's credits must not count.
	other := granted(t, issuers.Point{}, p, n+1, n+3, userPerRank)
	if _, err := s.IssueBatch(ctx, other); err != nil {
		t.Fatal(err)
	}

	var (
		wg   sync.WaitGroup
		tl   = newTally()
		errs = make([]error, writers)
	)
	for w := range writers {
		rnd := rand.New(rand.NewPCG(uint64(w), 11))
		wg.Go(func() {
			for start := w * batch; start < n; start += writers * batch {
				b := all[start:min(start+batch, n)]
				again := all[rnd.IntN(n-batch):][:batch] // any batch, maybe another writer's
				for _, b := range [][]store.Issue{b, again, b} {
					out, err := s.IssueBatch(ctx, b)
					if err != nil {
						errs[w] = err
						return
					}
					if err := tl.add(b, out); err != nil {
						errs[w] = err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	tl.check(t, n)
	b, err := s.Balance(ctx, "spender")
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.Balance{UserID: "spender", Points: n * p.Value, Entries: n}); b != want {
		t.Fatalf("Balance = %+v, want %+v", b, want)
	}
	rows, err := s.ListIssued(ctx, p.ID, "spender")
	if err != nil {
		t.Fatal(err)
	}
	sum := int64(0)
	for _, r := range rows {
		if r.Grant.Points != p.Value || r.Grant.Code != "" {
			t.Fatalf("claim %s: grant %+v, want %d points and no code", r.ClaimID, r.Grant, p.Value)
		}
		sum += r.Grant.Points
	}
	if len(rows) != n || sum != b.Points {
		t.Fatalf("%d ledger entries summing to %d, balance %d", len(rows), sum, b.Points)
	}
	if b, err := s.Balance(ctx, "nobody"); err != nil || b != (store.Balance{UserID: "nobody"}) {
		t.Fatalf("Balance(nobody) = %+v, %v, want zero", b, err)
	}
}

// testVoucher issues vouchers: the code, its value and its expiry are
// stored and read back; a redelivery keeps them.
func testVoucher(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := promo("voucher")
	p.Kind, p.Value = store.KindVoucher, 2500
	mustCreate(t, s, p)
	codes, err := issuers.NewCodes(issuers.CodeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	v := issuers.Voucher{Codes: codes, ValidFor: 30 * 24 * time.Hour}
	b := granted(t, v, p, 1, 3, userPerRank)
	for range 2 {
		if _, err := s.IssueBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
		b = granted(t, v, p, 1, 3, userPerRank) // redelivered with other codes
	}
	first := granted(t, v, p, 1, 1, userPerRank)[0]
	rows, err := s.ListIssued(ctx, p.ID, first.UserID)
	if err != nil || len(rows) != 1 {
		t.Fatalf("ListIssued = %v, %v", rows, err)
	}
	g := rows[0].Grant
	if !codes.Valid(g.Code) || g.Value != 2500 || g.Points != 0 {
		t.Fatalf("voucher grant %+v", g)
	}
	if want := rows[0].AcceptedAt.Add(30 * 24 * time.Hour); !g.ExpiresAt.Equal(want) {
		t.Fatalf("voucher expires %s, want %s", g.ExpiresAt, want)
	}
}

// tally counts, for concurrent writers, how often each claim was inserted
// and how many duplicates came back.
type tally struct {
	mu       sync.Mutex
	inserted map[string]int
	dups     int
}

func newTally() *tally { return &tally{inserted: map[string]int{}} }

// add counts the outcomes of batch b; a Conflict is an error.
func (c *tally) add(b []store.Issue, out []store.Outcome) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, o := range out {
		switch o {
		case store.Inserted:
			c.inserted[b[i].ClaimID]++
		case store.Duplicate:
			c.dups++
		default:
			return fmt.Errorf("claim %s: outcome %s", b[i].ClaimID, o)
		}
	}
	return nil
}

// check fails unless exactly claims claims were each inserted once.
func (c *tally) check(t *testing.T, claims int) {
	t.Helper()
	if len(c.inserted) != claims {
		t.Fatalf("%d claims inserted, want %d", len(c.inserted), claims)
	}
	for id, n := range c.inserted {
		if n != 1 {
			t.Fatalf("claim %s inserted %d times", id, n)
		}
	}
}

// benchGrants measures what grants add: batches of 10 coupon claims with
// their codes (compare with batch=10), and Balance, a sum over the ledger,
// for a user with 1,000 and 100,000 entries among 100,000 of other users.
func benchGrants(b *testing.B, open func(tb testing.TB) store.Store) {
	b.Run("batch=10/coupon", func(b *testing.B) { benchCoupons(b, open) })
	b.Run("batch=100/coupon/callers=8", func(b *testing.B) { benchCouponsParallel(b, open) })
	for _, entries := range []int64{1000, 100_000} {
		b.Run(fmt.Sprintf("balance/entries=%d", entries), func(b *testing.B) { benchBalance(b, open, entries) })
	}
}

// couponBench makes a store with a coupon promotion, and the coupon that
// grants its codes.
func couponBench(b *testing.B, open func(tb testing.TB) store.Store) (store.Store, store.Promotion, issuers.Coupon) {
	s := open(b)
	p := promo("bench")
	if err := s.CreatePromotion(context.Background(), p); err != nil {
		b.Fatal(err)
	}
	codes, err := issuers.NewCodes(issuers.CodeConfig{})
	if err != nil {
		b.Fatal(err)
	}
	return s, p, issuers.Coupon{Codes: codes}
}

// benchCoupons issues batches of 10 coupon claims, each with its code.
func benchCoupons(b *testing.B, open func(tb testing.TB) store.Store) {
	s, p, coupon := couponBench(b, open)
	ctx := context.Background()
	at := now()
	rank := int64(0)
	batch := make([]store.Issue, 10)
	var err error
	b.ReportAllocs()
	for b.Loop() {
		for i := range batch {
			rank++
			batch[i] = issue(p.ID, rank, fmt.Sprintf("u%d", rank), 1, at)
			if batch[i].Grant, err = coupon.Grant(ctx, p, batch[i]); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.IssueBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rank)/b.Elapsed().Seconds(), "claims/s")
}

// benchCouponsParallel is what the service does at full load: consumers
// hand batches of 100 coupon claims, each with its code, to the store at
// the same time.
func benchCouponsParallel(b *testing.B, open func(tb testing.TB) store.Store) {
	s, p, coupon := couponBench(b, open)
	issueParallel(b, s, p, 8, 100, func(is store.Issue) (store.Grant, error) {
		return coupon.Grant(context.Background(), p, is)
	})
}

// benchBalance sums the ledger of a user with entries entries, among
// 100,000 of other users.
func benchBalance(b *testing.B, open func(tb testing.TB) store.Store, entries int64) {
	s := open(b)
	ctx := context.Background()
	p := promo("bench")
	p.Kind, p.Mode, p.PerUserLimit = store.KindPoint, store.ModeGrant, int(entries)
	if err := s.CreatePromotion(ctx, p); err != nil {
		b.Fatal(err)
	}
	at := now()
	const others = 100_000
	var batch []store.Issue
	for r := int64(1); r <= entries+others; r++ {
		user, slot := "rich", int(r)
		if r > entries {
			user, slot = fmt.Sprintf("u%d", r), 1
		}
		is := issue(p.ID, r, user, slot, at)
		is.Grant = store.Grant{Points: 3}
		if batch = append(batch, is); len(batch) == 1000 {
			if _, err := s.IssueBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := s.IssueBatch(ctx, batch); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		bal, err := s.Balance(ctx, "rich")
		if err != nil || bal.Points != 3*entries {
			b.Fatalf("Balance = %+v, %v", bal, err)
		}
	}
}
