package promotion_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
)

// lateClose is a store whose ClosePromotion first waits for before: the
// re-checks that a close's news causes run before the database holds it.
type lateClose struct {
	store.Store
	before func()
}

func (s lateClose) ClosePromotion(ctx context.Context, id string, at time.Time) (store.Promotion, error) {
	s.before()
	return s.Store.ClosePromotion(ctx, id, at)
}

// TestCloseDrainsQuietPromotion: an admin's close of a promotion the loop
// left quiet (idle, re-checked in full only every IdleRecheckInterval)
// drains it within a few re-checks, however late the database's write of
// the close comes after Redis's: the instance is told once the database
// holds it. Told before, the re-check read the promotion still open and
// left it quiet for the idle interval.
func TestCloseDrainsQuietPromotion(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", db)
			var tick func(int)
			w.st = lateClose{Store: w.st, before: func() { tick(5) }}
			m := w.startManager(t, promotion.Config{Instance: "a", RecheckInterval: 20 * time.Millisecond,
				IdleRecheckInterval: time.Hour})
			tick = rechecks(t, m)
			create(t, m, promotion.Promotion{ID: "quiet", Stock: 5})
			tick(10) // found idle, and the loss probe ran after
			if _, err := m.Close(context.Background(), "quiet"); err != nil {
				t.Fatal(err)
			}
			wait.For(t, 20*time.Second, "the closed promotion drained", func() bool {
				p, err := w.st.GetPromotion(context.Background(), "quiet")
				return err == nil && p.Drained
			})
		})
	}
}

// heldList is a store whose ListUndrained, once armed, hands the loop its
// read and then waits for release: a change made meanwhile comes after the
// re-check read the database.
type heldList struct {
	store.Store
	armed   atomic.Bool
	read    chan struct{}
	release chan struct{}
}

func (s *heldList) ListUndrained(ctx context.Context) ([]store.Promotion, error) {
	list, err := s.Store.ListUndrained(ctx)
	if s.armed.CompareAndSwap(true, false) {
		close(s.read)
		<-s.release
	}
	return list, err
}

// TestCloseDuringRecheckDrains: a close whose news comes while a re-check
// runs on what it read before the close does not let that re-check mark
// the promotion quiet from the stale read; the next re-check sees it closed
// and drains it. The re-check cleared the wake after reading the database
// before, marked the promotion quiet, and the next probe hid it for the
// idle interval.
func TestCloseDuringRecheckDrains(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	hl := &heldList{Store: w.st, read: make(chan struct{}), release: make(chan struct{})}
	w.st = hl
	m := w.startManager(t, promotion.Config{Instance: "a", RecheckInterval: 20 * time.Millisecond,
		IdleRecheckInterval: time.Hour})
	tick := rechecks(t, m)
	create(t, m, promotion.Promotion{ID: "quiet", Stock: 5})
	tick(10) // found idle, and the loss probe ran after
	hl.armed.Store(true)
	<-hl.read
	if _, err := m.Close(context.Background(), "quiet"); err != nil {
		t.Fatal(err)
	}
	close(hl.release)
	wait.For(t, 20*time.Second, "the closed promotion drained", func() bool {
		p, err := hl.Store.GetPromotion(context.Background(), "quiet")
		return err == nil && p.Drained
	})
}
