package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// A load run with -stall-db holds the server's database for -stall-for,
// from -stall-at after the first claim, from outside the server: SQLite
// through a second connection to the same file that takes the write lock
// (BEGIN IMMEDIATE), PostgreSQL through another session that locks the
// issued table (LOCK TABLE issued IN ACCESS EXCLUSIVE MODE). Issuance
// stalls; claims go on being answered from Redis, and the server's journal
// of unconfirmed claims keeps them. With -watch (1 s with a stall) the run
// samples the server's /metrics and reports the journal's and the backlog's
// peaks, the journal's drops, and how long after the stall the backlog was
// back to its level before it.

// stallFigures is what a run with -stall-db or -watch measured.
type stallFigures struct {
	DB                string  `json:"db,omitempty"` // the database's kind: sqlite or postgres
	AtS               float64 `json:"at_s,omitempty"`
	HeldS             float64 `json:"held_s,omitempty"`       // how long the lock was held
	LockWaitMs        float64 `json:"lock_wait_ms,omitempty"` // how long taking it waited
	Samples           int     `json:"samples"`
	SamplesFailed     int     `json:"samples_failed,omitempty"`
	JournalDropped    int64   `json:"journal_dropped"`
	JournalClaimsPeak int64   `json:"journal_claims_peak"`
	JournalBytesPeak  int64   `json:"journal_bytes_peak"`
	PendingBefore     int64   `json:"pending_before"` // the backlog's peak before the stall
	PendingPeak       int64   `json:"pending_peak"`
	// CaughtUpAfterMs is from the stall's end until the backlog was back
	// to PendingBefore: every claim accepted during the stall issued. -1:
	// not within the run.
	CaughtUpAfterMs float64 `json:"caught_up_after_ms,omitempty"`
}

// stallTarget is the database to hold: its kind and what opens it.
type stallTarget struct {
	kind string // "sqlite" or "postgres"
	dsn  string // a file name for SQLite, the URL for PostgreSQL
}

// stallBusyTimeout is how long the SQLite connection that takes the write
// lock waits for the server's writer to let it go.
const stallBusyTimeout = time.Minute

// parseStallDB reads a database URL as dibs serve --db takes it:
// sqlite://PATH (its parameters ignored) or postgres://… (postgresql://).
func parseStallDB(raw string) (stallTarget, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return stallTarget{}, fmt.Errorf("-stall-db: %w", err)
	}
	switch u.Scheme {
	case "sqlite":
		path := u.Host + u.Path
		if u.Opaque != "" {
			path = u.Opaque
		}
		if path == "" {
			return stallTarget{}, fmt.Errorf("-stall-db %q: no file", raw)
		}
		return stallTarget{kind: "sqlite", dsn: path + "?_pragma=busy_timeout(" +
			strconv.FormatInt(stallBusyTimeout.Milliseconds(), 10) + ")"}, nil
	case "postgres", "postgresql":
		return stallTarget{kind: "postgres", dsn: raw}, nil
	}
	return stallTarget{}, fmt.Errorf("-stall-db %q: want sqlite://PATH or postgres://…", raw)
}

// stallDone is how the hold of the database went.
type stallDone struct {
	began, ended time.Time // the lock taken, the lock let go
	waited       time.Duration
	err          error
}

// holdDB waits until at, takes the database's lock, holds it for hold and
// lets it go.
func holdDB(ctx context.Context, t stallTarget, at time.Time, hold time.Duration) stallDone {
	timer := time.NewTimer(time.Until(at))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return stallDone{err: ctx.Err()}
	case <-timer.C:
	}
	if t.kind == "postgres" {
		return holdPostgres(ctx, t.dsn, hold)
	}
	return holdSQLite(ctx, t.dsn, hold)
}

// holdSQLite takes the write lock of the file on a connection of its own
// and rolls back after hold.
func holdSQLite(ctx context.Context, dsn string, hold time.Duration) stallDone {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return stallDone{err: err}
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return stallDone{err: err}
	}
	defer conn.Close()
	asked := time.Now()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return stallDone{err: fmt.Errorf("take the write lock: %w", err)}
	}
	d := stallDone{began: time.Now()}
	d.waited = d.began.Sub(asked)
	sleepCtx(ctx, hold)
	_, err = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	d.ended, d.err = time.Now(), err
	return d
}

