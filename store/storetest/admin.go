package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/store"
)

// adminTests are the suite's cases for store.Admin.
var adminTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"ListPromotionsBy", testListPromotionsBy},
	{"ListPromotionsByPaging", testListPromotionsByPaging},
	{"ArchivePromotion", testArchivePromotion},
	{"IssuedByRankPages", testIssuedByRank},
	{"Audit", testAudit},
	{"AdminTokens", testAdminTokens},
	{"EraseUser", testEraseUser},
}

// listBy runs ListPromotionsBy and returns the ids.
func listBy(t *testing.T, s store.Store, q store.PromotionQuery) []string {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 100
	}
	ps, err := s.ListPromotionsBy(t.Context(), q)
	if err != nil {
		t.Fatalf("ListPromotionsBy(%+v): %v", q, err)
	}
	return ids(ps)
}

func testListPromotionsBy(t *testing.T, s store.Store) {
	ctx := t.Context()
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	mk := func(id string, created, starts, ends time.Duration) store.Promotion {
		p := promo(id)
		p.CreatedAt, p.StartsAt, p.EndsAt = at.Add(created), at.Add(starts), at.Add(ends)
		return p
	}
	mustCreate(t, s,
		mk("b-sched", -1*time.Hour, time.Hour, 2*time.Hour),
		mk("a-live", -3*time.Hour, -time.Hour, time.Hour),
		mk("d-past", -2*time.Hour, -2*time.Hour, -time.Hour),
		mk("c-closed", -4*time.Hour, -time.Hour, time.Hour),
		mk("e-archived", -5*time.Hour, -3*time.Hour, -2*time.Hour),
		mk("f-ends-now", -6*time.Hour, -time.Hour, 0),
	)
	if _, err := s.ClosePromotion(ctx, "c-closed", at.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ArchivePromotion(ctx, "e-archived", at); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		q    store.PromotionQuery
		want []string
	}{
		{"default hides archived", store.PromotionQuery{}, []string{"a-live", "b-sched", "c-closed", "d-past", "f-ends-now"}},
		{"archived only", store.PromotionQuery{Archived: store.ArchivedOnly}, []string{"e-archived"}},
		{"archived or not", store.PromotionQuery{Archived: store.ArchivedAny}, []string{"a-live", "b-sched", "c-closed", "d-past", "e-archived", "f-ends-now"}},
		{"scheduled", store.PromotionQuery{Phase: store.PhaseScheduled, Now: at}, []string{"b-sched"}},
		{"live", store.PromotionQuery{Phase: store.PhaseLive, Now: at}, []string{"a-live"}},
		// ends_at is exclusive: a promotion ending now has ended.
		{"ended", store.PromotionQuery{Phase: store.PhaseEnded, Now: at}, []string{"c-closed", "d-past", "f-ends-now"}},
		{"closed", store.PromotionQuery{Phase: store.PhaseClosed, Now: at}, []string{"c-closed"}},
		{"created_at", store.PromotionQuery{Sort: store.SortCreatedAt, Archived: store.ArchivedAny},
			[]string{"f-ends-now", "e-archived", "c-closed", "a-live", "d-past", "b-sched"}},
		{"-created_at", store.PromotionQuery{Sort: store.SortCreatedAtDesc},
			[]string{"b-sched", "d-past", "a-live", "c-closed", "f-ends-now"}},
		{"ended by -created_at", store.PromotionQuery{Sort: store.SortCreatedAtDesc, Phase: store.PhaseEnded, Now: at},
			[]string{"d-past", "c-closed", "f-ends-now"}},
		{"after id", store.PromotionQuery{AfterID: "c-closed"}, []string{"d-past", "f-ends-now"}},
	}
	for _, tt := range tests {
		if got := listBy(t, s, tt.q); !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
	for _, q := range []store.PromotionQuery{{Sort: "name", Limit: 1}, {Phase: "soon", Limit: 1}, {Archived: 7, Limit: 1}} {
		if _, err := s.ListPromotionsBy(ctx, q); err == nil {
			t.Errorf("ListPromotionsBy(%+v) succeeded; want an error", q)
		}
	}
}

// testListPromotionsByPaging walks both created_at orders page by page,
// with many promotions created at the same time: every one comes once, in
// order.
func testListPromotionsByPaging(t *testing.T, s store.Store) {
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	var want []string
	for i := range 23 {
		p := promo(fmt.Sprintf("pg-%02d", i))
		p.CreatedAt = at.Add(time.Duration(i/5) * time.Second) // ties of five
		mustCreate(t, s, p)
		want = append(want, p.ID)
	}
	for _, sort := range []string{store.SortID, store.SortCreatedAt, store.SortCreatedAtDesc} {
		q := store.PromotionQuery{Sort: sort, Limit: 4}
		var got []string
		for range 100 {
			ps, err := s.ListPromotionsBy(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) == 0 {
				break
			}
			got = append(got, ids(ps)...)
			last := ps[len(ps)-1]
			q.AfterID, q.AfterCreatedAt = last.ID, last.CreatedAt
		}
		w := slices.Clone(want)
		if sort == store.SortCreatedAtDesc {
			slices.Reverse(w)
		}
		if !slices.Equal(got, w) {
			t.Errorf("sort %q: paged %v, want %v", sort, got, w)
		}
	}
}

func testArchivePromotion(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("ar"))
	first := now()
	p, err := s.ArchivePromotion(ctx, "ar", first)
	if err != nil || !p.ArchivedAt.Equal(first) {
		t.Fatalf("ArchivePromotion = %v, %v; want archived at %v", p.ArchivedAt, err, first)
	}
	p, err = s.ArchivePromotion(ctx, "ar", first.Add(time.Hour))
	if err != nil || !p.ArchivedAt.Equal(first) {
		t.Fatalf("second ArchivePromotion = %v, %v; want the first time %v kept", p.ArchivedAt, err, first)
	}
	got, err := s.GetPromotion(ctx, "ar")
	if err != nil || !got.ArchivedAt.Equal(first) || got.ArchivedAt.Location() != time.UTC {
		t.Fatalf("GetPromotion after archive: ArchivedAt %v, %v", got.ArchivedAt, err)
	}
	if _, err := s.ArchivePromotion(ctx, "missing", first); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ArchivePromotion(missing) = %v; want ErrNotFound", err)
	}
}

