package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/store"
)

// Dead letters: recording, paging, transitions, replays and voids, and how they meet issuing.

func deadLetter(promotionID, claim string, rank int64, at time.Time) store.DeadLetter {
	return store.DeadLetter{
		ClaimID:     claim,
		PromotionID: promotionID,
		UserID:      "user-" + claim,
		Rank:        rank,
		Slot:        1,
		Reason:      "handler failed",
		Deliveries:  5,
		State:       store.DeadFailed,
		At:          at,
		Fields: map[string]string{
			"claim_id": claim, "user": "user-" + claim,
			"rank": fmt.Sprint(rank), "slot": "1", "at": "1764000000000",
		},
	}
}

// deadLetterOf is the dead letter of the claim is: a claim that was
// dead-lettered and issued, in either order, under one claim id.
func deadLetterOf(is store.Issue, at time.Time) store.DeadLetter {
	d := deadLetter(is.PromotionID, is.ClaimID, is.Rank, at)
	d.UserID, d.Slot = is.UserID, is.Slot
	d.Fields["user"], d.Fields["slot"] = is.UserID, fmt.Sprint(is.Slot)
	return d
}

func equalDeadLetters(t *testing.T, what string, got, want []store.DeadLetter) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d dead letters %v, want %d", what, len(got), claimIDs(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.At.Equal(w.At) || g.At.Location() != time.UTC {
			t.Errorf("%s[%d].At = %v, want %v in UTC", what, i, g.At, w.At)
		}
		g.At, w.At = time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s[%d]:\n got %+v\nwant %+v", what, i, g, w)
		}
	}
}

func claimIDs(ds []store.DeadLetter) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ClaimID
	}
	return out
}

// testDeadLetters walks the dead letters of one promotion through their
// states: recorded, replayed, failed again, voided, replayed all at once.
func testDeadLetters(t *testing.T, s store.Store) {
	w := recordDeadLetters(t, s)
	w.replayOne()
	w.voidOne()
	w.replayAll()
	// The other promotion was not touched.
	ctx := t.Context()
	other, err := s.ListDeadLetters(ctx, "dl-other", "", 10)
	if err != nil || len(other) != 1 {
		t.Fatalf("other promotion's dead letters = %v, %v; want 1", claimIDs(other), err)
	}
	for _, to := range []string{store.DeadFailed, "", "bogus"} {
		if _, err := s.TransitionDeadLetters(ctx, "dl-other", nil, to); err == nil {
			t.Errorf("TransitionDeadLetters to %q: no error", to)
		}
	}
	if other, _ := s.ListDeadLetters(ctx, "dl-other", "", 10); len(other) != 1 {
		t.Fatalf("a rejected transition moved claims: %v", claimIDs(other))
	}
}

// deadLetterWalk is testDeadLetters's promotion "dl": a, b and c are its
// dead letters as the store should hold them.
type deadLetterWalk struct {
	t       *testing.T
	s       store.Store
	a, b, c store.DeadLetter
}

// recordDeadLetters records a, b and c (and one of another promotion);
// recording again updates one row.
func recordDeadLetters(t *testing.T, s store.Store) *deadLetterWalk {
	t.Helper()
	at := now()
	w := &deadLetterWalk{t: t, s: s}
	w.a, w.b, w.c = deadLetter("dl", "dl#1", 1, at), deadLetter("dl", "dl#2", 2, at), deadLetter("dl", "dl#3", 3, at)
	w.c.Fields = nil // a malformed entry may have nothing worth keeping
	for _, d := range []store.DeadLetter{w.c, w.a, w.b, deadLetter("dl-other", "dl-other#1", 1, at)} {
		if err := s.RecordDeadLetter(t.Context(), d); err != nil {
			t.Fatalf("RecordDeadLetter(%s): %v", d.ClaimID, err)
		}
	}
	equalDeadLetters(t, "recorded", w.list(), []store.DeadLetter{w.a, w.b, w.c})

	// Recording again updates reason, deliveries and time, keeping one row.
	w.a.Reason, w.a.Deliveries, w.a.At = "timeout", 7, at.Add(time.Minute)
	w.record(w.a)
	equalDeadLetters(t, "re-recorded", w.list(), []store.DeadLetter{w.a, w.b, w.c})
	return w
}

