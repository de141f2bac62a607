package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
)

// The multi-row insert's text depends on its row count, and SQLite compiles
// a statement's text anew each time it is run unprepared: with a batch of
// a few rows that compiling is a good part of the insert's cost. So the
// writer keeps one prepared insert per row count, and a batch is inserted in
// pieces whose row counts come from a small, fixed set.
const (
	// insertChunk is the most rows one INSERT carries. Each row binds
	// issueCols variables; SQLite allows 32766 per statement, so 1000 rows
	// stay far below the limit while keeping statements short.
	insertChunk = 1000
	// maxSmallInsert bounds the small row counts kept prepared: a batch is
	// cut into pieces of insertChunk rows, then of maxSmallInsert rows,
	// then the rest. Stream batches (10 claims by default) fit in one piece.
	maxSmallInsert = 64
	issueCols      = 7
)

// insertRows is how many of n rows still to insert the next piece takes.
func insertRows(n int) int {
	switch {
	case n >= insertChunk:
		return insertChunk
	case n > maxSmallInsert:
		return maxSmallInsert
	}
	return n
}

// insertSQL is the insert of n rows.
func insertSQL(n int) string {
	var b strings.Builder
	// A claim an admin voided is never issued: its unit went back to stock.
	b.WriteString(`INSERT INTO issued (claim_id, promotion_id, user_id, rank, slot, accepted_at, issued_at)
		SELECT column1, column2, column3, column4, column5, column6, column7 FROM (VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`(?,?,?,?,?,?,?)`)
	}
	b.WriteString(`) WHERE NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.claim_id = column1 AND d.state = 'voided')
		ON CONFLICT DO NOTHING RETURNING claim_id, promotion_id, user_id, rank, slot`)
	return b.String()
}

// insertStmts holds the writer's prepared inserts, one per row count
// insertRows can return (so at most maxSmallInsert+1 of them), each made
// the first time it is needed. The group loop goroutine owns it: only that
// goroutine inserts issues, and Close closes the statements once the loop
// has stopped.
//
// The writer has one connection and a transaction holds it, so a statement
// cannot be prepared while the transaction that first needs it is open:
// that transaction runs the insert unprepared and notes the row count, and
// prepareMissed prepares it once the transaction is over.
//
// The grant inserts (insertCodes, insertLedger) have one text whatever
// their row count and are kept prepared the same way, by text.
type insertStmts struct {
	db         *sql.DB
	byRows     map[int]*sql.Stmt
	byText     map[string]*sql.Stmt
	missed     []int        // row counts run unprepared since the last prepareMissed
	missedText []string     // texts run unprepared since the last prepareMissed
	prepared   atomic.Int64 // statements prepared so far; read by tests
}

func newInsertStmts(db *sql.DB) *insertStmts {
	return &insertStmts{db: db, byRows: make(map[int]*sql.Stmt), byText: make(map[string]*sql.Stmt)}
}

// queryText runs the statement of text in tx with args, prepared if it was
// prepared before.
func (c *insertStmts) queryText(ctx context.Context, tx *sql.Tx, text string, args ...any) (*sql.Rows, error) {
	if st := c.byText[text]; st != nil {
		return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	if !slices.Contains(c.missedText, text) {
		c.missedText = append(c.missedText, text)
	}
	return tx.QueryContext(ctx, text, args...)
}

// query runs the insert of n rows in tx with args (n × issueCols of them).
func (c *insertStmts) query(ctx context.Context, tx *sql.Tx, n int, args []any) (*sql.Rows, error) {
	if st := c.byRows[n]; st != nil {
		return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	if !slices.Contains(c.missed, n) {
		c.missed = append(c.missed, n)
	}
	return tx.QueryContext(ctx, insertSQL(n), args...)
}

// prepareMissed prepares the inserts that ran unprepared, for the next
// transactions. It must be called with no transaction open on the writer.
// A statement that fails to prepare (the schema not migrated yet, the store
// closing) is left to be tried again the next time it is missed.
func (c *insertStmts) prepareMissed(ctx context.Context) {
	for _, n := range c.missed {
		if st, err := c.db.PrepareContext(ctx, insertSQL(n)); err == nil {
			c.byRows[n] = st
			c.prepared.Add(1)
		}
	}
	c.missed = c.missed[:0]
	for _, text := range c.missedText {
		if st, err := c.db.PrepareContext(ctx, text); err == nil {
			c.byText[text] = st
			c.prepared.Add(1)
		}
	}
	c.missedText = c.missedText[:0]
}

// close closes every prepared insert.
func (c *insertStmts) close() error {
	var errs []error
	for n, st := range c.byRows {
		errs = append(errs, st.Close())
		delete(c.byRows, n)
	}
	for text, st := range c.byText {
		errs = append(errs, st.Close())
		delete(c.byText, text)
	}
	return errors.Join(errs...)
}
