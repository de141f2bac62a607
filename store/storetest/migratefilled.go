package storetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	issuers "github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/store"
)

// MigrateFilled checks the migrations s has not applied yet on a database
// that holds rows. s is a store on a schema some migrations behind (the
// backend's test made it so); MigrateFilled writes claims through it (coupon
// claims with codes, point claims with ledger entries, a second slot, a
// revoke, dead letters, one of them voided), reads everything back, calls
// Migrate, and checks that every read answers the same afterwards and that
// exactly-once holds on the rows written before: the same claims are
// Duplicate, another claim on a taken rank or user slot is a Conflict, and
// a voided claim is never issued.
func MigrateFilled(t *testing.T, s store.Store) {
	t.Helper()
	f := fillBeforeMigrating(t, s)
	before := f.read(t, s)
	if c := before["counts "+f.coupon.ID].(store.Counts); c.Issued != filledClaims || c.Revoked != 1 || c.Failed != 1 || c.Voided != 1 {
		t.Fatalf("counts before migrating: %+v", c)
	}

	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate on a filled database: %v", err)
	}
	after := f.read(t, s)
	for k, want := range before {
		if got := after[k]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s after migrating:\n got %+v\nwant %+v", k, got, want)
		}
	}
	f.checkExactlyOnce(t, s)
}

// filledClaims is the claims MigrateFilled issues to each promotion.
const filledClaims = 300

// filled is what MigrateFilled wrote before migrating.
type filled struct {
	coupon, points store.Promotion
	written        []store.Issue   // the claims issued
	users          map[string]bool // their users
	at             time.Time       // when the dead letters were recorded
}

// fillBeforeMigrating writes the claims, the revoke and the dead letters.
func fillBeforeMigrating(t *testing.T, s store.Store) *filled {
	t.Helper()
	ctx := t.Context()
	kinds, err := issuers.Builtin(issuers.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := &filled{coupon: promo("mf-c"), points: promo("mf-p"), users: map[string]bool{}}
	f.points.Kind, f.points.Value = store.KindPoint, 30
	mustCreate(t, s, f.coupon, f.points)
	// Users in no order; every tenth rank goes to users holding two slots.
	user := func(r int64) (string, int) {
		if r%10 == 0 {
			return fmt.Sprintf("b%d", r/20), int(r/10%2) + 1
		}
		return benchUser(r), 1
	}
	for _, p := range []store.Promotion{f.coupon, f.points} {
		b := granted(t, kinds[p.Kind], p, 1, filledClaims, user)
		if _, err := s.IssueBatch(ctx, b); err != nil {
			t.Fatalf("issue before migrating: %v", err)
		}
		f.written = append(f.written, b...)
	}
	if _, err := s.RevokeIssued(ctx, f.coupon.ID, []string{"mf-c#7"}, true, now()); err != nil {
		t.Fatal(err)
	}
	f.at = now()
	for _, d := range []store.DeadLetter{deadLetter(f.coupon.ID, "mf-c#1001", 1001, f.at), deadLetter(f.coupon.ID, "mf-c#1002", 1002, f.at)} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.TransitionDeadLetters(ctx, f.coupon.ID, []string{"mf-c#1002"}, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	for _, is := range f.written {
		f.users[is.UserID] = true
	}
	return f
}

// read answers every read of what was written, by name.
func (f *filled) read(t *testing.T, s store.Store) map[string]any {
	t.Helper()
	ctx := t.Context()
	got := map[string]any{}
	for _, p := range []store.Promotion{f.coupon, f.points} {
		got["issued "+p.ID] = allIssued(t, s, p.ID)
		c, err := s.Counts(ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		got["counts "+p.ID] = c
		known, err := s.ClaimsByRank(ctx, p.ID, 0, 2*filledClaims)
		if err != nil {
			t.Fatal(err)
		}
		got["known "+p.ID] = known
		for u := range f.users {
			list, err := s.ListIssued(ctx, p.ID, u)
			if err != nil {
				t.Fatal(err)
			}
			got["list "+p.ID+" "+u] = list
		}
	}
	for u := range f.users {
		b, err := s.Balance(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		got["balance "+u] = b
	}
	ranks, err := s.MaxRanks(ctx, []string{f.coupon.ID, f.points.ID, "none"})
	if err != nil {
		t.Fatal(err)
	}
	got["max ranks"] = ranks
	dead, err := s.ListDeadLetters(ctx, f.coupon.ID, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	got["dead letters"] = dead
	return got
}

// checkExactlyOnce checks exactly-once on the rows written before the
// migration: the same claims are Duplicate, another claim on a taken rank
// or user slot is a Conflict, a voided claim is never issued, and a new
// one is.
func (f *filled) checkExactlyOnce(t *testing.T, s store.Store) {
	t.Helper()
	ctx := t.Context()
	out, err := s.IssueBatch(ctx, f.written)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o != store.Duplicate {
			t.Fatalf("claim %s issued again after migrating: %s, want duplicate", f.written[i].ClaimID, o)
		}
	}
	const n = filledClaims
	at, coupon := f.at, f.coupon
	taken := f.written[4]                                       // rank 5 of the coupon promotion
	rank := issue(coupon.ID, taken.Rank, "someone-else", 1, at) // the same rank, another claim
	rank.ClaimID = "mf-c#other"
	slot := issue(coupon.ID, 2*n+1, taken.UserID, taken.Slot, at) // the same user slot, another rank
	voided := issue(coupon.ID, 1002, "user-mf-c#1002", 1, at)     // voided before the migration
	fresh := issue(coupon.ID, 2*n+2, "new-user", 1, at)
	out, err = s.IssueBatch(ctx, []store.Issue{rank, slot, voided, fresh})
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Outcome{store.Conflict, store.Conflict, store.Conflict, store.Inserted}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("outcomes after migrating: %v, want %v", out, want)
	}
	if c, err := s.Counts(ctx, coupon.ID); err != nil || c.Issued != n+1 {
		t.Fatalf("counts after migrating and issuing one: %+v, %v", c, err)
	}
}
