package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/dibsio/dibs/internal/startstop"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/internal/sqlstore"
)

// Defaults for [Config].
const (
	// DefaultSynchronous is SQLite's synchronous setting used when none is given.
	DefaultSynchronous = SynchronousNormal
	// DefaultBusyTimeout is how long a statement waits for another process's
	// lock before failing with [store.ErrUnavailable].
	DefaultBusyTimeout = 5 * time.Second
	// DefaultReadConns is the size of the read pool.
	DefaultReadConns = 4
	// DefaultGroupQueue is how many IssueBatch calls may wait for the writer.
	DefaultGroupQueue = 64
	// DefaultMaxGroupIssues bounds the issues one grouped transaction carries.
	DefaultMaxGroupIssues = 4096
)

// writerCacheKiB is the writer connection's page cache, in KiB (SQLite's
// default is 2,000).
const writerCacheKiB = 32768

// Values of [Config.Synchronous].
const (
	// SynchronousNormal syncs the write-ahead log only at checkpoints: a
	// commit survives a crash of dibs, but the last commits may be lost if the
	// machine itself loses power.
	SynchronousNormal = "normal"
	// SynchronousFull syncs the write-ahead log at every commit: a commit
	// survives a power loss, at the cost of one fsync per transaction.
	SynchronousFull = "full"
)

// Config configures a [Store].
type Config struct {
	// Path is the database file; it is created if absent. Required.
	Path string
	// Synchronous is SQLite's synchronous setting: SynchronousNormal or
	// SynchronousFull (see their comments for what each can lose).
	// Defaults to DefaultSynchronous ("normal").
	Synchronous string
	// BusyTimeout is how long a statement waits for a lock held by another
	// process before it fails. Defaults to DefaultBusyTimeout (5s).
	BusyTimeout time.Duration
	// ReadConns is the number of connections that serve reads; writes always
	// go through one connection. Defaults to DefaultReadConns (4).
	ReadConns int
	// GroupQueue is how many IssueBatch calls may wait for the writer; more
	// callers block until there is room (or their context ends).
	// Defaults to DefaultGroupQueue (64).
	GroupQueue int
	// MaxGroupIssues bounds the issues of the IssueBatch calls that one
	// transaction groups together. Defaults to DefaultMaxGroupIssues (4096).
	MaxGroupIssues int
	// CheckpointClaims is how many claims the group writer commits between
	// two checkpoints, which a goroutine of their own runs beside the
	// writer (see checkpoint.go). Defaults to DefaultCheckpointClaims (2048).
	CheckpointClaims int
}

func (c Config) withDefaults() Config {
	if c.Synchronous == "" {
		c.Synchronous = DefaultSynchronous
	}
	c.Synchronous = strings.ToLower(c.Synchronous)
	if c.BusyTimeout == 0 {
		c.BusyTimeout = DefaultBusyTimeout
	}
	if c.ReadConns == 0 {
		c.ReadConns = DefaultReadConns
	}
	if c.GroupQueue == 0 {
		c.GroupQueue = DefaultGroupQueue
	}
	if c.MaxGroupIssues == 0 {
		c.MaxGroupIssues = DefaultMaxGroupIssues
	}
	if c.CheckpointClaims == 0 {
		c.CheckpointClaims = DefaultCheckpointClaims
	}
	return c
}

func (c Config) validate() error {
	if c.Path == "" {
		return errors.New("sqlite: Config.Path is required")
	}
	if strings.ContainsAny(c.Path, "?#") {
		return fmt.Errorf("sqlite: Config.Path %q must not contain '?' or '#'", c.Path)
	}
	if c.Synchronous != SynchronousNormal && c.Synchronous != SynchronousFull {
		return fmt.Errorf("sqlite: Config.Synchronous must be %q or %q, got %q", SynchronousNormal, SynchronousFull, c.Synchronous)
	}
	if c.BusyTimeout < 0 {
		return fmt.Errorf("sqlite: Config.BusyTimeout must not be negative, got %s", c.BusyTimeout)
	}
	if c.ReadConns < 0 {
		return fmt.Errorf("sqlite: Config.ReadConns must not be negative, got %d", c.ReadConns)
	}
	if c.GroupQueue < 0 {
		return fmt.Errorf("sqlite: Config.GroupQueue must not be negative, got %d", c.GroupQueue)
	}
	if c.MaxGroupIssues < 0 {
		return fmt.Errorf("sqlite: Config.MaxGroupIssues must not be negative, got %d", c.MaxGroupIssues)
	}
	if c.CheckpointClaims < 0 {
		return fmt.Errorf("sqlite: Config.CheckpointClaims must not be negative, got %d", c.CheckpointClaims)
	}
	return nil
}

