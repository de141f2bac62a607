package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/store"
)

// eventTests are the outbox's cases, run by Run.
var eventTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"EventsWithIssue", testEventsWithIssue},
	{"EventsRolledBack", testEventsRolledBack},
	{"EventsDeadLetters", testEventsDeadLetters},
	{"EventsPromotion", testEventsPromotion},
	{"EventsPaging", testEventsPaging},
	{"EventsConcurrentWriters", testEventsConcurrentWriters},
	{"EventCursors", testEventCursors},
	{"PruneEvents", testPruneEvents},
}

// allEvents reads the whole feed, page by page.
func allEvents(t *testing.T, s store.Store, types ...string) []store.Event {
	t.Helper()
	var (
		out   []store.Event
		after int64
	)
	for {
		page, err := s.Events(t.Context(), after, types, 3)
		if err != nil {
			t.Fatalf("Events after %d: %v", after, err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Seq
	}
}

// eventKeys lists the events as "type claim" (or "type promotion").
func eventKeys(evs []store.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		subject := e.ClaimID
		if subject == "" {
			subject = e.PromotionID
		}
		out[i] = e.Type + " " + subject
	}
	return out
}

func wantEvents(t *testing.T, what string, got []store.Event, want ...string) {
	t.Helper()
	if keys := eventKeys(got); !slices.Equal(keys, want) {
		t.Fatalf("%s: events %q, want %q", what, keys, want)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq {
			t.Fatalf("%s: seq %d after %d", what, got[i].Seq, got[i-1].Seq)
		}
	}
}

func testEventsWithIssue(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := promo("ev")
	mustCreate(t, s, p)
	at := now()
	b := []store.Issue{issue(p.ID, 1, "u1", 1, at), issue(p.ID, 2, "u2", 1, at)}
	b[1].Grant.Points = 40
	if _, err := s.IssueBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	evs := allEvents(t, s)
	wantEvents(t, "issued", evs,
		"claim.accepted ev#1", "claim.issued ev#1", "claim.accepted ev#2", "claim.issued ev#2")
	for _, e := range evs {
		if e.ID != store.EventID(e.Type, e.ClaimID) || e.PromotionID != p.ID {
			t.Fatalf("event %+v: id or promotion not as written", e)
		}
	}
	if !evs[0].At.Equal(at) {
		t.Errorf("claim.accepted at %s, want the acceptance time %s", evs[0].At, at)
	}
	if rows, err := s.ListIssued(ctx, p.ID, "u1"); err != nil || len(rows) != 1 || !evs[1].At.Equal(rows[0].IssuedAt) {
		t.Errorf("claim.issued at %s, want the issued row's time (%v, %v)", evs[1].At, rows, err)
	}
	if d := dataOf(t, evs[3]); d["points"] != 40.0 || d["user_id"] != "u2" || d["rank"] != 2.0 {
		t.Errorf("claim.issued data %s, want the user, rank and points", evs[3].Data)
	}

	// A redelivery (Duplicate) and a Conflict write nothing.
	again := append(slices.Clone(b), issue(p.ID, 2, "u9", 1, at))
	again[2].ClaimID = "ev#other"
	out, err := s.IssueBatch(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out, []store.Outcome{store.Duplicate, store.Duplicate, store.Conflict}) {
		t.Fatalf("outcomes %v", out)
	}
	wantEvents(t, "after redelivery", allEvents(t, s),
		"claim.accepted ev#1", "claim.issued ev#1", "claim.accepted ev#2", "claim.issued ev#2")
	head, err := s.EventHead(ctx)
	if err != nil || head != evs[3].Seq {
		t.Fatalf("EventHead = %d, %v; want %d", head, err, evs[3].Seq)
	}
}

// dataOf decodes an event's data.
func dataOf(t *testing.T, e store.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Data, &m); err != nil {
		t.Fatalf("event %s data %s: %v", e.ID, e.Data, err)
	}
	return m
}

