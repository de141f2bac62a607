package faults

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// previousRelease is the commit of the release before the one this tree
// becomes: TestRollingUpgrade runs its binary beside this tree's. It moves
// forward with each release (set it to the new release's tag or commit once
// that is out); DIBS_PREVIOUS_RELEASE overrides it for one run.
const previousRelease = "3fa1641"

// previousBinary builds `dibs` from the previous release's source, taken
// from this clone's history, and returns its path. It skips the test when
// the clone does not hold that commit (a shallow clone).
func previousBinary(t *testing.T) (path, rev string) {
	t.Helper()
	rev = previousRelease
	if v := os.Getenv("DIBS_PREVIOUS_RELEASE"); v != "" {
		rev = v
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("previous release %s: this tree is not a git clone, so its history is unavailable", rev)
	}
	root := strings.TrimSpace(string(top))
	full, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", rev+"^{commit}").Output()
	if err != nil {
		t.Skipf("previous release %s is not in this clone (a shallow clone?): fetch its history (git fetch --unshallow) or set DIBS_PREVIOUS_RELEASE to a commit the clone holds", rev)
	}
	rev = strings.TrimSpace(string(full))
	src := t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", rev)
	untar := exec.Command("tar", "-x", "-C", src)
	var archiveErr, untarErr bytes.Buffer
	archive.Stderr, untar.Stderr = &archiveErr, &untarErr
	if untar.Stdin, err = archive.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, archiveErr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("extract %s: %v\n%s", rev, err, untarErr.String())
	}
	path = filepath.Join(t.TempDir(), "dibs-previous")
	build := exec.Command("go", "build", "-o", path, "./cmd/dibs")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the previous release %s: %v\n%s", rev, err, out)
	}
	return path, rev
}

// TestRollingUpgrade upgrades a running deployment from the previous
// release to this tree while claims keep coming, all on one Redis and one
// PostgreSQL: two instances of the previous release serve; a new instance
// joins (migrating the schema as it starts); an old one is stopped with
// SIGTERM in the middle of a burst; a second new one joins and the last old
// one is killed with SIGKILL in the middle of another; then an instance of
// the previous release comes back beside the new ones, as a rollback of one
// instance would, reading what the new ones wrote. Every claim answered 202
// is issued exactly once, none dead-lettered, retries of accepted claims
// with their Idempotency-Key get the original answer through a new and
// through an old instance, and the promotion sells exactly its stock.
func TestRollingUpgrade(t *testing.T) {
	t.Parallel()
	r := rng(t)
	prev, rev := previousBinary(t)
	t.Logf("previous release %s", rev)
	e := newEnv(t, "")
	start := func(bin, name string) *dibsProc {
		return startDibs(t, serveOpts{redis: e.redis.Addr(), db: e.dbURL, instance: name, bin: bin})
	}
	old1, old2 := start(prev, "old-1"), start(prev, "old-2")
	promo := "upgrade"
	const users, perUser, stock = 50, 2, 360
	createPromotion(t, old1.addr, promo, stock, perUser)
	l := newLedger(promo)
	// Each user tries once more than the limit; the stock runs out in the
	// fourth burst.
	l.burst([]string{old1.addr, old2.addr}, attempts("a-", users, perUser+1), 16, nil)

	new1 := start(dibsBin, "new-1")
	during(t, l, []string{old1.addr, old2.addr, new1.addr}, attempts("b-", users, perUser+1), r.IntN(users*(perUser+1)), "SIGTERM to old-1", old1.stop)

	new2 := start(dibsBin, "new-2")
	during(t, l, []string{old2.addr, new1.addr, new2.addr}, attempts("c-", users, perUser+1), r.IntN(users*(perUser+1)), "SIGKILL to old-2", func() {
		old2.Signal(syscall.SIGKILL)
		old2.WaitExit(10 * time.Second)
	})

	old3 := start(prev, "old-3")
	now := []string{new1.addr, new2.addr, old3.addr}
	l.burst(now, attempts("d-", users, perUser+1), 16, nil)
	l.settle(t, now, 60*time.Second)
	l.checkReplays(t, new1.addr)
	l.checkReplays(t, old3.addr)
	e.check(t, l, expect{promo: promo, stock: stock, perUser: perUser, noDeadLetters: true, exact: true, soldOut: true}, new1, new2, old3)
}

// during sends the attempts through addrs with 16 concurrent clients and
// runs step (named what, in a goroutine of its own) once after answer
// number after of the burst; it returns once the burst and step are done.
func during(t *testing.T, l *ledger, addrs []string, ats []attempt, after int, what string, step func()) {
	t.Helper()
	var once sync.Once
	done := make(chan struct{})
	run := func() {
		t.Logf("%s after answer %d of the burst", what, after)
		go func() {
			defer close(done)
			step()
		}()
	}
	from := l.answered()
	l.burst(addrs, ats, 16, func(n int) {
		if n-from >= after {
			once.Do(run)
		}
	})
	once.Do(run)
	<-done
}
