package promotion_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
)

// TestSegmentsNormalize: segments default to 1, stay within 1..64, and
// are refused with a waiting room or for grants.
func TestSegmentsNormalize(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tt := range []struct {
		name string
		p    promotion.Promotion
		want int    // segments after Normalize
		bad  string // field of the ValidationError, "" for none
	}{
		{"default", promotion.Promotion{Stock: 10}, 1, ""},
		{"three", promotion.Promotion{Stock: 10, Segments: 3}, 3, ""},
		{"max", promotion.Promotion{Stock: 10, Segments: promotion.MaxSegments}, promotion.MaxSegments, ""},
		{"too many", promotion.Promotion{Stock: 10, Segments: promotion.MaxSegments + 1}, 0, "segments"},
		{"negative", promotion.Promotion{Stock: 10, Segments: -1}, 0, "segments"},
		{"waiting room", promotion.Promotion{Stock: 10, Segments: 2, WaitingRoom: promotion.WaitingRoom{Enabled: true}}, 0, "segments"},
		{"waiting room, one segment", promotion.Promotion{Stock: 10, Segments: 1, WaitingRoom: promotion.WaitingRoom{Enabled: true}}, 1, ""},
		{"grant", promotion.Promotion{Mode: promotion.ModeGrant, Segments: 2}, 0, "segments"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			err := promotion.Normalize(&p, now)
			var ve *promotion.ValidationError
			switch {
			case tt.bad != "" && (!errors.As(err, &ve) || ve.Field != tt.bad):
				t.Fatalf("Normalize: %v, want a ValidationError of %s", err, tt.bad)
			case tt.bad == "" && err != nil:
				t.Fatalf("Normalize: %v", err)
			case tt.bad == "" && p.Segments != tt.want:
				t.Fatalf("segments %d, want %d", p.Segments, tt.want)
			}
		})
	}
}

// TestSegmentsSeedScenario is the seed's race with segments on, on the
// three-master Cluster: 3,000 users, each claiming twice, through three
// instances, for 1,000 units in three segments. Exactly 1,000 claims are
// accepted, no user holds two, every accepted claim is issued once in the
// database, the promotion shows sold_out only once every segment is empty
// with nothing in flight, and, closed, it drains over all its segments.
func TestSegmentsSeedScenario(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "cluster", "postgres")
	ms := []*promotion.Manager{w.manager(t, "a", nil), w.manager(t, "b", nil), w.manager(t, "c", nil)}
	ctx := context.Background()
	const id, users, stock = "seg-seed", 3000, 1000
	create(t, ms[0], promotion.Promotion{ID: id, Stock: stock, Segments: 3})
	v, err := ms[1].Get(ctx, id)
	if err != nil || v.Segments != 3 || v.State != promotion.StateOpen || *v.Counts.Remaining != stock {
		t.Fatalf("view before claims: %+v, %v", v, err)
	}

	type answer struct {
		user string
		c    promotion.Claimed
		err  error
	}
	answers := make(chan answer, 2*users)
	sem := make(chan struct{}, 96)
	var wg sync.WaitGroup
	for i := range users {
		for j := range 2 {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				u := "u" + strconv.Itoa(i)
				c, err := ms[(i+j)%3].Claim(ctx, id, u, "")
				answers <- answer{u, c, err}
			})
		}
	}
	wg.Wait()
	close(answers)
	accepted := map[string]promotion.Claimed{}
	ranks := map[int64]bool{}
	for a := range answers {
		switch {
		case a.err == nil:
			if _, dup := accepted[a.user]; dup {
				t.Fatalf("user %s accepted twice", a.user)
			}
			if ranks[a.c.Rank] {
				t.Fatalf("rank %d twice", a.c.Rank)
			}
			accepted[a.user], ranks[a.c.Rank] = a.c, true
		case errors.Is(a.err, promotion.ErrSoldOut), errors.Is(a.err, promotion.ErrAlreadyClaimed):
		default:
			t.Fatalf("claim of %s: %v", a.user, a.err)
		}
	}
	if len(accepted) != stock {
		t.Fatalf("%d accepted, want %d", len(accepted), stock)
	}
	v = waitCounts(t, ms[2], id, stock, 0)
	if v.State != promotion.StateSoldOut || *v.Counts.Remaining != 0 || v.Counts.Accepted != stock {
		t.Fatalf("view after the race: state %s, counts %+v", v.State, v.Counts)
	}
	segs := claim.SegmentsOf(id, 3)
	st, err := ms[0].Gate().SegmentStates(ctx, segs)
	if err != nil {
		t.Fatal(err)
	}
	for k, x := range st {
		if x.Remaining() != 0 || x.InFlight != 0 {
			t.Fatalf("segment %d sold out with %d remaining, %d in flight", k, x.Remaining(), x.InFlight)
		}
	}
	// Every accepted claim is issued once, under its claim id.
	for u, c := range accepted {
		rows, err := w.st.ListIssued(ctx, id, u)
		if err != nil || len(rows) != 1 || rows[0].ClaimID != c.ClaimID || rows[0].Rank != c.Rank {
			t.Fatalf("rows of %s: %+v, %v; want one of %s", u, rows, err, c.ClaimID)
		}
		cs, err := ms[1].UserClaims(ctx, id, u)
		if err != nil || len(cs) != 1 || cs[0].ClaimID != c.ClaimID || cs[0].Status != promotion.StatusIssued {
			t.Fatalf("claims of %s: %+v, %v", u, cs, err)
		}
		break // one user's read path; the rows of the rest below
	}
	for u, c := range accepted {
		rows, err := w.st.ListIssued(ctx, id, u)
		if err != nil || len(rows) != 1 || rows[0].ClaimID != c.ClaimID {
			t.Fatalf("rows of %s: %+v, %v; want one of %s", u, rows, err, c.ClaimID)
		}
	}
	if _, err := ms[0].Claim(ctx, id, "late", ""); !errors.Is(err, promotion.ErrSoldOut) {
		t.Fatalf("late claim: %v, want ErrSoldOut", err)
	}
	// Closed, it drains over every segment.
	if _, err := ms[0].Close(ctx, id); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 30*time.Second, "the promotion to drain", func() bool {
		ps, err := w.st.ListUndrained(ctx)
		if err != nil {
			return false
		}
		for _, p := range ps {
			if p.ID == id {
				return false
			}
		}
		return true
	})
}

// TestSegmentsRefusedChanges: a promotion with segments takes no change of
// stock, end or pause, no revoke and no requested rebuild yet — each a
// ValidationError of segments that changes nothing.
func TestSegmentsRefusedChanges(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "cluster", "sqlite")
	m := w.manager(t, "a", nil)
	ctx := context.Background()
	create(t, m, promotion.Promotion{ID: "seg-change", Stock: 10, Segments: 2})
	stock := int64(20)
	_, err1 := m.Patch(ctx, "seg-change", promotion.Change{Stock: &stock})
	_, err2 := m.Revoke(ctx, "seg-change", []string{"seg-change#1"})
	_, err3 := m.Rebuild(ctx, "seg-change")
	for i, err := range []error{err1, err2, err3} {
		var ve *promotion.ValidationError
		if !errors.As(err, &ve) || ve.Field != "segments" {
			t.Errorf("change %d: %v, want a ValidationError of segments", i, err)
		}
	}
	if v, err := m.Get(ctx, "seg-change"); err != nil || v.Stock != 10 || *v.Counts.Remaining != 10 {
		t.Fatalf("after refused changes: %+v, %v", v, err)
	}
}
