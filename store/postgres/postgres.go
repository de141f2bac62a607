package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/internal/sqlstore"
)

// Defaults for [Config].
const (
	// DefaultMaxConns is the pool size when neither Config.MaxConns nor the
	// URL's pool_max_conns sets one.
	DefaultMaxConns = 16
	// DefaultConnectTimeout bounds one connection attempt when neither
	// Config.ConnectTimeout nor the URL's connect_timeout sets it.
	DefaultConnectTimeout = 5 * time.Second
)

// Config configures a [Store].
type Config struct {
	// URL is the connection string: postgres://user:pass@host:port/db?...
	// (or the key=value form). Every libpq and pgxpool parameter is honoured,
	// pool_max_conns and connect_timeout included. Required.
	URL string
	// MaxConns is the maximum number of open connections. Defaults to the
	// URL's pool_max_conns, or DefaultMaxConns (16).
	MaxConns int32
	// ConnectTimeout bounds one connection attempt. Defaults to the URL's
	// connect_timeout, or DefaultConnectTimeout (5s).
	ConnectTimeout time.Duration
}

func (c Config) validate() error {
	if c.URL == "" {
		return errors.New("postgres: Config.URL is required")
	}
	if c.MaxConns < 0 {
		return fmt.Errorf("postgres: Config.MaxConns must not be negative, got %d", c.MaxConns)
	}
	if c.ConnectTimeout < 0 {
		return fmt.Errorf("postgres: Config.ConnectTimeout must not be negative, got %s", c.ConnectTimeout)
	}
	return nil
}

// poolConfig parses the URL and applies the defaults on top of what the URL
// leaves unset.
func (c Config) poolConfig() (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(c.URL)
	if err != nil {
		// The parse error may quote the URL; it is the caller's own input.
		return nil, fmt.Errorf("postgres: Config.URL: %w", err)
	}
	switch {
	case c.MaxConns > 0:
		pc.MaxConns = c.MaxConns
	case !strings.Contains(c.URL, "pool_max_conns"):
		pc.MaxConns = DefaultMaxConns
	}
	switch {
	case c.ConnectTimeout > 0:
		pc.ConnConfig.ConnectTimeout = c.ConnectTimeout
	case pc.ConnConfig.ConnectTimeout == 0:
		pc.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	return pc, nil
}

// Store is the PostgreSQL [store.Store]. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

var _ store.Store = (*Store)(nil)

// New returns a store on a connection pool for cfg. Connections are opened
// on first use, so New succeeds while the database is down; call
// [Store.Ping] to check it answers and [Store.Migrate] to apply the schema.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pc, err := cfg.poolConfig()
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, wrapErr("open pool", err)
	}
	return &Store{pool: pool}, nil
}

// Open opens a store for a postgres:// or postgresql:// URL with the
// default Config.
func Open(ctx context.Context, url string) (*Store, error) {
	return New(ctx, Config{URL: url})
}

// Pool returns the connection pool, for callers that need to run their own
// queries (tests, tooling).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return wrapErr("ping", s.pool.Ping(ctx))
}

// Close releases the connections.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// wrapErr names the operation and marks errors that mean the database
// cannot be reached right now with store.ErrUnavailable.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if Unavailable(err) {
		return fmt.Errorf("postgres: %s: %w: %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// Unavailable reports whether err means the database cannot take the
// operation right now, whatever its data, so it may succeed later: a
// connection refused, reset or lost, a timeout, an error pgx knows was raised
// before anything was sent, or a server error whose SQLSTATE
// [TransientSQLState] reports. A context cancelled by the caller, or a
// store.ErrClaimMismatch, is not an outage.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return err != nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, store.ErrClaimMismatch) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return TransientSQLState(pgErr.Code)
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "conn closed")
}

// TransientSQLState reports whether a server error with this SQLSTATE is
// about the database's state rather than the statement's data, so the same
// statement may succeed later:
//
//   - class 08, connection exception;
//   - class 28, invalid authorization (credentials rotated or pg_hba.conf
//     being changed), and 3D000, the database does not exist (yet);
//   - class 40, transaction rollback: serialization failure, deadlock;
//   - class 53, insufficient resources: disk full, out of memory, too many
//     connections;
//   - class 57, operator intervention: query cancelled or statement timeout,
//     shutdown, the server starting up;
//   - class 58, system error: I/O errors;
//   - 25006, a read-only transaction (a standby, or a database made read-only
//     during a failover), 25P03 and 25P04, a session or transaction timed out;
//   - 55P03, a lock not available (lock_timeout, NOWAIT), and 55006, an
//     object in use;
//   - 72000, snapshot too old.
//
// Everything else, unique and check violations (class 23) and data
// exceptions (class 22) among it, is not transient.
func TransientSQLState(code string) bool {
	if len(code) != 5 {
		return false
	}
	switch code[:2] {
	case "08", "28", "40", "53", "57", "58":
		return true
	}
	switch code {
	case "3D000", "25006", "25P03", "25P04", "55P03", "55006", "72000":
		return true
	}
	return false
}

// pgTime is how a time is sent: UTC at microsecond precision, truncated like
// the SQLite store does (PostgreSQL itself would round).
func pgTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// pgNullTime sends the zero time as NULL.
func pgNullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := pgTime(t)
	return &u
}

func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// pgTimes is how the shared row mapping sends and reads times: timestamptz
// as time.Time, nullable ones as *time.Time, read back in UTC.
var pgTimes = sqlstore.Times[time.Time, *time.Time]{
	Encode:     pgTime,
	EncodeNull: pgNullTime,
	Decode:     func(t time.Time) (time.Time, error) { return t.UTC(), nil },
	DecodeNull: func(t *time.Time) (time.Time, error) { return utc(t), nil },
}

func init() {
	open := func(ctx context.Context, url string) (store.Store, error) {
		s, err := Open(ctx, url)
		if err != nil {
			return nil, err // not a typed nil inside the interface
		}
		return s, nil
	}
	store.Register("postgres", open)
	store.Register("postgresql", open)
}
