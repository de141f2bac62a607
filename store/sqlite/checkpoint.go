package sqlite

import (
	"context"
	"database/sql"
	"sync/atomic"
)

// Checkpoints. In WAL mode a commit appends the pages it changed to the
// write-ahead log, and a checkpoint copies the log's pages back into the
// database file (with synchronous=normal, syncing the log before and the
// file after). SQLite's automatic checkpoint runs inside the commit that
// makes the log reach its threshold: on the one writer's connection, so
// the group writer stopped issuing while it copied. Here a checkpointer
// goroutine with a connection of its own runs them, beside the writer (a
// PASSIVE checkpoint never blocks a write transaction), and the writer's
// own automatic checkpoint is left as a bound on the log's size only.
const (
	// DefaultCheckpointClaims is how many claims the group writer commits
	// between two requests for a checkpoint. A claim changes about two to
	// four pages, so this is about 4,000 to 8,000 pages of log (16 to 32
	// MiB at 4 KiB pages): a page changed many times in that window is
	// copied once.
	DefaultCheckpointClaims = 2048
	// writerAutocheckpoint is the log size, in pages, at which the writer
	// checkpoints by itself, as SQLite's automatic checkpoint does (the
	// default threshold is 1,000). It is reached only if the checkpointer
	// falls behind, or if the log never empties: a checkpoint that runs
	// while commits go on ends short of the newest pages, and the log
	// starts over from its beginning only after a checkpoint that copied
	// all of it; the writer's own checkpoint, between two transactions,
	// does. 16,384 pages bound the log to about 64 MiB.
	writerAutocheckpoint = 16384
)

// checkpointer runs PASSIVE checkpoints on its own connection, one each
// time the group writer asks (see kick); requests made while one runs
// fold into one.
type checkpointer struct {
	db    *sql.DB
	kick  chan struct{} // buffered (1): the writer never waits
	every int           // claims committed between two requests
	since int           // claims committed since the last request; the group loop owns it
	runs  atomic.Int64  // checkpoints run; read by tests
}

func newCheckpointer(db *sql.DB, every int) *checkpointer {
	return &checkpointer{db: db, kick: make(chan struct{}, 1), every: every}
}

// committed is called by the group loop after each commit of n claims; it
// asks for a checkpoint once every claims have been committed since the
// last request.
func (c *checkpointer) committed(n int) {
	c.since += n
	if c.since < c.every {
		return
	}
	c.since = 0
	select {
	case c.kick <- struct{}{}:
	default: // one is asked for already
	}
}

// loop runs checkpoints until stopping is closed. A checkpoint that fails
// (the database busy with another process's checkpoint, or closing) is
// left to the next request, or to the writer's own bound.
func (c *checkpointer) loop(ctx context.Context, stopping <-chan struct{}) {
	for {
		select {
		case <-c.kick:
			if _, err := c.db.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err == nil {
				c.runs.Add(1)
			}
		case <-stopping:
			return
		}
	}
}
