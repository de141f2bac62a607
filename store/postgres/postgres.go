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

// Unavailable reports whether err means the database cannot be reached
// right now, so the operation may succeed later: a connection refused,
// reset or lost, a timeout, an error pgx knows was raised before anything
// was sent, or a server error of class 08 (connection exception), 57P01-03
// (the server is shutting down or starting) or 53300 (too many connections).
// A context cancelled by the caller is not an outage.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return err != nil
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"),
			pgErr.Code == "57P01", // admin_shutdown
			pgErr.Code == "57P02", // crash_shutdown
			pgErr.Code == "57P03", // cannot_connect_now
			pgErr.Code == "53300": // too_many_connections
			return true
		}
		return false
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