func testEventsRolledBack(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := promo("rb")
	mustCreate(t, s, p)
	at := now()
	first := issue(p.ID, 1, "u1", 1, at)
	first.Grant = store.Grant{Code: "HELD", Value: 1}
	if _, err := s.IssueBatch(ctx, []store.Issue{first}); err != nil {
		t.Fatal(err)
	}
	// The second claim's code is held and it cannot make another: the
	// whole batch rolls back, its events with it.
	a, b := issue(p.ID, 2, "u2", 1, at), issue(p.ID, 3, "u3", 1, at)
	b.Grant = store.Grant{Code: "HELD", Value: 1}
	if _, err := s.IssueBatch(ctx, []store.Issue{a, b}); !errors.Is(err, store.ErrCodeTaken) {
		t.Fatalf("IssueBatch = %v, want ErrCodeTaken", err)
	}
	wantEvents(t, "after the rollback", allEvents(t, s), "claim.accepted rb#1", "claim.issued rb#1")
}

func testEventsDeadLetters(t *testing.T, s store.Store) {
	ctx := t.Context()
	at := now()
	d := deadLetter("dle", "dle#1", 1, at)
	if err := s.RecordDeadLetter(ctx, d); err != nil {
		t.Fatal(err)
	}
	// The same failure recorded again is no new event.
	d.Deliveries++
	if err := s.RecordDeadLetter(ctx, d); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, "failed", allEvents(t, s), "claim.failed dle#1")

	// Replayed, then failing again: a failure of its own, with its own id.
	if _, err := s.TransitionDeadLetters(ctx, "dle", nil, store.DeadReplayed); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordDeadLetter(ctx, d); err != nil {
		t.Fatal(err)
	}
	evs := allEvents(t, s)
	wantEvents(t, "failed again", evs, "claim.failed dle#1", "claim.failed dle#1")
	if evs[0].ID == evs[1].ID {
		t.Fatalf("two failures share the event id %s", evs[0].ID)
	}

	// A void writes claim.voided; a void of nothing, or a replay, writes none.
	if _, err := s.TransitionDeadLetters(ctx, "dle", []string{"dle#1"}, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransitionDeadLetters(ctx, "dle", []string{"dle#1"}, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	// A voided claim recorded again stays voided, and is no failure.
	if err := s.RecordDeadLetter(ctx, d); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, "voided", allEvents(t, s), "claim.failed dle#1", "claim.failed dle#1", "claim.voided dle#1")
	wantEvents(t, "voided only", allEvents(t, s, store.EventClaimVoided), "claim.voided dle#1")
}

func promotionEvent(typ, id string) store.Event {
	return store.Event{ID: store.EventID(typ, id), Type: typ, At: now(), PromotionID: id,
		Data: []byte(fmt.Sprintf(`{"promotion_id":%q}`, id))}
}

func testEventsPromotion(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i, want := range []bool{true, false} {
		ok, err := s.AppendPromotionEvent(ctx, promotionEvent(store.EventPromotionOpened, "pe"))
		if err != nil || ok != want {
			t.Fatalf("append %d = %v, %v; want %v", i, ok, err, want)
		}
	}
	if ok, err := s.AppendPromotionEvent(ctx, promotionEvent(store.EventPromotionEnded, "pe")); err != nil || !ok {
		t.Fatalf("append ended = %v, %v", ok, err)
	}
	bad := promotionEvent(store.EventPromotionOpened, "pe")
	bad.ID = "evt_mine"
	if _, err := s.AppendPromotionEvent(ctx, bad); err == nil {
		t.Fatal("an event id not made by EventID was taken")
	}
	if _, err := s.AppendPromotionEvent(ctx, promotionEvent(store.EventClaimIssued, "pe")); err == nil {
		t.Fatal("a claim event was taken as a promotion event")
	}
	evs := allEvents(t, s)
	wantEvents(t, "promotion", evs, "promotion.opened pe", "promotion.ended pe")
	if evs[0].ClaimID != "" || dataOf(t, evs[0])["promotion_id"] != "pe" {
		t.Fatalf("event %+v", evs[0])
	}
}

