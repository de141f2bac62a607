package promotion_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
)

// forgetIssuedAbove deletes the promotion's issued rows above rank, as a
// restore of the database from a backup taken before they were written
// would.
func forgetIssuedAbove(t *testing.T, e *rbEnv, id string, rank int64) {
	t.Helper()
	ctx := context.Background()
	if path, ok := strings.CutPrefix(e.url, "sqlite://"); ok {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, `DELETE FROM issued WHERE promotion_id = ? AND rank > ?`, id, rank); err != nil {
			t.Fatal(err)
		}
		return
	}
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DELETE FROM issued WHERE promotion_id = $1 AND rank > $2`, id, rank); err != nil {
		t.Fatal(err)
	}
}

// TestDatabaseBehindRedisHalts: the database is restored from a backup
// older than Redis, losing claims Redis saw confirmed into it. The
// promotion is halted — claims answer ErrRebuilding, and no automatic
// rebuild resumes it however many re-checks pass — until an operator's
// rebuild accepts the database; then claims go on above every rank handed
// out, and the users whose rows the database lost still hold their slot.
func TestDatabaseBehindRedisHalts(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			var halts, clears atomic.Int64
			e := rbSetupWith(t, rbOpts{db: db, onHalted: func(id string, halted bool) {
				if id != "behind" {
					return
				}
				if halted {
					halts.Add(1)
				} else {
					clears.Add(1)
				}
			}})
			ctx := context.Background()
			e.create(t, promotion.Promotion{ID: "behind", Stock: 20, PerUserLimit: 1})
			for i := 1; i <= 6; i++ {
				e.mustClaim(t, "behind", fmt.Sprintf("u%d", i))
			}
			e.waitSettled(t, "behind", 6, 0)
			e.waitAcked(t, "behind", 6)
			if halts.Load() != 0 {
				t.Fatal("halted before the database lost anything")
			}
			wait.For(t, 10*time.Second, "a re-check of the healthy promotion", func() bool { return clears.Load() > 0 })

			forgetIssuedAbove(t, e, "behind", 3)
			wait.For(t, 10*time.Second, "the promotion halted", func() bool { return halts.Load() > 0 })
			marks, err := e.m.Gate().Marks(ctx, []string{"behind"})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(marks[0].Halted, "rank 6") || !marks[0].Rebuilding {
				t.Fatalf("marks after the loss: %+v, want rebuilding and halted naming rank 6", marks[0])
			}
			// Many re-checks later it is still halted: nothing resumes it
			// behind the operator's back.
			seen := halts.Load()
			wait.For(t, 10*time.Second, "five more re-checks", func() bool { return halts.Load() >= seen+5 })
			if _, err := e.m.Claim(ctx, "behind", "n1", ""); !errors.Is(err, claim.ErrRebuilding) {
				t.Fatalf("claim while halted: %v, want ErrRebuilding", err)
			}
			select {
			case r := <-e.rebuilt:
				t.Fatalf("rebuilt while halted: %+v", r)
			default:
			}

			rep, err := e.m.Rebuild(ctx, "behind")
			if err != nil {
				t.Fatalf("operator's rebuild: %v", err)
			}
			if rep.Seq != 6 {
				t.Fatalf("operator's rebuild: seq %d, want 6 (nothing lowered)", rep.Seq)
			}
			// Re-checks after the operator's decision leave it running.
			before := clears.Load()
			wait.For(t, 10*time.Second, "a re-check seeing the halt lifted", func() bool { return clears.Load() > before })
			if r := e.mustClaim(t, "behind", "n1"); r.Rank != 7 {
				t.Fatalf("n1 after the rebuild got rank %d, want 7", r.Rank)
			}
			if _, err := e.m.Claim(ctx, "behind", "u5", ""); !errors.Is(err, claim.ErrAlreadyClaimed) {
				t.Fatalf("u5, whose row the database lost: %v, want ErrAlreadyClaimed", err)
			}
			wait.For(t, 30*time.Second, "n1 issued", func() bool {
				rows, err := e.st.ListIssued(ctx, "behind", "n1")
				return err == nil && len(rows) == 1
			})
			halted := halts.Load()
			before = clears.Load()
			wait.For(t, 10*time.Second, "a re-check after n1 was issued", func() bool { return clears.Load() > before })
			if halts.Load() != halted {
				t.Fatal("halted again after the operator accepted the database")
			}
		})
	}
}
