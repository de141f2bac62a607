package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	issuers "github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/store"
)

// testWebhookPromotion stores a webhook promotion and reads its kind and
// URL back.
func testWebhookPromotion(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := promo("hook")
	p.Kind = store.KindWebhook
	p.WebhookURL = "https://partner.example/coupons?x=1"
	mustCreate(t, s, p)
	got, err := s.GetPromotion(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != store.KindWebhook || got.WebhookURL != p.WebhookURL {
		t.Fatalf("got kind %q url %q, want %q %q", got.Kind, got.WebhookURL, p.Kind, p.WebhookURL)
	}
	bad := promo("bad-kind")
	bad.Kind = "gift"
	if err := s.CreatePromotion(ctx, bad); err == nil {
		t.Fatal("a promotion of an unknown kind was stored")
	}
}

// testPoolUpload adds codes with duplicates within and across uploads.
func testPoolUpload(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("pool-a"), promo("pool-b"))
	added, err := s.AddPoolCodes(ctx, "pool-a", []string{"A1", "A2", "A1", "A3"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.PoolAdded{Added: 3, Duplicates: 1, Total: 3, Free: 3}); added != want {
		t.Fatalf("first upload = %+v, want %+v", added, want)
	}
	added, err = s.AddPoolCodes(ctx, "pool-a", []string{"A3", "A4", "a4"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.PoolAdded{Added: 2, Duplicates: 1, Total: 5, Free: 5}); added != want {
		t.Fatalf("second upload = %+v, want %+v", added, want)
	}
	// Another promotion's pool may hold the same codes.
	added, err = s.AddPoolCodes(ctx, "pool-b", []string{"A1"})
	if err != nil || added.Added != 1 || added.Total != 1 {
		t.Fatalf("upload to another pool = %+v, %v", added, err)
	}
	total, free, err := s.PoolSize(ctx, "pool-a")
	if err != nil || total != 5 || free != 5 {
		t.Fatalf("PoolSize = %d, %d, %v; want 5, 5", total, free, err)
	}
	if total, free, err := s.PoolSize(ctx, "none"); err != nil || total != 0 || free != 0 {
		t.Fatalf("PoolSize of a promotion without a pool = %d, %d, %v", total, free, err)
	}
}

// testPoolIssue issues 5,000 claims from a pool of 5,000 codes in
// concurrent batches, each batch delivered twice (the second time with
// fresh random codes, as a redelivery carries): every claim gets a pool
// code, no code goes to two claims, none is left, and a redelivery keeps
// the code written first. A promotion without a pool still gets generated
// codes.
func testPoolIssue(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 5000
	p := promo("pooled")
	p.Stock = n
	plain := promo("plain")
	mustCreate(t, s, p, plain)
	codes := make([]string, n)
	pool := make(map[string]bool, n)
	for i := range codes {
		codes[i] = fmt.Sprintf("PARTNER-%05d", i)
		pool[codes[i]] = true
	}
	if _, err := s.AddPoolCodes(ctx, p.ID, codes); err != nil {
		t.Fatal(err)
	}
	kinds, err := issuers.Builtin(issuers.Config{})
	if err != nil {
		t.Fatal(err)
	}
	coupon := kinds[store.KindCoupon]
	issueTwiceConcurrently(t, s, coupon, p, n)
	all := checkPoolCodes(t, s, p, pool)

	// A redelivery after the pool is empty is a Duplicate and keeps its code.
	first := all[0]
	redo := granted(t, coupon, p, first.Rank, first.Rank, userPerRank)
	outs, err := s.IssueBatch(ctx, redo)
	if err != nil || outs[0] != store.Duplicate {
		t.Fatalf("redelivery = %v, %v; want Duplicate", outs, err)
	}
	if got := allIssued(t, s, p.ID)[0].Grant.Code; got != first.Grant.Code {
		t.Fatalf("redelivered claim's code changed from %s to %s", first.Grant.Code, got)
	}

	// Without a pool, the coupon's generated code is written.
	outs, err = s.IssueBatch(ctx, granted(t, coupon, plain, 1, 1, userPerRank))
	if err != nil || outs[0] != store.Inserted {
		t.Fatalf("plain coupon = %v, %v", outs, err)
	}
	if got := allIssued(t, s, plain.ID); len(got) != 1 || len(got[0].Grant.Code) != issuers.DefaultCodeLength {
		t.Fatalf("plain coupon issued %+v", got)
	}
}

// issueTwiceConcurrently issues ranks 1..n of p in batches of 100 at the
// same time, each batch twice, the second with other codes iss made.
func issueTwiceConcurrently(t *testing.T, s store.Store, iss issuers.Issuer, p store.Promotion, n int64) {
	t.Helper()
	const batch = 100
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, n/batch)
	for from := int64(1); from <= n; from += batch {
		issues := granted(t, iss, p, from, from+batch-1, userPerRank)
		again := granted(t, iss, p, from, from+batch-1, userPerRank)
		wg.Go(func() {
			for _, b := range [][]store.Issue{issues, again} {
				if _, err := s.IssueBatch(ctx, b); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// checkPoolCodes checks that every claim of p got a code of pool, with p's
// value, no code went to two claims and none is left; it returns the rows.
func checkPoolCodes(t *testing.T, s store.Store, p store.Promotion, pool map[string]bool) []store.Issued {
	t.Helper()
	n := len(pool)
	all := allIssued(t, s, p.ID)
	if len(all) != n {
		t.Fatalf("%d issued rows, want %d", len(all), n)
	}
	seen := make(map[string]string, n)
	for _, x := range all {
		if !pool[x.Grant.Code] {
			t.Fatalf("claim %s got code %q, not one of the pool", x.ClaimID, x.Grant.Code)
		}
		if other, dup := seen[x.Grant.Code]; dup {
			t.Fatalf("code %s went to %s and %s", x.Grant.Code, other, x.ClaimID)
		}
		seen[x.Grant.Code] = x.ClaimID
		if x.Grant.Value != p.Value {
			t.Fatalf("claim %s: value %d, want %d", x.ClaimID, x.Grant.Value, p.Value)
		}
	}
	if total, free, err := s.PoolSize(t.Context(), p.ID); err != nil || total != int64(n) || free != 0 {
		t.Fatalf("PoolSize = %d, %d, %v; want %d, 0", total, free, err, n)
	}
	return all
}

// testPoolDry issues more claims than the pool holds: the batch that finds
// it dry fails with ErrPoolEmpty and writes nothing, and a claim on its own
// after the last code is refused the same way; no claim is issued without
// a code.
func testPoolDry(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := promo("dry")
	mustCreate(t, s, p)
	if _, err := s.AddPoolCodes(ctx, p.ID, []string{"X1", "X2", "X3"}); err != nil {
		t.Fatal(err)
	}
	kinds, err := issuers.Builtin(issuers.Config{})
	if err != nil {
		t.Fatal(err)
	}
	coupon := kinds[store.KindCoupon]
	if _, err := s.IssueBatch(ctx, granted(t, coupon, p, 1, 4, userPerRank)); !errors.Is(err, store.ErrPoolEmpty) {
		t.Fatalf("4 claims from a pool of 3: %v, want ErrPoolEmpty", err)
	}
	if errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a dry pool is reported as an outage: %v", err)
	}
	if got := allIssued(t, s, p.ID); len(got) != 0 {
		t.Fatalf("a failed batch wrote %d rows", len(got))
	}
	if outs, err := s.IssueBatch(ctx, granted(t, coupon, p, 1, 3, userPerRank)); err != nil || len(outs) != 3 {
		t.Fatalf("3 claims from a pool of 3: %v, %v", outs, err)
	}
	_, err = s.IssueBatch(ctx, granted(t, coupon, p, 4, 4, userPerRank))
	if !errors.Is(err, store.ErrPoolEmpty) || !strings.Contains(err.Error(), "dry#4") {
		t.Fatalf("a claim after the last code: %v, want ErrPoolEmpty naming the claim", err)
	}
	for _, x := range allIssued(t, s, p.ID) {
		if !strings.HasPrefix(x.Grant.Code, "X") {
			t.Fatalf("claim %s issued with code %q", x.ClaimID, x.Grant.Code)
		}
	}
}
