package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	_ "modernc.org/sqlite"

	"github.com/dibsio/dibs/internal/assembly/demo"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/servetest"
)

const crashToken = "crash-test-token"

// startServe runs dibs serve on a free port against redisAddr and dbURL,
// with entries of a killed process coming back within seconds, and waits
// until it listens.
func startServe(t *testing.T, redisAddr, dbURL string, env ...string) *servetest.Proc {
	t.Helper()
	return servetest.Start(t, servetest.Options{Binary: dibsBinary(t), Redis: redisAddr, DB: dbURL,
		AdminToken: crashToken, Instance: "crash-node", Env: env})
}

type answer struct {
	status int
	code   string
	rank   int64
	id     string
}

var crashHTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func call(addr, method, path, body string, hdr ...string) (answer, error) {
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := crashHTTP.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{}, err
	}
	var v struct {
		Code    string `json:"code"`
		Rank    int64  `json:"rank"`
		ClaimID string `json:"claim_id"`
	}
	_ = json.Unmarshal(raw, &v)
	return answer{status: res.StatusCode, code: v.Code, rank: v.Rank, id: v.ClaimID}, nil
}

func createPromotion(t *testing.T, addr, id string, stock int) {
	t.Helper()
	a, err := call(addr, "POST", "/v1/promotions", fmt.Sprintf(`{"id":%q,"stock":%d}`, id, stock), "Authorization", "Bearer "+crashToken)
	if err != nil || a.status != http.StatusCreated {
		t.Fatalf("create promotion: %+v %v", a, err)
	}
}

func claimKeyed(addr, promo, user string) (answer, error) {
	return call(addr, "POST", "/v1/promotions/"+promo+"/claims", fmt.Sprintf(`{"user_id":%q}`, user), "Idempotency-Key", "key-"+user)
}

// counts reads the promotion's counts.
func counts(addr, promo string) (accepted, issued, pending int64, err error) {
	res, err := crashHTTP.Get("http://" + addr + "/v1/promotions/" + promo)
	if err != nil {
		return 0, 0, 0, err
	}
	defer res.Body.Close()
	var v struct {
		Counts struct{ Accepted, Issued, Pending int64 } `json:"counts"`
	}
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		return 0, 0, 0, err
	}
	return v.Counts.Accepted, v.Counts.Issued, v.Counts.Pending, nil
}

// waitAllIssued waits until every accepted claim is issued.
func waitAllIssued(t *testing.T, p *servetest.Proc, promo string) int64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		acc, iss, pend, err := counts(p.Addr, promo)
		if err == nil && acc == iss && pend == 0 {
			return acc
		}
		if time.Now().After(deadline) {
			t.Fatalf("not all issued: accepted %d issued %d pending %d (%v)\n%s", acc, iss, pend, err, p.LogTail(100))
		}
		<-tick.C
	}
}

