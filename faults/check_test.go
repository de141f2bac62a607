package faults

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/pgtest"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// env is the Redis and the database of one test, and the test's own
// connections to them (never through a proxy).
type env struct {
	t     *testing.T
	redis *redisserver.Server // nil on a Cluster
	dbURL string              // the test's database, as the test reaches it
	rdb   rueidis.Client
	pool  *pgxpool.Pool
}

// newEnv starts a redis-server with appendfsync always for the test and
// gives it a fresh database in the shared PostgreSQL (or dbURL if not
// empty).
func newEnv(t *testing.T, dbURL string) *env {
	t.Helper()
	srv := redistest.Fresh(t, redisserver.Options{AppendFsync: "always"})
	e := connectEnv(t, rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true, ForceSingleClient: true}, dbURL)
	e.redis = srv
	return e
}

// newClusterEnv gives the test a fresh database in the shared PostgreSQL and
// connects to it and to the Redis Cluster whose seeds are addrs. Its redis
// is nil: the test holds the Cluster's nodes.
func newClusterEnv(t *testing.T, addrs []string) *env {
	t.Helper()
	return connectEnv(t, rueidis.ClientOption{InitAddress: addrs, DisableCache: true}, "")
}

// connectEnv connects the test to Redis with opt and to the database dbURL
// (a fresh one in the shared PostgreSQL if empty).
func connectEnv(t *testing.T, opt rueidis.ClientOption, dbURL string) *env {
	t.Helper()
	e := &env{t: t, dbURL: dbURL}
	if e.dbURL == "" {
		e.dbURL = pgtest.URL(t)
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e.rdb = c
	pool, err := pgxpool.New(context.Background(), e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.pool = pool
	return e
}

// withHost returns the database URL with its host:port replaced, to reach
// it through a proxy.
func withHost(dbURL, hostport string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		panic(err)
	}
	u.Host = hostport
	return u.String()
}

// dbHost returns the host:port of a database URL.
func dbHost(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		panic(err)
	}
	return u.Host
}

// expect says what a test's promotion must look like once the fault is over.
type expect struct {
	promo   string
	stock   int
	perUser int
	// noDeadLetters: the fault was one that must never dead-letter a claim
	// (a database outage, a kill).
	noDeadLetters bool
	// exact: nothing can have been lost, so ranks are 1..n without a gap and
	// Redis's rank counter equals the database's count.
	exact bool
	// soldOut: demand exceeded the stock and every claim was settled, so
	// exactly stock claims were accepted.
	soldOut bool
	// unseen, if set, is the window of ranks (lo, hi] no fence sees after
	// Redis lost writes: answered by one instance before the loss, unknown
	// to another. A claim answered again with such a rank when no stock
	// was left for re-ranking it ends as a failed dead letter saying so;
	// those are allowed (and not counted as taken), nothing else is.
	unseen [2]int64
}

// inUnseenWindow reports whether d is a dead letter of the window no fence
// sees: a rank in x.unseen handed out twice with no stock left.
func (x expect) inUnseenWindow(d row) bool {
	return d.state == "failed" && d.rank > x.unseen[0] && d.rank <= x.unseen[1] &&
		strings.Contains(d.reason, "handed out twice") && strings.Contains(d.reason, "no stock is left")
}

// groupState is what Redis says about a promotion's work stream.
type groupState struct {
	pending       int64
	lastDelivered string
	lastGenerated string
	length        int64
}

func (g groupState) drained() bool { return g.pending == 0 && g.lastDelivered == g.lastGenerated }

func (e *env) group(ctx context.Context, promo string) (groupState, error) {
	k := claim.KeysFor("", promo)
	var g groupState
	info, err := e.rdb.Do(ctx, e.rdb.B().XinfoStream().Key(k.Stream()).Build()).AsMap()
	if err != nil {
		return g, fmt.Errorf("XINFO STREAM: %w", err)
	}
	lg := info["last-generated-id"]
	g.lastGenerated, _ = lg.ToString()
	ln := info["length"]
	g.length, _ = ln.AsInt64()
	groups, err := e.rdb.Do(ctx, e.rdb.B().XinfoGroups().Key(k.Stream()).Build()).ToArray()
	if err != nil {
		return g, fmt.Errorf("XINFO GROUPS: %w", err)
	}
	for _, gr := range groups {
		m, err := gr.AsMap()
		if err != nil {
			return g, err
		}
		name := m["name"]
		if n, _ := name.ToString(); n != claim.Group {
			continue
		}
		p, ld := m["pending"], m["last-delivered-id"]
		g.pending, _ = p.AsInt64()
		g.lastDelivered, _ = ld.ToString()
		return g, nil
	}
	return g, fmt.Errorf("no group %s on %s", claim.Group, k.Stream())
}