func testIssuedByRank(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("win"), promo("win-other"))
	at := now()
	const n = 2500
	var batch []store.Issue
	for r := int64(n); r >= 1; r-- { // inserted out of order
		batch = append(batch, issue("win", r, fmt.Sprintf("u%d", r), 1, at))
	}
	batch = append(batch, issue("win-other", 1, "u1", 1, at))
	if _, err := s.IssueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	var after int64
	seen := 0
	for {
		page, err := s.IssuedByRank(ctx, "win", after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, is := range page {
			seen++
			if is.Rank != int64(seen) || is.PromotionID != "win" || is.UserID != fmt.Sprintf("u%d", seen) {
				t.Fatalf("row %d: %+v", seen, is)
			}
		}
		after = page[len(page)-1].Rank
	}
	if seen != n {
		t.Fatalf("paged %d rows, want %d", seen, n)
	}
	if rows, err := s.IssuedByRank(ctx, "win", 0, 0); err != nil || len(rows) != 0 {
		t.Fatalf("limit 0: %d rows, %v", len(rows), err)
	}
}

func testAudit(t *testing.T, s store.Store) {
	ctx := t.Context()
	at := now()
	for i := range 5 {
		e := store.AuditEntry{At: at.Add(time.Duration(i) * time.Second), Actor: "ops", Action: "promotion.close",
			PromotionID: fmt.Sprintf("p%d", i), Detail: fmt.Sprintf(`{"path": "/v1/promotions/p%d/close"}`, i), Status: 200}
		if i == 4 {
			e.Detail, e.PromotionID = "", ""
		}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatalf("AppendAudit: %v", err)
		}
	}
	all, err := s.ListAudit(ctx, 0, 100)
	if err != nil || len(all) != 5 {
		t.Fatalf("ListAudit = %d entries, %v; want 5", len(all), err)
	}
	for i, e := range all { // newest first
		k := 4 - i
		if !e.At.Equal(at.Add(time.Duration(k)*time.Second)) || e.Actor != "ops" || e.Status != 200 {
			t.Errorf("entry %d: %+v", i, e)
		}
		var detail map[string]any
		if err := json.Unmarshal([]byte(e.Detail), &detail); err != nil {
			t.Errorf("entry %d detail %q: %v", i, e.Detail, err)
		}
		if k < 4 && (detail["path"] != fmt.Sprintf("/v1/promotions/p%d/close", k) || e.PromotionID != fmt.Sprintf("p%d", k)) {
			t.Errorf("entry %d: %+v", i, e)
		}
		if k == 4 && len(detail) != 0 {
			t.Errorf("empty detail stored as %q", e.Detail)
		}
	}
	page, err := s.ListAudit(ctx, all[1].ID, 2)
	if err != nil || len(page) != 2 || page[0].ID != all[2].ID || page[1].ID != all[3].ID {
		t.Fatalf("ListAudit(before %d, 2) = %+v, %v", all[1].ID, page, err)
	}
}