// holdPostgres locks the issued table in another session and rolls back
// after hold.
func holdPostgres(ctx context.Context, dsn string, hold time.Duration) stallDone {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return stallDone{err: err}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	asked := time.Now()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return stallDone{err: err}
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE issued IN ACCESS EXCLUSIVE MODE"); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return stallDone{err: fmt.Errorf("lock the issued table: %w", err)}
	}
	d := stallDone{began: time.Now()}
	d.waited = d.began.Sub(asked)
	sleepCtx(ctx, hold)
	d.err = tx.Rollback(context.WithoutCancel(ctx))
	d.ended = time.Now()
	return d
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// metricsSample is one reading of a server's /metrics.
type metricsSample struct {
	at                                    time.Duration // since the run began
	journalClaims, journalBytes, dropped  int64
	pending                               int64 // dibs_pending_claims, every promotion
	seenJournal, seenDropped, seenPending bool
}

// parseMetrics reads the journal's and the backlog's series from the
// Prometheus text of /metrics.
func parseMetrics(r io.Reader) (metricsSample, error) {
	var s metricsSample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if i := strings.IndexByte(line, '{'); i >= 0 && i < len(name) {
			name = line[:i]
			_, rest, ok = strings.Cut(line[strings.LastIndexByte(line, '}')+1:], " ")
		}
		if !ok {
			continue
		}
		field := strings.Fields(rest)
		if len(field) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(field[0], 64)
		if err != nil {
			return s, fmt.Errorf("metrics: %q: %w", line, err)
		}
		switch name {
		case "dibs_journal_claims":
			s.journalClaims, s.seenJournal = int64(v), true
		case "dibs_journal_bytes":
			s.journalBytes = int64(v)
		case "dibs_journal_dropped_total":
			s.dropped, s.seenDropped = int64(v), true
		case "dibs_pending_claims":
			s.pending += int64(v)
			s.seenPending = true
		}
	}
	return s, sc.Err()
}

// summarize reads the samples of a run whose database was held from
// stallFrom to stallTo after it began (both 0: not held).
func summarize(samples []metricsSample, stallFrom, stallTo time.Duration) stallFigures {
	f := stallFigures{Samples: len(samples)}
	for _, s := range samples {
		f.JournalClaimsPeak = max(f.JournalClaimsPeak, s.journalClaims)
		f.JournalBytesPeak = max(f.JournalBytesPeak, s.journalBytes)
		f.PendingPeak = max(f.PendingPeak, s.pending)
		f.JournalDropped = max(f.JournalDropped, s.dropped)
		if s.at < stallFrom {
			f.PendingBefore = max(f.PendingBefore, s.pending)
		}
	}
	if stallTo <= 0 {
		return f
	}
	f.CaughtUpAfterMs = -1
	for _, s := range samples {
		if s.at >= stallTo && s.pending <= f.PendingBefore {
			f.CaughtUpAfterMs = float64((s.at - stallTo).Microseconds()) / 1000
			break
		}
	}
	return f
}

// readMetrics reads the server's /metrics once.
func readMetrics(ctx context.Context, hc *http.Client, target string) (metricsSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target+"/metrics", nil)
	if err != nil {
		return metricsSample{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return metricsSample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return metricsSample{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	s, err := parseMetrics(resp.Body)
	if err == nil && !s.seenJournal && !s.seenDropped {
		err = errors.New("GET /metrics: no dibs_journal_claims or dibs_journal_dropped_total")
	}
	return s, err
}

// watch samples a server's /metrics while a run goes on, and holds its
// database if the run asks.
type watch struct {
	start   time.Time
	stop    chan struct{}
	samples chan watched
	stalled chan stallDone // nil without a stall
	kind    string
	file    string // -watch-file
}

// watched is what the sampler read: every sample, the readings that
// failed, and the first failure.
type watched struct {
	samples []metricsSample
	failed  int
	err     error
}

// startWatch starts the sampler every cfg.watch and, with cfg.stallDB, the
// hold of the database at start + cfg.stallAt.
func startWatch(ctx context.Context, cfg loadConfig, start time.Time) (*watch, error) {
	w := &watch{start: start, file: cfg.watchFile, stop: make(chan struct{}), samples: make(chan watched, 1)}
	if cfg.stallDB != "" {
		t, err := parseStallDB(cfg.stallDB)
		if err != nil {
			return nil, err
		}
		w.kind, w.stalled = t.kind, make(chan stallDone, 1)
		go func() { w.stalled <- holdDB(ctx, t, start.Add(cfg.stallAt), cfg.stallFor) }()
	}
	hc := newHTTPClient(1)
	go func() {
		defer hc.CloseIdleConnections()
		var out watched
		tick := time.NewTicker(cfg.watch)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				w.samples <- out
				return
			case <-w.stop:
				w.samples <- out
				return
			case <-tick.C:
			}
			s, err := readMetrics(ctx, hc, cfg.target)
			if err != nil {
				if out.failed++; out.err == nil {
					out.err = err
				}
				continue
			}
			s.at = time.Since(start)
			out.samples = append(out.samples, s)
		}
	}()
	return w, nil
}