// waitDrained waits until every entry of the promotion's work stream has
// been delivered and acknowledged, and no claim's status in Redis is
// pending.
func (e *env) waitDrained(t *testing.T, promo string, within time.Duration, procs ...*dibsProc) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		g, err := e.group(ctx, promo)
		var pendingStatus int
		if err == nil && g.drained() {
			pendingStatus, err = e.pendingStatuses(ctx, promo)
			if err == nil && pendingStatus == 0 {
				cancel()
				return
			}
		}
		cancel()
		last = fmt.Sprintf("%+v, %d claims with status pending in Redis, err %v", g, pendingStatus, err)
		if time.Now().After(deadline) {
			for _, p := range procs {
				t.Logf("%s log tail:\n%s", p.name, p.LogTail(30))
			}
			t.Fatalf("%s not drained after %v: %s", promo, within, last)
		}
		<-tick.C
	}
}

func (e *env) pendingStatuses(ctx context.Context, promo string) (int, error) {
	k := claim.KeysFor("", promo)
	vals, err := e.rdb.Do(ctx, e.rdb.B().Hvals().Key(k.Status()).Build()).AsStrSlice()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range vals {
		if v == "p" {
			n++
		}
	}
	// A promotion of the compact layout keeps a status byte per rank.
	bytes, err := e.rdb.Do(ctx, e.rdb.B().Get().Key(k.StatusBytes()).Build()).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		return 0, err
	}
	return n + strings.Count(bytes, "p"), nil
}

// row is an issued claim or a dead letter in the database.
type row struct {
	claimID, user, state, reason string
	rank                         int64
	slot                         int
}

func (e *env) rows(ctx context.Context, promo string) (issued, dead []row, err error) {
	rs, err := e.pool.Query(ctx, `SELECT claim_id, user_id, rank, slot FROM issued WHERE promotion_id = $1`, promo)
	if err != nil {
		return nil, nil, err
	}
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.claimID, &r.user, &r.rank, &r.slot); err != nil {
			return nil, nil, err
		}
		issued = append(issued, r)
	}
	if err := rs.Err(); err != nil {
		return nil, nil, err
	}
	rs, err = e.pool.Query(ctx, `SELECT claim_id, user_id, rank, slot, state, reason FROM dead_letters WHERE promotion_id = $1`, promo)
	if err != nil {
		return nil, nil, err
	}
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.claimID, &r.user, &r.rank, &r.slot, &r.state, &r.reason); err != nil {
			return nil, nil, err
		}
		dead = append(dead, r)
	}
	return issued, dead, rs.Err()
}