// list is the failed dead letters of "dl".
func (w *deadLetterWalk) list() []store.DeadLetter {
	w.t.Helper()
	ds, err := w.s.ListDeadLetters(w.t.Context(), "dl", "", 100)
	if err != nil {
		w.t.Fatalf("ListDeadLetters: %v", err)
	}
	return ds
}

func (w *deadLetterWalk) record(d store.DeadLetter) {
	w.t.Helper()
	if err := w.s.RecordDeadLetter(w.t.Context(), d); err != nil {
		w.t.Fatal(err)
	}
}

// replayOne replays a, which leaves the failed list once and comes back
// when it fails again.
func (w *deadLetterWalk) replayOne() {
	t, s, ctx := w.t, w.s, w.t.Context()
	t.Helper()
	moved, err := s.TransitionDeadLetters(ctx, "dl", []string{"dl#1", "dl#missing"}, store.DeadReplayed)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	w.a.State = store.DeadReplayed
	equalDeadLetters(t, "replayed", moved, []store.DeadLetter{w.a})
	equalDeadLetters(t, "after replay", w.list(), []store.DeadLetter{w.b, w.c})

	// Replaying it again moves nothing.
	moved, err = s.TransitionDeadLetters(ctx, "dl", []string{"dl#1"}, store.DeadReplayed)
	if err != nil || len(moved) != 0 {
		t.Fatalf("second replay moved %v, %v; want none", claimIDs(moved), err)
	}

	// The replayed claim fails again: back to failed.
	w.a.State, w.a.Reason, w.a.Deliveries = store.DeadFailed, "failed again", 5
	w.record(w.a)
	equalDeadLetters(t, "failed again", w.list(), []store.DeadLetter{w.a, w.b, w.c})
}

// voidOne voids b: it stays voided even when recorded again.
func (w *deadLetterWalk) voidOne() {
	t, s, ctx := w.t, w.s, w.t.Context()
	t.Helper()
	moved, err := s.TransitionDeadLetters(ctx, "dl", []string{"dl#2"}, store.DeadVoided)
	if err != nil {
		t.Fatalf("void: %v", err)
	}
	w.b.State = store.DeadVoided
	equalDeadLetters(t, "voided", moved, []store.DeadLetter{w.b})
	again := w.b
	again.State, again.Reason = store.DeadFailed, "late failure"
	w.record(again)
	equalDeadLetters(t, "after recording a voided claim", w.list(), []store.DeadLetter{w.a, w.c})
	if moved, err := s.TransitionDeadLetters(ctx, "dl", []string{"dl#2"}, store.DeadReplayed); err != nil || len(moved) != 0 {
		t.Fatalf("replaying a voided claim moved %v, %v; want none", claimIDs(moved), err)
	}
}

// replayAll: an empty list moves nothing; nil moves every failed claim of
// the promotion.
func (w *deadLetterWalk) replayAll() {
	t, s, ctx := w.t, w.s, w.t.Context()
	t.Helper()
	if moved, err := s.TransitionDeadLetters(ctx, "dl", []string{}, store.DeadVoided); err != nil || len(moved) != 0 {
		t.Fatalf("empty claim list moved %v, %v; want none", claimIDs(moved), err)
	}
	moved, err := s.TransitionDeadLetters(ctx, "dl", nil, store.DeadReplayed)
	if err != nil {
		t.Fatalf("replay all: %v", err)
	}
	w.a.State, w.c.State = store.DeadReplayed, store.DeadReplayed
	equalDeadLetters(t, "replay all", moved, []store.DeadLetter{w.a, w.c})
	equalDeadLetters(t, "after replay all", w.list(), nil)
}