func testAdminTokens(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := store.AdminToken{Name: "ci", SHA256: "aa11", CreatedAt: now(), CreatedBy: "default"}
	b := store.AdminToken{Name: "alice", SHA256: "bb22", CreatedAt: now(), CreatedBy: "ci"}
	for _, tk := range []store.AdminToken{a, b} {
		if err := s.CreateAdminToken(ctx, tk); err != nil {
			t.Fatalf("CreateAdminToken(%s): %v", tk.Name, err)
		}
	}
	for _, dup := range []store.AdminToken{{Name: "ci", SHA256: "cc33", CreatedBy: "x"}, {Name: "other", SHA256: "aa11", CreatedBy: "x"}} {
		if err := s.CreateAdminToken(ctx, dup); !errors.Is(err, store.ErrAlreadyExists) {
			t.Errorf("CreateAdminToken(%+v) = %v; want ErrAlreadyExists", dup, err)
		}
	}
	list, err := s.ListAdminTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range list {
		if list[i].CreatedAt.Location() != time.UTC {
			t.Errorf("CreatedAt not UTC: %v", list[i].CreatedAt)
		}
	}
	if !reflect.DeepEqual(tokenNames(list), []string{"alice", "ci"}) {
		t.Fatalf("ListAdminTokens = %v", tokenNames(list))
	}
	got, err := s.AdminTokenByHash(ctx, "aa11")
	if err != nil || got.Name != "ci" || got.CreatedBy != "default" || !got.CreatedAt.Equal(a.CreatedAt) {
		t.Fatalf("AdminTokenByHash = %+v, %v", got, err)
	}
	if err := s.DeleteAdminToken(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdminTokenByHash(ctx, "aa11"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("AdminTokenByHash after delete = %v; want ErrNotFound", err)
	}
	if err := s.DeleteAdminToken(ctx, "ci"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second DeleteAdminToken = %v; want ErrNotFound", err)
	}
}

func tokenNames(ts []store.AdminToken) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// erasedToken is what testEraseUser erases alice to.
const erasedToken = "erased:0123abcd"

// testEraseUser erases alice, who holds issued claims (a coupon with its
// code, a revoked one, a grant of points) and dead letters (one whose claim
// id collided), beside bob: nothing of hers is left under her name, the
// rows and the ledger move to the token, and the counts are unchanged.
func testEraseUser(t *testing.T, s store.Store) {
	ctx := t.Context()
	before := seedErase(t, s)
	n, err := s.EraseUser(ctx, "alice", erasedToken)
	if err != nil {
		t.Fatalf("EraseUser: %v", err)
	}
	// alice's events: accepted and issued of her 3 claims, failed of her 2
	// dead letters, revoked of 1.
	if n != (store.Erased{Issued: 3, DeadLetters: 2, Events: 9}) {
		t.Fatalf("EraseUser = %+v; want 3 issued, 2 dead letters, 9 events", n)
	}
	checkErasedEvents(t, s)
	for id, c := range before {
		if got, err := s.Counts(ctx, id); err != nil || got != c {
			t.Errorf("Counts(%s) after erase = %+v, %v; want %+v", id, got, err, c)
		}
	}
	checkErasedIssued(t, s)
	checkErasedDeadLetters(t, s)
	// Again: nothing left to rewrite.
	if n, err := s.EraseUser(ctx, "alice", erasedToken); err != nil || n != (store.Erased{}) {
		t.Fatalf("second EraseUser = %+v, %v; want nothing", n, err)
	}
}

// seedErase writes testEraseUser's claims and dead letters, and returns
// the counts of its promotions.
func seedErase(t *testing.T, s store.Store) map[string]store.Counts {
	t.Helper()
	ctx := t.Context()
	g := promo("er-g")
	g.Mode, g.PerUserLimit = store.ModeGrant, 1
	mustCreate(t, s, promo("er"), g)
	at := now()
	grant := store.Issue{ClaimID: "er-g@alice", PromotionID: "er-g", UserID: "alice", Rank: 1, Slot: 1, AcceptedAt: at,
		Grant: store.Grant{Points: 7}}
	coupon := issue("er", 1, "alice", 1, at)
	coupon.Grant = store.Grant{Code: "ERASE-CODE-1", Value: 5}
	issues := []store.Issue{coupon, issue("er", 2, "bob", 1, at), issue("er", 3, "alice", 2, at), grant}
	if _, err := s.IssueBatch(ctx, issues); err != nil {
		t.Fatal(err)
	}
	dl := deadLetter("er", "er#4", 4, at)
	dl.UserID, dl.Fields["user"] = "alice", "alice"
	collided := deadLetter("er", "er#1~alice", 1, at)
	collided.UserID, collided.Fields["user"] = "alice", "alice"
	for _, d := range []store.DeadLetter{dl, collided} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RevokeIssued(ctx, "er", []string{"er#3"}, false, at); err != nil {
		t.Fatal(err)
	}
	before := map[string]store.Counts{}
	for _, id := range []string{"er", "er-g"} {
		c, err := s.Counts(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		before[id] = c
	}
	return before
}

// checkErasedEvents checks that no event names alice: hers carry the token
// (and a claim id that agrees with the row's), bob's are kept.
func checkErasedEvents(t *testing.T, s store.Store) {
	t.Helper()
	evs := allEvents(t, s)
	bobs := 0
	for _, e := range evs {
		raw, _ := json.Marshal(e)
		if strings.Contains(string(raw), "alice") {
			t.Errorf("event keeps the user: %s", raw)
		}
		switch d := dataOf(t, e); d["user_id"] {
		case erasedToken:
			if d["claim_id"] != e.ClaimID {
				t.Errorf("event %s: claim_id %v in the data, %s in the row", e.ID, d["claim_id"], e.ClaimID)
			}
		case "bob":
			bobs++
		default:
			t.Errorf("event of neither user: %s", raw)
		}
		if e.ClaimID == "er-g@"+erasedToken && e.ID == store.EventID(e.Type, "er-g@alice") {
			t.Errorf("event %s keeps the id made from the user's claim id", e.ID)
		}
	}
	if len(evs) != 11 || bobs != 2 {
		t.Errorf("%d events after erase (%d of bob); want 11 (2 of bob): %q", len(evs), bobs, eventKeys(evs))
	}
}

// checkErasedIssued checks that alice's issued rows, her codes and her
// ledger moved to the token, and bob's row stayed.
func checkErasedIssued(t *testing.T, s store.Store) {
	t.Helper()
	ctx := t.Context()
	for _, id := range []string{"er", "er-g"} {
		if rows, err := s.ListIssued(ctx, id, "alice"); err != nil || len(rows) != 0 {
			t.Errorf("ListIssued(%s, alice) after erase = %d rows, %v", id, len(rows), err)
		}
	}
	rows, err := s.ListIssued(ctx, "er", erasedToken)
	if err != nil || len(rows) != 2 || rows[0].ClaimID != "er#1" || rows[1].ClaimID != "er#3" {
		t.Fatalf("ListIssued(er, token) = %+v, %v", rows, err)
	}
	if rows[0].Grant.Code != "ERASE-CODE-1" {
		t.Errorf("the code did not follow its claim: %+v", rows[0].Grant)
	}
	rows, err = s.ListIssued(ctx, "er-g", erasedToken)
	if err != nil || len(rows) != 1 || rows[0].ClaimID != "er-g@"+erasedToken {
		t.Fatalf("the grant's claim id carries the user: %+v, %v", rows, err)
	}
	// The ledger moves to the token whole: the balance is kept, under it.
	if b, err := s.Balance(ctx, "alice"); err != nil || b.Points != 0 || b.Entries != 0 {
		t.Errorf("alice's balance after erase = %+v, %v; want 0", b, err)
	}
	if b, err := s.Balance(ctx, erasedToken); err != nil || b.Points != 7 || b.Entries != 1 {
		t.Errorf("the token's balance after erase = %+v, %v; want 7", b, err)
	}
	if rows, _ := s.ListIssued(ctx, "er", "bob"); len(rows) != 1 {
		t.Errorf("bob's row: %+v", rows)
	}
}

// checkErasedDeadLetters checks that alice's dead letters carry the token,
// the collided claim id included.
func checkErasedDeadLetters(t *testing.T, s store.Store) {
	t.Helper()
	ds, err := s.ListDeadLetters(t.Context(), "er", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		raw, _ := json.Marshal(d)
		if d.UserID != erasedToken || d.Fields["user"] != erasedToken ||
			strings.Contains(string(raw), "alice") {
			t.Errorf("dead letter keeps the user: %s", raw)
		}
	}
	if ds[0].ClaimID != "er#1~"+erasedToken {
		t.Errorf("collided claim id %q, want er#1~%s", ds[0].ClaimID, erasedToken)
	}
}