// check waits until nothing is pending, then checks the invariants from the
// database and Redis against what the clients were told: every claim
// answered 202 is issued or visibly dead-lettered, whatever the fault.
func (e *env) check(t *testing.T, l *ledger, x expect, procs ...*dibsProc) {
	t.Helper()
	e.waitDrained(t, x.promo, pick(90*time.Second, 180*time.Second), procs...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	issued, dead, err := e.rows(ctx, x.promo)
	if err != nil {
		// A connection of the pool may have been ended by the fault.
		issued, dead, err = e.rows(ctx, x.promo)
	}
	if err != nil {
		t.Fatalf("read the database: %v", err)
	}
	failed, windowed := 0, 0
	var reasons []string
	for _, d := range dead {
		if x.inUnseenWindow(d) {
			windowed++
			t.Logf("dead letter of the window no fence sees (ranks %d..%d): %s: %s", x.unseen[0]+1, x.unseen[1], d.claimID, d.reason)
			continue
		}
		if d.state == "failed" {
			failed++
		}
		reasons = append(reasons, fmt.Sprintf("%s (%s): %s", d.claimID, d.state, d.reason))
	}

	// Accepted never exceeds the stock.
	if taken := len(issued) + failed; taken > x.stock {
		t.Errorf("oversold: %d issued + %d dead-lettered > stock %d", len(issued), failed, x.stock)
	}
	// No rank and no user slot issued twice; the per-user limit held.
	byRank := map[int64]string{}
	byUser := map[string]int{}
	slots := map[string]bool{}
	for _, r := range issued {
		if other, dup := byRank[r.rank]; dup {
			t.Errorf("rank %d issued twice: %s and %s", r.rank, other, r.claimID)
		}
		byRank[r.rank] = r.claimID
		if r.rank < 1 || r.rank > int64(x.stock) {
			t.Errorf("rank %d of %s outside 1..%d", r.rank, r.claimID, x.stock)
		}
		us := r.user + "/" + strconv.Itoa(r.slot)
		if slots[us] {
			t.Errorf("user %s slot %d issued twice", r.user, r.slot)
		}
		slots[us] = true
		byUser[r.user]++
	}
	for u, n := range byUser {
		if n > x.perUser {
			t.Errorf("user %s holds %d issued claims, limit %d", u, n, x.perUser)
		}
	}
	// Every claim answered 202 is issued or visibly dead-lettered: under its
	// own claim id and user (a dead letter whose id another claim holds is
	// stored as <claim id>~<user>), or (a claim re-ranked or resolved after
	// Redis lost history) as an issued claim of its user. A claim id alone
	// is not enough: after a loss, its rank may be another user's.
	rows := map[string]bool{}
	for _, r := range issued {
		rows[r.claimID+"~"+r.user] = true
	}
	for _, d := range dead {
		rows[d.claimID+"~"+d.user] = true
		rows[d.claimID] = true
	}
	accepted := l.accepted()
	answeredUsers := map[string]bool{}
	resolved := 0
	for at, a := range accepted {
		answeredUsers[at.user] = true
		if rows[a.claimID+"~"+at.user] {
			continue
		}
		if byUser[at.user] > 0 {
			resolved++
			continue
		}
		t.Errorf("claim %s of %s answered 202 (%v) is neither issued nor dead-lettered", a.claimID, at.user, a)
	}
	// Nothing was issued to a user who was never told 202.
	for u := range byUser {
		if !answeredUsers[u] {
			t.Errorf("user %s holds an issued claim but was never answered 202", u)
		}
	}
	if x.noDeadLetters && len(dead)-windowed > 0 {
		sort.Strings(reasons)
		t.Errorf("%d dead letters, want none:\n%s", len(dead)-windowed, strings.Join(reasons, "\n"))
	}
	if x.soldOut && len(issued)+failed != x.stock {
		t.Errorf("sold %d (%d issued, %d dead-lettered), want exactly the stock %d", len(issued)+failed, len(issued), failed, x.stock)
	}

	// Redis: the rank counter within the stock, each user within the limit.
	k := claim.KeysFor("", x.promo)
	seq, err := e.rdb.Do(ctx, e.rdb.B().Get().Key(k.Seq()).Build()).AsInt64()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatalf("GET seq: %v", err)
	}
	if seq > int64(x.stock) {
		t.Errorf("Redis handed out %d ranks, stock %d", seq, x.stock)
	}
	users, err := e.rdb.Do(ctx, e.rdb.B().Hgetall().Key(k.Users()).Build()).AsIntMap()
	if err != nil {
		t.Fatalf("HGETALL users: %v", err)
	}
	for u, n := range users {
		if n > int64(x.perUser) {
			t.Errorf("Redis counts %d claims for user %s, limit %d", n, u, x.perUser)
		}
	}
	// Either layout lists each user's ranks; the compact one counts them.
	lists, err := e.rdb.Do(ctx, e.rdb.B().Hgetall().Key(k.ByUser()).Build()).AsStrMap()
	if err != nil {
		t.Fatalf("HGETALL byuser: %v", err)
	}
	for u, l := range lists {
		if n := strings.Count(l, ",") + 1; n > x.perUser {
			t.Errorf("Redis lists %d claims for user %s, limit %d", n, u, x.perUser)
		}
	}
	if x.exact {
		// Nothing half-done: every rank Redis handed out is a claim the
		// database holds, and there is no gap.
		if int64(len(issued)+len(dead)) != seq {
			t.Errorf("Redis handed out %d ranks, the database holds %d issued and %d dead-lettered", seq, len(issued), len(dead))
		}
		for r := int64(1); r <= int64(len(issued)); r++ {
			if _, ok := byRank[r]; !ok && len(dead) == 0 {
				t.Errorf("rank %d missing from 1..%d", r, len(issued))
				break
			}
		}
	}
	t.Logf("%s: %d issued, %d dead letters, %d claims answered 202 (%d resolved to another claim of the user), Redis seq %d",
		x.promo, len(issued), len(dead), len(accepted), resolved, seq)
}

// outageAnswers checks the answers of claims sent while Redis was out of
// reach: each one a 503 unavailable with Retry-After.
func outageAnswers(t *testing.T, as []answer) {
	t.Helper()
	bad := 0
	for _, a := range as {
		if a.err != nil || a.status != http.StatusServiceUnavailable || a.code != "unavailable" || a.retryAfter == "" {
			if bad < 5 {
				t.Errorf("claim during the outage: got %v, want 503 unavailable with Retry-After", a)
			}
			bad++
		}
	}
	if len(as) == 0 {
		t.Errorf("no claim was answered during the outage")
	}
	t.Logf("%d claims during the outage, %d answered otherwise than 503 unavailable with Retry-After", len(as), bad)
}
