package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
)

// A multi-row insert's text depends on its row count, and SQLite compiles a
// statement's text anew each time it is run unprepared: with a batch of a
// few rows that compiling is a good part of the insert's cost. So the
// writer keeps one prepared statement per row count of each multi-row
// insert (the issued rows, the codes, the events), and a batch is written
// in pieces whose row counts come from a small, fixed set.
const (
	// insertChunk is the most rows one INSERT carries. Each row binds at
	// most issueCols variables; SQLite allows 32766 per statement, so 1000
	// rows stay far below the limit while keeping statements short.
	insertChunk = 1000
	// maxSmallInsert bounds the small row counts kept prepared: a batch is
	// cut into pieces of insertChunk rows, then of the largest power of two
	// between maxSmallInsert and insertChunk that fits, then the rest. A
	// stream batch of 100 claims is one piece of 64 rows and one of 36; its
	// 200 events are pieces of 128, 64 and 8.
	maxSmallInsert = 64
	issueCols      = 7
)

// insertRows is how many of n rows still to insert the next piece takes.
func insertRows(n int) int {
	if n >= insertChunk {
		return insertChunk
	}
	if n <= maxSmallInsert {
		return n
	}
	p := maxSmallInsert
	for 2*p <= n {
		p *= 2
	}
	return p
}

// pieces calls fn with the bounds of each piece of n rows, in order.
func pieces(n int, fn func(start, end int) error) error {
	for start := 0; start < n; {
		end := start + insertRows(n-start)
		if err := fn(start, end); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// multiInsert is a multi-row statement: its text for n rows.
type multiInsert struct {
	text func(n int) string
}

// valuesSQL returns head, then n rows of cols variables each as a VALUES
// list, then tail.
func valuesSQL(head string, cols, n int, tail string) string {
	row := "(?" + strings.Repeat(",?", cols-1) + ")"
	var b strings.Builder
	b.Grow(len(head) + n*(len(row)+1) + len(tail))
	b.WriteString(head)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	b.WriteString(tail)
	return b.String()
}

// insertIssued inserts issued rows and returns the key of each one written.
// A claim an admin voided is never issued: its unit went back to stock.
//
// The issue path's inserts say OR IGNORE where ON CONFLICT DO NOTHING would
// do: a row that hits a unique key is skipped either way, but a statement
// that can fail half-way (a NOT NULL or CHECK constraint left to abort)
// makes SQLite copy every page it changes into a statement journal first
// (5.9 % of the process's CPU in BenchmarkIssueBatch). The rows bound here
// have no NULL in a NOT NULL column and set no column with a CHECK, so the
// constraints OR IGNORE also covers never fire.
var insertIssued = &multiInsert{text: func(n int) string {
	return valuesSQL(`INSERT OR IGNORE INTO issued (claim_id, promotion_id, user_id, rank, slot, accepted_at, issued_at)
		SELECT column1, column2, column3, column4, column5, column6, column7 FROM (VALUES `, issueCols, n,
		`) WHERE NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.claim_id = column1 AND d.state = 'voided')
		RETURNING claim_id, promotion_id, user_id, rank, slot`)
}}

// stmtKey names a prepared statement: a multi-row insert and its row
// count, or a statement text.
type stmtKey struct {
	m    *multiInsert
	n    int
	text string
}

// insertStmts holds the writer's prepared statements: one per multi-row
// insert and row count insertRows can return (so at most maxSmallInsert+4
// of each), and the fixed statements of the issue path by text, each made
// the first time it is needed. The group loop goroutine owns it: only that
// goroutine inserts issues, and Close closes the statements once the loop
// has stopped.
//
// The writer has one connection and a transaction holds it, so a statement
// cannot be prepared while the transaction that first needs it is open:
// that transaction runs it unprepared and notes it, and prepareMissed
// prepares it once the transaction is over.
type insertStmts struct {
	db       *sql.DB
	stmts    map[stmtKey]*sql.Stmt
	missed   []stmtKey    // statements run unprepared since the last prepareMissed
	prepared atomic.Int64 // statements prepared so far; read by tests
}

func newInsertStmts(db *sql.DB) *insertStmts {
	return &insertStmts{db: db, stmts: make(map[stmtKey]*sql.Stmt)}
}

func (k stmtKey) sql() string {
	if k.m != nil {
		return k.m.text(k.n)
	}
	return k.text
}

// stmt returns the prepared statement of k in tx, or nil after noting k as
// missed.
func (c *insertStmts) stmt(ctx context.Context, tx *sql.Tx, k stmtKey) *sql.Stmt {
	if c == nil {
		return nil
	}
	if st := c.stmts[k]; st != nil {
		return tx.StmtContext(ctx, st)
	}
	if !slices.Contains(c.missed, k) {
		c.missed = append(c.missed, k)
	}
	return nil
}

// queryText runs the statement of text in tx with args, prepared if it was
// prepared before. A nil c runs it unprepared.
func (c *insertStmts) queryText(ctx context.Context, tx *sql.Tx, text string, args ...any) (*sql.Rows, error) {
	if st := c.stmt(ctx, tx, stmtKey{text: text}); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, text, args...)
}

// query runs m for n rows in tx with args. A nil c
// runs it unprepared.
func (c *insertStmts) query(ctx context.Context, tx *sql.Tx, m *multiInsert, n int, args []any) (*sql.Rows, error) {
	if st := c.stmt(ctx, tx, stmtKey{m: m, n: n}); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, m.text(n), args...)
}

// exec is query for a statement that returns no rows; it reports the rows
// written.
func (c *insertStmts) exec(ctx context.Context, tx *sql.Tx, m *multiInsert, n int, args []any) (int64, error) {
	var (
		res sql.Result
		err error
	)
	if st := c.stmt(ctx, tx, stmtKey{m: m, n: n}); st != nil {
		res, err = st.ExecContext(ctx, args...)
	} else {
		res, err = tx.ExecContext(ctx, m.text(n), args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// prepareMissed prepares the statements that ran unprepared, for the next
// transactions. It must be called with no transaction open on the writer.
// A statement that fails to prepare (the schema not migrated yet, the store
// closing) is left to be tried again the next time it is missed.
func (c *insertStmts) prepareMissed(ctx context.Context) {
	for _, k := range c.missed {
		if st, err := c.db.PrepareContext(ctx, k.sql()); err == nil {
			c.stmts[k] = st
			c.prepared.Add(1)
		}
	}
	c.missed = c.missed[:0]
}

// close closes every prepared statement.
func (c *insertStmts) close() error {
	var errs []error
	for k, st := range c.stmts {
		errs = append(errs, st.Close())
		delete(c.stmts, k)
	}
	return errors.Join(errs...)
}