// openReadOnly opens the SQLite database of a dibs serve child, read-only,
// closed at the end of the test.
func openReadOnly(t *testing.T, dbPath string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// issuedRows counts the promotion's issued rows.
func issuedRows(t *testing.T, dbPath, promo string) int64 {
	t.Helper()
	db := openReadOnly(t, dbPath)
	var n int64
	if err := db.QueryRow(`SELECT COUNT(*) FROM issued WHERE promotion_id = ?`, promo).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkRows verifies the database: exactly want issued rows for the
// promotion, ranks 1..want each once, one row per user.
func checkRows(t *testing.T, dbPath, promo string, want int64) {
	t.Helper()
	db := openReadOnly(t, dbPath)
	var n, distinctRanks, distinctUsers, maxRank int64
	err := db.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT rank), COUNT(DISTINCT user_id), COALESCE(MAX(rank),0) FROM issued WHERE promotion_id = ?`, promo).
		Scan(&n, &distinctRanks, &distinctUsers, &maxRank)
	if err != nil {
		t.Fatal(err)
	}
	if n != want || distinctRanks != want || distinctUsers != want || maxRank != want {
		t.Fatalf("issued rows: %d rows, %d ranks, %d users, max rank %d; want %d of each", n, distinctRanks, distinctUsers, maxRank, want)
	}
}

// burst claims for users concurrently; it returns the answers it got and
// the users whose outcome is unknown (transport error or 503).
func burst(addr, promo string, users []string, workers int, onAnswer func(int)) (map[string]answer, []string) {
	var (
		mu      sync.Mutex
		got     = map[string]answer{}
		unknown []string
		wg      sync.WaitGroup
		next    = make(chan string)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				a, err := claimKeyed(addr, promo, u)
				mu.Lock()
				if err != nil || a.status >= 500 {
					unknown = append(unknown, u)
				} else {
					got[u] = a
				}
				n := len(got)
				mu.Unlock()
				if onAnswer != nil {
					onAnswer(n)
				}
			}
		}()
	}
	for _, u := range users {
		next <- u
	}
	close(next)
	wg.Wait()
	return got, unknown
}

func userList(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// settle retries the unknown users with their keys against addr, checks
// that every answer known before is answered the same, and returns the
// accepted ranks by user.
func settle(t *testing.T, addr, promo string, before map[string]answer, unknown []string, stock int) map[string]int64 {
	t.Helper()
	accepted := map[string]int64{}
	for u, a := range before {
		again, err := claimKeyed(addr, promo, u)
		if err != nil {
			t.Fatalf("retry %s: %v", u, err)
		}
		if a.status == http.StatusAccepted {
			if again.status != http.StatusAccepted || again.rank != a.rank || again.id != a.id {
				t.Fatalf("retry of accepted %s: got %+v, first answer %+v", u, again, a)
			}
			accepted[u] = a.rank
		}
	}
	for _, u := range unknown {
		a, err := claimKeyed(addr, promo, u)
		if err != nil {
			t.Fatalf("retry %s: %v", u, err)
		}
		if a.status == http.StatusAccepted {
			accepted[u] = a.rank
		} else if a.code != "sold_out" {
			t.Fatalf("retry %s: %+v", u, a)
		}
	}
	if len(accepted) > stock {
		t.Fatalf("oversold: %d accepted of %d", len(accepted), stock)
	}
	seen := map[int64]string{}
	for u, r := range accepted {
		if other, dup := seen[r]; dup {
			t.Fatalf("rank %d held by %s and %s", r, u, other)
		}
		if r < 1 || r > int64(len(accepted)) {
			t.Fatalf("rank %d outside 1..%d", r, len(accepted))
		}
		seen[r] = u
	}
	return accepted
}

// sellOutChecked ends a crash test: clients retry what they lost, the
// promotion sells out exactly once, every accepted claim is issued, and the
// database holds ranks 1..stock once each.
func sellOutChecked(t *testing.T, p *servetest.Proc, dbPath, promo string, before map[string]answer, unknown []string, stock int) {
	t.Helper()
	accepted := settle(t, p.Addr, promo, before, unknown, stock)
	n := waitAllIssued(t, p, promo)
	if n != int64(len(accepted)) || n != int64(stock) {
		t.Fatalf("server accepted %d, clients hold %d, stock %d", n, len(accepted), stock)
	}
	p.Kill()
	checkRows(t, dbPath, promo, n)
}

// TestCrashBetweenCommitAndAck kills dibs (SIGKILL, from inside, by a
// failpoint) after claims were committed to the database but before they
// were acknowledged in Redis. After a restart every accepted claim ends
// issued exactly once.
func TestCrashBetweenCommitAndAck(t *testing.T) {
	t.Parallel()
	redis := redistest.Fresh(t, redisserver.Options{AppendFsync: "always"})
	dbPath := filepath.Join(t.TempDir(), "dibs.db")
	p := startServe(t, redis.Addr(), "sqlite://"+dbPath, "DIBS_FAILPOINT=crash-after-commit:1")
	createPromotion(t, p.Addr, "crash", 50)
	before, unknown := burst(p.Addr, "crash", userList("u", 80), 8, nil)
	p.WaitExit(30 * time.Second)
	// The process died with claims in the database that Redis still holds
	// as pending: exactly the window between commit and acknowledgement.
	if rows := issuedRows(t, dbPath, "crash"); rows < 1 {
		t.Fatalf("no claim was committed before the crash")
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redis.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	pending, err := c.Do(context.Background(), c.B().Xpending().Key("dibs:{crash}:claims").Group("issuers").Build()).ToArray()
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := pending[0].AsInt64(); n < 1 {
		t.Fatalf("nothing pending in Redis after the crash")
	}

	p2 := startServe(t, redis.Addr(), "sqlite://"+dbPath)
	sellOutChecked(t, p2, dbPath, "crash", before, unknown, 50)
}

// TestKillDuringClaimBurst kills dibs with SIGKILL in the middle of a burst
// of claims. Clients retry what they did not get an answer for with the same
// Idempotency-Key against the restarted server.
func TestKillDuringClaimBurst(t *testing.T) {
	t.Parallel()
	redis := redistest.Fresh(t, redisserver.Options{AppendFsync: "always"})
	dbPath := filepath.Join(t.TempDir(), "dibs.db")
	p := startServe(t, redis.Addr(), "sqlite://"+dbPath)
	createPromotion(t, p.Addr, "burst", 300)
	var once sync.Once
	before, unknown := burst(p.Addr, "burst", userList("b", 600), 32, func(answered int) {
		if answered >= 150 {
			once.Do(func() { p.Signal(syscall.SIGKILL) })
		}
	})
	p.WaitExit(10 * time.Second)
	if len(unknown) == 0 {
		t.Fatalf("the kill interrupted nothing (%d answers)", len(before))
	}

	p2 := startServe(t, redis.Addr(), "sqlite://"+dbPath)
	sellOutChecked(t, p2, dbPath, "burst", before, unknown, 300)
}

// TestRedisKilledUnderAOFAlways kills redis-server with SIGKILL during a
// burst of claims. With appendfsync always every 202 survives the restart.
func TestRedisKilledUnderAOFAlways(t *testing.T) {
	t.Parallel()
	redis := redistest.Fresh(t, redisserver.Options{AppendFsync: "always"})
	dbPath := filepath.Join(t.TempDir(), "dibs.db")
	p := startServe(t, redis.Addr(), "sqlite://"+dbPath)
	createPromotion(t, p.Addr, "aof", 300)
	var once sync.Once
	before, unknown := burst(p.Addr, "aof", userList("r", 600), 32, func(answered int) {
		if answered >= 150 {
			once.Do(func() {
				if err := redis.Kill(); err != nil {
					t.Errorf("kill redis: %v", err)
				}
			})
		}
	})
	if len(unknown) == 0 {
		t.Fatalf("the kill interrupted nothing (%d answers)", len(before))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := redis.Restart(ctx); err != nil {
		t.Fatalf("restart redis: %v", err)
	}
	sellOutChecked(t, p, dbPath, "aof", before, unknown, 300)
}

// TestEmbeddedRedisDeathStopsServe: without its private redis-server dibs
// cannot work, so when it dies dibs exits non-zero for a supervisor to
// restart it, rather than answering 503 forever.
func TestEmbeddedRedisDeathStopsServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(dibsBinary(t), "serve", "--addr", "127.0.0.1:0", "--db", "sqlite://"+filepath.Join(dir, "dibs.db"),
		"--admin-token", crashToken, "--data-dir", filepath.Join(dir, "data"))
	cmd.Env = demo.ServerEnv(os.Environ(), filepath.Join(dir, "data"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	redisAddr := make(chan string, 1)
	var logMu sync.Mutex
	var log strings.Builder
	done := make(chan error, 1)
	go func() {
		var seen string // the private redis-server's address
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			logMu.Lock()
			log.WriteString(line + "\n")
			logMu.Unlock()
			if strings.Contains(line, "started private redis-server") {
				for _, f := range strings.Fields(line) {
					if a, ok := strings.CutPrefix(f, "addr="); ok {
						seen = a
					}
				}
			}
			if _, ok := demo.ListeningAddr(line); ok {
				redisAddr <- seen // it serves: now take its Redis away
			}
		}
		done <- cmd.Wait()
	}()
	var addr string
	select {
	case addr = <-redisAddr:
	case <-time.After(30 * time.Second):
		t.Fatal("no private redis-server started")
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Do(context.Background(), c.B().Shutdown().Nosave().Build()).Error() // the connection drops
	c.Close()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Fatalf("dibs exited with %v, want a non-zero exit", err)
		}
		logMu.Lock()
		defer logMu.Unlock()
		if !strings.Contains(log.String(), "embedded redis-server exited") {
			t.Fatalf("no reason in the log:\n%s", log.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("dibs kept running without its redis-server")
	}
}