func testEventsPaging(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := promo("pg")
	mustCreate(t, s, p)
	at := now()
	var b []store.Issue
	for r := int64(1); r <= 7; r++ {
		b = append(b, issue(p.ID, r, fmt.Sprintf("u%d", r), 1, at))
	}
	if _, err := s.IssueBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	all := allEvents(t, s)
	if len(all) != 14 {
		t.Fatalf("%d events, want 14", len(all))
	}
	issued := allEvents(t, s, store.EventClaimIssued)
	if len(issued) != 7 {
		t.Fatalf("%d claim.issued events, want 7", len(issued))
	}
	for _, e := range issued {
		if e.Type != store.EventClaimIssued {
			t.Fatalf("filter let %s through", e.Type)
		}
	}
	last := all[len(all)-1].Seq
	if evs, err := s.Events(ctx, last, nil, 10); err != nil || len(evs) != 0 {
		t.Fatalf("Events past the end = %d, %v", len(evs), err)
	}
	if evs, err := s.Events(ctx, 0, nil, 0); err != nil || len(evs) != 0 {
		t.Fatalf("Events with limit 0 = %d, %v", len(evs), err)
	}
	if evs, err := s.Events(ctx, 0, []string{"no.such"}, 10); err != nil || len(evs) != 0 {
		t.Fatalf("Events of an unknown type = %d, %v", len(evs), err)
	}
}