// finish waits for the hold of the database to end, takes a last sample,
// stops the sampler and sums up what it read.
func (w *watch) finish(ctx context.Context, target string) (*stallFigures, error) {
	var d stallDone
	if w.stalled != nil {
		d = <-w.stalled
	}
	close(w.stop)
	out := <-w.samples
	hc := newHTTPClient(1)
	defer hc.CloseIdleConnections()
	last, err := readMetrics(ctx, hc, target)
	if err != nil {
		return nil, fmt.Errorf("the last reading of /metrics: %w", err)
	}
	last.at = time.Since(w.start)
	out.samples = append(out.samples, last)
	if out.err != nil {
		fmt.Fprintf(os.Stderr, "claimcost: %d readings of /metrics failed, the first: %v\n", out.failed, out.err)
	}
	if err := writeSamples(w.file, out.samples); err != nil {
		return nil, err
	}
	if d.err != nil {
		return nil, fmt.Errorf("stall the database: %w", d.err)
	}
	var from, to time.Duration
	if w.stalled != nil {
		from, to = d.began.Sub(w.start), d.ended.Sub(w.start)
	}
	f := summarize(out.samples, from, to)
	f.SamplesFailed = out.failed
	if w.stalled != nil {
		f.DB, f.AtS, f.HeldS = w.kind, from.Seconds(), (to - from).Seconds()
		f.LockWaitMs = float64(d.waited.Microseconds()) / 1000
	}
	return &f, nil
}

// writeStalls prints the table of the runs that sampled /metrics (load
// -stall-db or -watch), if any.
func writeStalls(w io.Writer, rows []loadResult) {
	first := true
	for _, r := range rows {
		s := r.Stall
		if s == nil {
			continue
		}
		if first {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| run | database held | claims/s | journal dropped | journal peak: claims | bytes | backlog before → peak | backlog back after the stall | every claim issued after the last answer |")
			fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
			first = false
		}
		held, back := "no", "–"
		if s.DB != "" {
			held = fmt.Sprintf("%s, %.1f s from %.1f s", s.DB, s.HeldS, s.AtS)
			back = "not within the run"
			if s.CaughtUpAfterMs >= 0 {
				back = fmt.Sprintf("%.1f s", s.CaughtUpAfterMs/1000)
			}
		}
		issued := f(r.IssuedAfterMs/1000, 1) + " s"
		if r.IssueTimedOut {
			issued = fmt.Sprintf("> %s s (%d of %d)", f(r.IssuedAfterMs/1000, 0), r.Issued, r.Accepted)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %d | %d → %d | %s | %s |\n", r.Label, held, f(r.ClaimsPerSecond, 0),
			s.JournalDropped, s.JournalClaimsPeak, s.JournalBytesPeak, s.PendingBefore, s.PendingPeak, back, issued)
	}
}

// writeSamples writes the samples to file, one line each: seconds since
// the run began, journal claims, journal bytes, backlog, journal drops
// (nothing without a file).
func writeSamples(file string, samples []metricsSample) error {
	if file == "" {
		return nil
	}
	var b strings.Builder
	b.WriteString("# seconds\tjournal_claims\tjournal_bytes\tbacklog\tjournal_dropped\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "%.1f\t%d\t%d\t%d\t%d\n", s.at.Seconds(), s.journalClaims, s.journalBytes, s.pending, s.dropped)
	}
	return os.WriteFile(file, []byte(b.String()), 0o644)
}