func testDeadLettersPaging(t *testing.T, s store.Store) {
	ctx := t.Context()
	at := now()
	var want []string
	for i := range 10 {
		d := deadLetter("page", fmt.Sprintf("page#%02d", i), int64(i), at)
		want = append(want, d.ClaimID)
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	after := ""
	for range 20 {
		ds, err := s.ListDeadLetters(ctx, "page", after, 4)
		if err != nil {
			t.Fatalf("ListDeadLetters: %v", err)
		}
		if len(ds) > 4 {
			t.Fatalf("page of %d, limit 4", len(ds))
		}
		if len(ds) == 0 {
			break
		}
		got = append(got, claimIDs(ds)...)
		after = ds[len(ds)-1].ClaimID
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
	if ds, err := s.ListDeadLetters(ctx, "page", "", 0); err != nil || len(ds) != 0 {
		t.Fatalf("limit 0 gave %v, %v; want none", claimIDs(ds), err)
	}
}

// testDeadLetterMismatch records dead letters under claim ids the database
// holds for other claims (a claim id reused after Redis lost writes): each
// is refused with ErrClaimMismatch and nothing is written, whether the
// stored claim is a failed, voided or issued one; the same claim is
// recorded as usual.
func testDeadLetterMismatch(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("dm"))
	at := now()
	failed, voided := deadLetter("dm", "dm#1", 1, at), deadLetter("dm", "dm#2", 2, at)
	issued := issue("dm", 3, "c", 1, at)
	for _, d := range []store.DeadLetter{failed, voided} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.TransitionDeadLetters(ctx, "dm", []string{"dm#2"}, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	if _, err := s.IssueBatch(ctx, []store.Issue{issued}); err != nil {
		t.Fatal(err)
	}
	voided.State = store.DeadVoided

	others := func(d store.DeadLetter) map[string]store.DeadLetter {
		d.Reason, d.Deliveries, d.At = "another claim", 9, at.Add(time.Minute)
		d.Fields = map[string]string{"claim_id": d.ClaimID, "user": "intruder"}
		user, rank, slot, promotion := d, d, d, d
		user.UserID = "intruder"
		rank.Rank++
		slot.Slot++
		promotion.PromotionID = "dm-other"
		return map[string]store.DeadLetter{"user": user, "rank": rank, "slot": slot, "promotion": promotion}
	}
	for _, stored := range []store.DeadLetter{failed, voided, deadLetterOf(issued, at)} {
		for what, d := range others(stored) {
			err := s.RecordDeadLetter(ctx, d)
			if !errors.Is(err, store.ErrClaimMismatch) || errors.Is(err, store.ErrUnavailable) {
				t.Errorf("RecordDeadLetter(%s with another %s) = %v, want ErrClaimMismatch", d.ClaimID, what, err)
			}
		}
	}
	list := func(what string, want ...store.DeadLetter) {
		t.Helper()
		ds, err := s.ListDeadLetters(ctx, "dm", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		equalDeadLetters(t, what, ds, want)
	}
	list("after the refused claims", failed)
	if c, err := s.Counts(ctx, "dm"); err != nil || c != (store.Counts{Issued: 1, Failed: 1, Voided: 1}) {
		t.Fatalf("Counts = %+v, %v; want 1 issued, 1 failed, 1 voided", c, err)
	}
	if ds, err := s.ListDeadLetters(ctx, "dm-other", "", 10); err != nil || len(ds) != 0 {
		t.Fatalf("dead letters of dm-other = %v, %v; want none", claimIDs(ds), err)
	}

	// The same claims are recorded as before: the failed one updated, the
	// voided one left voided, the issued one dead-lettered as well.
	failed.Reason, failed.Deliveries = "failed again", 6
	sameVoided := voided
	sameVoided.State = store.DeadFailed
	issuedDead := deadLetterOf(issued, at)
	for _, d := range []store.DeadLetter{failed, sameVoided, issuedDead} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatalf("RecordDeadLetter(%s), the same claim: %v", d.ClaimID, err)
		}
	}
	list("after the same claims", failed, issuedDead)
}

// testTransitionConcurrent races replays against voids over the same
// claims: every claim must be moved exactly once in total.
func testTransitionConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 200
	at := now()
	var all []string
	for i := range n {
		d := deadLetter("race", fmt.Sprintf("race#%03d", i), int64(i+1), at)
		all = append(all, d.ClaimID)
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	const callers = 8
	var (
		wg    sync.WaitGroup
		moved = make([][]store.DeadLetter, callers)
		errs  = make([]error, callers)
	)
	for c := range callers {
		to := store.DeadReplayed
		if c%2 == 1 {
			to = store.DeadVoided
		}
		var claims []string // half the callers name the claims, half take all
		if c%4 < 2 {
			claims = slices.Clone(all)
			rnd := rand.New(rand.NewPCG(uint64(c), 11))
			rnd.Shuffle(len(claims), func(i, j int) { claims[i], claims[j] = claims[j], claims[i] })
			claims = claims[:n*3/4]
		}
		wg.Go(func() {
			moved[c], errs[c] = s.TransitionDeadLetters(ctx, "race", claims, to)
			for _, d := range moved[c] {
				if d.State != to {
					errs[c] = errors.Join(errs[c], fmt.Errorf("%s moved to %s, reported as %s", d.ClaimID, to, d.State))
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, ds := range moved {
		for _, d := range ds {
			if prev, ok := seen[d.ClaimID]; ok {
				t.Errorf("claim %s moved twice (%s, then %s)", d.ClaimID, prev, d.State)
			}
			seen[d.ClaimID] = d.State
		}
	}
	if len(seen) != n {
		t.Fatalf("%d claims moved, want %d", len(seen), n)
	}
	voided := 0
	for _, st := range seen {
		if st == store.DeadVoided {
			voided++
		}
	}
	c, err := s.Counts(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	if c != (store.Counts{Voided: int64(voided)}) {
		t.Fatalf("Counts = %+v, want %d voided and nothing failed", c, voided)
	}
}

// testUnappliedDeadLetters follows moved dead letters until their side
// effect is recorded: listed oldest move first across promotions, bounded
// by movedBefore and limit, and gone once applied or failed again.
// testIssueSkipsVoided: a claim an admin voided (its unit went back to
// stock) is never issued afterwards, even by a stray redelivery: it is a
// Conflict, and the other claims of the batch are issued as usual.
func testIssueSkipsVoided(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("iv"))
	at := now()
	d := deadLetter("iv", "iv#1", 1, at)
	d.UserID = "a"
	if err := s.RecordDeadLetter(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransitionDeadLetters(ctx, "iv", []string{"iv#1"}, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	outs, err := s.IssueBatch(ctx, []store.Issue{issue("iv", 1, "a", 1, at), issue("iv", 2, "b", 1, at)})
	if err != nil || !slices.Equal(outs, []store.Outcome{store.Conflict, store.Inserted}) {
		t.Fatalf("IssueBatch = %v, %v; want [conflict inserted]", outs, err)
	}
	if c, err := s.Counts(ctx, "iv"); err != nil || c != (store.Counts{Issued: 1, Voided: 1}) {
		t.Fatalf("Counts = %+v, %v; want 1 issued, 1 voided", c, err)
	}
}

// testVoidSkipsIssued dead-letters claims whose issue committed (its
// acknowledgement lost): voiding must skip them, or their unit would go back
// to stock while they hold it; replaying them is allowed.
func testVoidSkipsIssued(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("vi"))
	at := now()
	if _, err := s.IssueBatch(ctx, []store.Issue{issue("vi", 1, "a", 1, at), issue("vi", 3, "c", 1, at)}); err != nil {
		t.Fatal(err)
	}
	d1, d2, d3 := deadLetterOf(issue("vi", 1, "a", 1, at), at), deadLetter("vi", "vi#2", 2, at), deadLetterOf(issue("vi", 3, "c", 1, at), at)
	for _, d := range []store.DeadLetter{d1, d2, d3} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}

	moved, err := s.TransitionDeadLetters(ctx, "vi", []string{"vi#1", "vi#2"}, store.DeadVoided)
	if err != nil {
		t.Fatalf("void named: %v", err)
	}
	d2.State = store.DeadVoided
	equalDeadLetters(t, "void named", moved, []store.DeadLetter{d2})
	moved, err = s.TransitionDeadLetters(ctx, "vi", nil, store.DeadVoided)
	if err != nil || len(moved) != 0 {
		t.Fatalf("void all moved %v, %v; want none (both left are issued)", claimIDs(moved), err)
	}
	failed, err := s.ListDeadLetters(ctx, "vi", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	equalDeadLetters(t, "still failed", failed, []store.DeadLetter{d1, d3})
	// Listed for an admin, but their units are counted once, as issued.
	if c, err := s.Counts(ctx, "vi"); err != nil || c != (store.Counts{Issued: 2, Failed: 0, Voided: 1}) {
		t.Fatalf("Counts = %+v, %v; want 2 issued, 0 failed, 1 voided", c, err)
	}

	moved, err = s.TransitionDeadLetters(ctx, "vi", nil, store.DeadReplayed)
	if err != nil {
		t.Fatalf("replay all: %v", err)
	}
	d1.State, d3.State = store.DeadReplayed, store.DeadReplayed
	equalDeadLetters(t, "replay all", moved, []store.DeadLetter{d1, d3})
	pending, err := s.ListUnappliedDeadLetters(ctx, time.Now().Add(time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := claimIDs(pending); !slices.Equal(got, []string{"vi#2", "vi#1", "vi#3"}) {
		t.Fatalf("unapplied = %v, want [vi#2 vi#1 vi#3]", got)
	}
}
