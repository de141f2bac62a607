package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dibsio/dibs/store"
)

// ErrClosed is returned by IssueBatch calls made on, or still waiting in, a
// closed store.
var ErrClosed = errors.New("sqlite: store closed")

// testHookIssue, set only by tests, runs before each call's inserts; its
// error fails the call as a database error would.
var testHookIssue func(issues []store.Issue) error

// issueCall runs one call's inserts inside tx.
func (s *Store) issueCall(ctx context.Context, tx *sql.Tx, issues []store.Issue, now time.Time) ([]store.Outcome, error) {
	if testHookIssue != nil {
		if err := testHookIssue(issues); err != nil {
			return nil, err
		}
	}
	return issueTx(ctx, tx, s.inserts, issues, now)
}

// issueReq is one IssueBatch call waiting for the group writer.
type issueReq struct {
	ctx    context.Context
	issues []store.Issue
	done   chan issueRes // buffered: the loop never blocks on a caller that left
}

type issueRes struct {
	out []store.Outcome
	err error
}

// IssueBatch writes the issues in one transaction with multi-row
// INSERT OR IGNORE ... RETURNING and reports an Outcome per
// issue, in order: Inserted for the rows written, Duplicate when the same
// claim is already stored with the same content, Conflict otherwise.
//
// Calls are handed to one writer goroutine, which runs the calls that
// queued up while it was busy in one transaction: one commit for many
// batches. A claim present in two calls of one group is Inserted for the
// first and Duplicate for the second, and both are committed together. If a
// grouped transaction fails, each of its calls is retried in a transaction
// of its own, so one call's failure is never another's. A full queue blocks
// the caller until there is room or ctx ends.
func (s *Store) IssueBatch(ctx context.Context, issues []store.Issue) ([]store.Outcome, error) {
	if len(issues) == 0 {
		return []store.Outcome{}, nil
	}
	op := fmt.Sprintf("issue batch of %d", len(issues))
	r := &issueReq{ctx: ctx, issues: issues, done: make(chan issueRes, 1)}
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		return nil, fmt.Errorf("sqlite: %s: %w", op, ctx.Err())
	case <-s.life.Stopping():
		return nil, fmt.Errorf("sqlite: %s: %w", op, ErrClosed)
	}
	select {
	case res := <-r.done:
		if res.err != nil {
			return nil, wrapErr(op, res.err)
		}
		return res.out, nil
	case <-ctx.Done():
		// The batch may still be written; the caller retries and then
		// sees Duplicate outcomes.
		return nil, fmt.Errorf("sqlite: %s: %w", op, ctx.Err())
	case <-s.life.Done():
		// The loop may have answered just before it stopped.
		select {
		case res := <-r.done:
			if res.err != nil {
				return nil, wrapErr(op, res.err)
			}
			return res.out, nil
		default:
			return nil, fmt.Errorf("sqlite: %s: %w", op, ErrClosed)
		}
	}
}

// groupLoop is the group writer: it owns the grouping and runs until Close.
func (s *Store) groupLoop(stopping <-chan struct{}) {
	for {
		select {
		case first := <-s.reqs:
			s.runGroup(first)
		case <-stopping:
			return
		}
	}
}

// runGroup runs first and the calls queued behind it in one transaction.
func (s *Store) runGroup(first *issueReq) {
	ctx := s.loopCtx
	// Once every transaction of the group is over, and the callers have
	// their answers, prepare the inserts the group had to run unprepared.
	defer s.inserts.prepareMissed(ctx)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		first.done <- issueRes{err: err}
		return
	}
	// Calls that arrived while the transaction waited for the writer join it.
	group := []*issueReq{first}
	n := len(first.issues)
collect:
	for n < s.maxGroupIssues {
		select {
		case r := <-s.reqs:
			group = append(group, r)
			n += len(r.issues)
		default:
			break collect
		}
	}
	s.groups.Add(1)

	now := time.Now()
	results := make([]issueRes, len(group))
	var failed error
	for i, r := range group {
		if err := r.ctx.Err(); err != nil {
			results[i].err = err // its caller has gone; write nothing for it
			continue
		}
		out, err := s.issueCall(ctx, tx, r.issues, now)
		if err != nil {
			failed = err
			break
		}
		results[i].out = out
	}
	if failed == nil {
		failed = tx.Commit()
		if failed == nil {
			s.ckpt.committed(n)
			for i, r := range group {
				r.done <- results[i]
			}
			return
		}
	} else {
		_ = tx.Rollback()
	}
	if len(group) == 1 {
		first.done <- issueRes{err: failed}
		return
	}
	// Nothing of the group was written; give each call its own transaction
	// so that one bad call does not fail the others.
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.done <- issueRes{err: err}
			continue
		}
		var out []store.Outcome
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			out, err = s.issueCall(ctx, tx, r.issues, time.Now())
			return err
		})
		s.groups.Add(1)
		if err == nil {
			s.ckpt.committed(len(r.issues))
		}
		r.done <- issueRes{out: out, err: err}
	}
}