// ParseURL turns a database URL into a Config. The form is
// sqlite://PATH[?synchronous=normal|full&busy_timeout=DURATION&read_conns=N]:
// sqlite://dibs.db is relative to the working directory and
// sqlite:///var/lib/dibs/dibs.db is absolute.
func ParseURL(rawURL string) (Config, error) {
	rest, ok := strings.CutPrefix(rawURL, "sqlite://")
	if !ok {
		return Config{}, fmt.Errorf("sqlite: URL %q must start with sqlite://", rawURL)
	}
	path, query, _ := strings.Cut(rest, "?")
	if path == "" {
		return Config{}, fmt.Errorf("sqlite: URL %q has no path", rawURL)
	}
	cfg := Config{Path: path}
	q, err := url.ParseQuery(query)
	if err != nil {
		return Config{}, fmt.Errorf("sqlite: URL %q: %w", rawURL, err)
	}
	for key, vals := range q {
		v := vals[len(vals)-1]
		switch key {
		case "synchronous":
			cfg.Synchronous = v
		case "busy_timeout":
			d, err := time.ParseDuration(v)
			if err != nil {
				return Config{}, fmt.Errorf("sqlite: URL parameter busy_timeout: %w", err)
			}
			cfg.BusyTimeout = d
		case "read_conns":
			n, err := strconv.Atoi(v)
			if err != nil {
				return Config{}, fmt.Errorf("sqlite: URL parameter read_conns: %w", err)
			}
			cfg.ReadConns = n
		default:
			return Config{}, fmt.Errorf("sqlite: unknown URL parameter %q", key)
		}
	}
	return cfg, nil
}

// Open parses rawURL with [ParseURL] and opens the store with [New].
func Open(ctx context.Context, rawURL string) (*Store, error) {
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg)
}

// Store is the SQLite [store.Store]. It is safe for concurrent use.
type Store struct {
	// w is the one writer: a pool of exactly one connection whose
	// transactions start with BEGIN IMMEDIATE, so every write in this process
	// is serialised and a write transaction never has to upgrade a read lock
	// (which is what makes SQLite fail with SQLITE_BUSY under contention).
	w *sql.DB
	// r serves reads; in WAL mode readers never block the writer nor each other.
	r *sql.DB

	// The group writer (group.go): IssueBatch calls queue on reqs and the
	// loop goroutine, started by New and stopped by Close, runs them.
	reqs           chan *issueReq
	maxGroupIssues int
	life           startstop.Base  // runs the group loop
	ckpt           *checkpointer   // runs the checkpoints on a connection of its own
	ckptLife       startstop.Base  // runs ckpt's loop
	inserts        *insertStmts    // the loop's prepared inserts; closed by Close
	loopCtx        context.Context // cancelled by Close: aborts a running group
	stopLoop       context.CancelFunc
	closeOnce      sync.Once
	closeErr       error
	groups         atomic.Int64 // transactions the loop ran; read by tests
}

var _ store.Store = (*Store)(nil)

// New opens (creating if needed) the database file and returns the store. It
// does not apply the schema: call [Store.Migrate].
func New(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w, r, c, err := openPools(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &Store{
		w:              w,
		r:              r,
		reqs:           make(chan *issueReq, cfg.GroupQueue),
		maxGroupIssues: cfg.MaxGroupIssues,
		inserts:        newInsertStmts(w),
		ckpt:           newCheckpointer(c, cfg.CheckpointClaims),
	}
	s.loopCtx, s.stopLoop = context.WithCancel(context.Background())
	if err := s.ckptLife.Start(func(stopping <-chan struct{}) { s.ckpt.loop(s.loopCtx, stopping) }); err != nil {
		s.stopLoop()
		return nil, errors.Join(fmt.Errorf("sqlite: start the checkpointer: %w", err), c.Close(), r.Close(), w.Close())
	}
	if err := s.life.Start(s.groupLoop); err != nil {
		s.stopLoop()
		_ = s.ckptLife.Stop(context.Background())
		return nil, errors.Join(fmt.Errorf("sqlite: start the group writer: %w", err), c.Close(), r.Close(), w.Close())
	}
	return s, nil
}

// openPools opens the database's three connection pools: the one writer
// (connected first, which creates the file and switches it to WAL before
// any reader opens it), the readers and the checkpointer's connection. On
// failure it closes what it opened.
func openPools(ctx context.Context, cfg Config) (w, r, c *sql.DB, err error) {
	writeDSN, readDSN, ckptDSN := dsns(cfg)
	w, err = sql.Open("sqlite", writeDSN)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := w.PingContext(ctx); err != nil {
		_ = w.Close()
		return nil, nil, nil, wrapErr("open "+cfg.Path, err)
	}
	r, err = sql.Open("sqlite", readDSN)
	if err != nil {
		_ = w.Close()
		return nil, nil, nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, err)
	}
	r.SetMaxOpenConns(cfg.ReadConns)
	r.SetMaxIdleConns(cfg.ReadConns)
	c, err = sql.Open("sqlite", ckptDSN)
	if err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, nil, nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, err)
	}
	c.SetMaxOpenConns(1)
	c.SetMaxIdleConns(1)
	return w, r, c, nil
}