// testEventsConcurrentWriters pages through the feed while writers issue
// batches: the reader must end up with every event once, in seq order,
// whatever order the writers' transactions commit in.
func testEventsConcurrentWriters(t *testing.T, s store.Store) {
	ctx := t.Context()
	const writers, batches, size = 4, 10, 5
	for w := range writers {
		mustCreate(t, s, promo(fmt.Sprintf("cw%d", w)))
	}
	var (
		wg   sync.WaitGroup
		done = make(chan struct{})
		errs = make(chan error, writers)
	)
	for w := range writers {
		wg.Go(func() {
			id := fmt.Sprintf("cw%d", w)
			for n := range batches {
				b := make([]store.Issue, size)
				for i := range b {
					r := int64(n*size + i + 1)
					b[i] = issue(id, r, fmt.Sprintf("u%d", r), 1, now())
				}
				if _, err := s.IssueBatch(ctx, b); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()

	seen := map[string]bool{}
	var after int64
	read := func() int {
		page, err := s.Events(ctx, after, nil, 7)
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		for _, e := range page {
			if e.Seq <= after {
				t.Fatalf("seq %d after %d", e.Seq, after)
			}
			if seen[e.ID] {
				t.Fatalf("event %s read twice", e.ID)
			}
			seen[e.ID] = true
			after = e.Seq
		}
		return len(page)
	}
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		read()
	}
	for read() > 0 {
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if want := writers * batches * size * 2; len(seen) != want {
		t.Fatalf("read %d events, want %d: a reader paging by seq skipped some", len(seen), want)
	}
}

func testEventCursors(t *testing.T, s store.Store) {
	ctx := t.Context()
	seq, ok, err := s.LeaseEvents(ctx, "crm", "a", time.Minute)
	if err != nil || !ok || seq != 0 {
		t.Fatalf("first lease = %d, %v, %v", seq, ok, err)
	}
	if _, ok, err := s.LeaseEvents(ctx, "crm", "b", time.Minute); err != nil || ok {
		t.Fatalf("lease held by a taken by b: %v, %v", ok, err)
	}
	if ok, err := s.SetEventCursor(ctx, "crm", "b", 9); err != nil || ok {
		t.Fatalf("b moved a's cursor: %v, %v", ok, err)
	}
	for _, n := range []int64{5, 3} {
		if ok, err := s.SetEventCursor(ctx, "crm", "a", n); err != nil || !ok {
			t.Fatalf("SetEventCursor(%d) = %v, %v", n, ok, err)
		}
	}
	// Renewing keeps the cursor, which never went back.
	if seq, ok, err := s.LeaseEvents(ctx, "crm", "a", time.Minute); err != nil || !ok || seq != 5 {
		t.Fatalf("renewed lease = %d, %v, %v; want 5", seq, ok, err)
	}
	// Another subscriber is apart.
	if seq, ok, err := s.LeaseEvents(ctx, "erp", "b", time.Minute); err != nil || !ok || seq != 0 {
		t.Fatalf("erp lease = %d, %v, %v", seq, ok, err)
	}
	if err := s.ReleaseEvents(ctx, "crm", "a"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.SetEventCursor(ctx, "crm", "a", 6); err != nil || ok {
		t.Fatalf("a moved the cursor after releasing: %v, %v", ok, err)
	}
	if seq, ok, err := s.LeaseEvents(ctx, "crm", "b", time.Minute); err != nil || !ok || seq != 5 {
		t.Fatalf("b's lease after the release = %d, %v, %v; want 5", seq, ok, err)
	}
	// A lease that ran out is taken by another owner.
	if _, ok, err := s.LeaseEvents(ctx, "short", "a", time.Millisecond); err != nil || !ok {
		t.Fatalf("short lease = %v, %v", ok, err)
	}
	wait.For(t, 10*time.Second, "a lease that ran out taken over", func() bool {
		_, ok, err := s.LeaseEvents(ctx, "short", "b", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
}

func testPruneEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, id := range []string{"pr1", "pr2", "pr3"} {
		if _, err := s.AppendPromotionEvent(ctx, promotionEvent(store.EventPromotionOpened, id)); err != nil {
			t.Fatal(err)
		}
	}
	evs := allEvents(t, s)
	later := time.Now().Add(time.Hour)
	for _, sub := range []string{"a", "b"} {
		if _, ok, err := s.LeaseEvents(ctx, sub, "me", time.Minute); err != nil || !ok {
			t.Fatalf("lease %s: %v, %v", sub, ok, err)
		}
	}
	mustSet := func(sub string, seq int64) {
		t.Helper()
		if ok, err := s.SetEventCursor(ctx, sub, "me", seq); err != nil || !ok {
			t.Fatalf("SetEventCursor(%s, %d) = %v, %v", sub, seq, ok, err)
		}
	}
	mustSet("a", evs[2].Seq)
	mustSet("b", evs[1].Seq)
	// A subscriber never delivered to holds everything back.
	if n, err := s.PruneEvents(ctx, later, []string{"a", "b", "new"}, 100); err != nil || n != 0 {
		t.Fatalf("PruneEvents with a new subscriber = %d, %v; want 0", n, err)
	}
	// Only events every subscriber passed go: b is the slowest.
	if n, err := s.PruneEvents(ctx, later, []string{"a", "b"}, 100); err != nil || n != 2 {
		t.Fatalf("PruneEvents = %d, %v; want 2", n, err)
	}
	wantEvents(t, "pruned", allEvents(t, s), "promotion.opened pr3")
	// Nothing newer than before goes.
	if n, err := s.PruneEvents(ctx, time.Now().Add(-time.Hour), nil, 100); err != nil || n != 0 {
		t.Fatalf("PruneEvents of old events = %d, %v; want 0", n, err)
	}
	// A pruned event's seq is never handed out again.
	if _, err := s.AppendPromotionEvent(ctx, promotionEvent(store.EventPromotionEnded, "pr4")); err != nil {
		t.Fatal(err)
	}
	if evs2 := allEvents(t, s); evs2[len(evs2)-1].Seq <= evs[2].Seq {
		t.Fatalf("seq %d handed out again", evs2[len(evs2)-1].Seq)
	}
	// Without subscribers, age alone decides.
	if n, err := s.PruneEvents(ctx, later, nil, 100); err != nil || n != 2 {
		t.Fatalf("PruneEvents by age = %d, %v; want 2", n, err)
	}
}