// dsns returns the data source names of the writer, the readers and the
// checkpointer: the file and the pragmas each connection runs with.
func dsns(cfg Config) (write, read, ckpt string) {
	busy := strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10)
	write = cfg.Path + "?" + url.Values{
		"_pragma": {
			"busy_timeout(" + busy + ")",
			"journal_mode(WAL)",
			"synchronous(" + strings.ToUpper(cfg.Synchronous) + ")",
			// A multi-row insert inside a transaction keeps a statement
			// journal of the pages it changes; in memory rather than in
			// a temporary file, it costs no system calls.
			"temp_store(MEMORY)",
			// The checkpointer copies the log back; the writer does only
			// when it fell far behind (see checkpoint.go).
			"wal_autocheckpoint(" + strconv.Itoa(writerAutocheckpoint) + ")",
			// The issue path's keys (the users', the codes') take new
			// entries at random places: a larger page cache keeps more of
			// their pages, so fewer inserts read a page back from the file
			// or the log. Pages are allotted only as they are used.
			"cache_size(" + strconv.Itoa(-writerCacheKiB) + ")",
		},
		"_txlock": {"immediate"},
	}.Encode()
	read = cfg.Path + "?" + url.Values{
		"_pragma": {
			"busy_timeout(" + busy + ")",
			"query_only(1)",
		},
	}.Encode()
	ckpt = cfg.Path + "?" + url.Values{
		"_pragma": {
			"busy_timeout(" + busy + ")",
			"synchronous(" + strings.ToUpper(cfg.Synchronous) + ")",
		},
	}.Encode()
	return write, read, ckpt
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.r.PingContext(ctx); err != nil {
		return wrapErr("ping", err)
	}
	return nil
}

// Close stops the group writer, failing IssueBatch calls still waiting with
// ErrClosed, and the checkpointer, and releases the connections. Closing twice is harmless.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stopLoop()
		_ = s.life.Stop(context.Background()) // no deadline: the loop returns once its group is aborted
		_ = s.ckptLife.Stop(context.Background())
		s.closeErr = errors.Join(s.inserts.close(), s.ckpt.db.Close(), s.r.Close(), s.w.Close())
	})
	return s.closeErr
}

// inTx runs fn in one write transaction (BEGIN IMMEDIATE on the writer) and
// commits it if fn returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// wrapErr names the operation and marks errors that mean the database cannot
// be used right now (see transientCode) with store.ErrUnavailable, so callers
// retry them later instead of treating them as permanent.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrAlreadyExists) || errors.Is(err, store.ErrUnavailable) {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if unavailable(err) {
		return fmt.Errorf("sqlite: %s: %w: %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("sqlite: %s: %w", op, err)
}

// unavailable reports whether err is a SQLite error whose result code
// transientCode reports. A context cancelled by the caller is not an outage.
func unavailable(err error) bool {
	var se *sqlite.Error
	if errors.Is(err, context.Canceled) || !errors.As(err, &se) {
		return false
	}
	return transientCode(se.Code())
}

// transientCode reports whether a SQLite result code (extended or primary)
// is about the database file's state rather than the statement's data, so
// the same statement may succeed later: locked by another connection or
// process beyond the busy timeout (BUSY, LOCKED), interrupted (INTERRUPT,
// ABORT), out of memory (NOMEM), the file read-only, unopenable or not
// permitted (READONLY, CANTOPEN, PERM), disk I/O errors and a full disk
// (IOERR, FULL), a lock protocol failure (PROTOCOL), the schema changed under
// a prepared statement (SCHEMA), and a damaged file (CORRUPT, NOTADB), which
// no claim can get past until an operator repairs it. Constraint violations
// (CONSTRAINT), type mismatches and SQL errors are not transient.
func transientCode(code int) bool {
	switch code & 0xff { // the primary result code
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_INTERRUPT, sqlite3.SQLITE_ABORT,
		sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM,
		sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_SCHEMA,
		sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// timeLayout is how times are stored: UTC, fixed width, microseconds, so
// that text order is time order and both backends keep the same precision.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

func fmtTime(t time.Time) string {
	return t.UTC().Truncate(time.Microsecond).Format(timeLayout)
}

// fmtNullTime stores the zero time as NULL.
func fmtNullTime(t time.Time) sql.NullString {
	if t.IsZero() {
		return sql.NullString{}
	}
	return sql.NullString{String: fmtTime(t), Valid: true}
}

// parseTime reads a stored time: the form fmtTime writes, or any other
// form sqlstore.ParseTime reads (rows written by other tools or by hand).
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(timeLayout, s); err == nil {
		return t.UTC(), nil
	}
	return sqlstore.ParseTime(s)
}

func parseNullTime(s sql.NullString) (time.Time, error) {
	if !s.Valid {
		return time.Time{}, nil
	}
	return parseTime(s.String)
}

// liteTimes is how the shared row mapping sends and reads times: fixed-width
// text, nullable ones as sql.NullString.
var liteTimes = sqlstore.Times[string, sql.NullString]{
	Encode:     fmtTime,
	EncodeNull: fmtNullTime,
	Decode:     parseTime,
	DecodeNull: parseNullTime,
}

func init() {
	store.Register("sqlite", func(ctx context.Context, url string) (store.Store, error) {
		s, err := Open(ctx, url)
		if err != nil {
			return nil, err // not a typed nil inside the interface
		}
		return s, nil
	})
}
