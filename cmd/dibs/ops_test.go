package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/client"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/partnertest"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/servetest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

const opsToken = "ops-test-token"

// opsServer runs a dibs serve of the test's own (its own Redis and SQLite
// file) and returns its URL and an admin client of it.
func opsServer(t *testing.T) (string, *client.Client) {
	t.Helper()
	redis := redistest.Fresh(t, redisserver.Options{AppendFsync: "off"})
	p := servetest.Start(t, servetest.Options{Binary: dibsBinary(t), Redis: redis.Addr(),
		DB: "sqlite://" + filepath.Join(t.TempDir(), "dibs.db"), AdminToken: opsToken, Instance: "ops",
		Env: []string{"DIBS_WEBHOOK_SECRET=ops-test-webhook-secret-0123456789"}})
	url := "http://" + p.Addr
	c, err := client.New(url, client.WithAdminToken(opsToken))
	if err != nil {
		t.Fatal(err)
	}
	return url, c
}

// ops runs dibs with args against server, with the admin token from the
// environment, and wants the exit code.
func ops(t *testing.T, server string, code int, args ...string) runResult {
	t.Helper()
	r := runDibs(t, []string{"DIBS_ADMIN_TOKEN=" + opsToken, "DIBS_SERVER=" + server}, args...)
	if r.code != code {
		t.Fatalf("dibs %s: want exit %d:\n%s", strings.Join(args, " "), code, r)
	}
	return r
}

// opsJSON runs dibs with args and --json, wants exit 0, and decodes the
// output into v.
func opsJSON(t *testing.T, server string, v any, args ...string) {
	t.Helper()
	r := ops(t, server, 0, append(args, "--json")...)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("dibs %s: output is not the JSON wanted: %v\n%s", strings.Join(args, " "), err, r)
	}
	if dec.More() {
		t.Fatalf("dibs %s: more than one JSON document:\n%s", strings.Join(args, " "), r)
	}
}

// wantProblemLine checks that r failed with exit 1 and one line
// "dibs: <code>: ..." on stderr.
func wantProblemLine(t *testing.T, r runResult, code string) {
	t.Helper()
	if r.code != 1 || !strings.HasPrefix(r.stderr, "dibs: "+code+": ") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("want exit 1 and one line dibs: %s: ...:\n%s", code, r)
	}
}

func TestPromoCommands(t *testing.T) {
	t.Parallel()
	srv, c := opsServer(t)
	ctx := t.Context()

	var p client.Promotion
	opsJSON(t, srv, &p, "promo", "create", "--id", "p1", "--name", "Spring drop", "--stock", "3",
		"--per-user-limit", "1", "--value", "500", "--ends-at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"--idempotency-key", "k1")
	if p.ID != "p1" || p.Name != "Spring drop" || p.Stock != 3 || p.Value != 500 || p.State != client.StateOpen {
		t.Fatalf("created %+v", p)
	}
	// The same key again: the first answer, nothing created twice.
	var again client.Promotion
	opsJSON(t, srv, &again, "promo", "create", "--id", "p1", "--name", "Spring drop", "--stock", "3",
		"--per-user-limit", "1", "--value", "500", "--ends-at", p.EndsAt.UTC().Format(time.RFC3339), "--idempotency-key", "k1")
	if !again.CreatedAt.Equal(p.CreatedAt) {
		t.Fatalf("retry created again: %+v", again)
	}
	wantProblemLine(t, ops(t, srv, 1, "promo", "create", "--id", "p1", "--stock", "3"), client.CodeAlreadyExists)
	r := ops(t, srv, 1, "promo", "create", "--id", "p9", "--stock", "1", "--mode", "first_come", "--per-user-limit", "5000")
	wantProblemLine(t, r, client.CodeInvalidRequest)
	if !strings.Contains(r.stderr, "(field per_user_limit)") {
		t.Errorf("the field is not named:\n%s", r)
	}
	if r := ops(t, srv, 2, "promo", "create", "--starts-at", "tomorrow"); !strings.Contains(r.stderr, "--starts-at: want an RFC 3339 time") {
		t.Errorf("bad time:\n%s", r)
	}

	// Three users take the stock.
	for _, u := range []string{"u1", "u2", "u3"} {
		if _, err := c.Claim(ctx, "p1", u); err != nil {
			t.Fatal(err)
		}
	}
	opsJSON(t, srv, &p, "promo", "create", "--id", "p2", "--stock", "10", "--waiting-room", "--admit-per-second", "50")
	if !p.WaitingRoom.Enabled || p.WaitingRoom.AdmitPerSecond != 50 {
		t.Fatalf("waiting room: %+v", p.WaitingRoom)
	}

	var list []client.Promotion
	opsJSON(t, srv, &list, "promo", "list")
	if len(list) != 2 || list[0].ID != "p1" || list[1].ID != "p2" {
		t.Fatalf("list: %+v", list)
	}
	opsJSON(t, srv, &list, "promo", "list", "--state", "sold_out")
	if len(list) != 1 || list[0].ID != "p1" || list[0].Counts.Accepted != 3 {
		t.Fatalf("sold-out list: %+v", list)
	}
	opsJSON(t, srv, &list, "promo", "list", "--sort", "-created_at", "--limit", "1")
	if len(list) != 1 || list[0].ID != "p2" {
		t.Fatalf("newest first, 1: %+v", list)
	}
	opsJSON(t, srv, &list, "promo", "list", "--state", "archived")
	if list == nil || len(list) != 0 {
		t.Fatalf("no archived promotions: %#v, want an empty array", list)
	}
	wantProblemLine(t, ops(t, srv, 1, "promo", "list", "--state", "bogus"), client.CodeInvalidRequest)
	r = ops(t, srv, 0, "promo", "list")
	if !strings.HasPrefix(r.stdout, "ID ") || !strings.Contains(r.stdout, "\np1 ") || !strings.Contains(r.stdout, "sold_out") {
		t.Errorf("table:\n%s", r)
	}

	// show takes its flags after the id too.
	opsJSON(t, srv, &p, "promo", "show", "p1")
	if p.ID != "p1" || p.Counts.Accepted != 3 {
		t.Fatalf("show: %+v", p)
	}
	r = ops(t, srv, 0, "promo", "show", "p2", "--server", srv)
	for _, want := range []string{"id", "p2", "state", "open", "counts", "remaining 10", "waiting room"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show p2 lacks %q:\n%s", want, r)
		}
	}
	wantProblemLine(t, ops(t, srv, 1, "promo", "show", "nope"), client.CodeNotFound)
	ops(t, srv, 2, "promo", "show")
	ops(t, srv, 2, "promo", "show", "p1", "p2")

	// status: one frame.
	waitIssued(t, c, "p1")
	var f statusFrame
	opsJSON(t, srv, &f, "status", "p1", "--once")
	if f.Promotion == nil || f.Promotion.Counts.Issued != 3 || f.Progress != 1 || f.ClaimsPerSecond != nil || f.At.IsZero() {
		t.Fatalf("status frame %+v", f)
	}
	r = ops(t, srv, 0, "status", "--once", "p1")
	if !strings.Contains(r.stdout, "["+strings.Repeat("#", barWidth)+"] 100.0%  3 of 3 taken") || !strings.Contains(r.stdout, "claims/s -") {
		t.Errorf("status frame:\n%s", r)
	}
	wantProblemLine(t, ops(t, srv, 1, "status", "nope", "--once"), client.CodeNotFound)

	// close, with the token in a flag; a wrong token is refused.
	wantProblemLine(t, runDibs(t, []string{"DIBS_ADMIN_TOKEN=wrong", "DIBS_SERVER=" + srv}, "promo", "close", "p2"), client.CodeUnauthorized)
	r = runDibs(t, []string{"DIBS_ADMIN_TOKEN=wrong"}, "promo", "close", "p2", "--server", srv, "--admin-token", opsToken, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &p); r.code != 0 || err != nil || p.State != client.StateEnded || p.ClosedAt == nil {
		t.Fatalf("close: %v\n%s", err, r)
	}
	r = ops(t, srv, 0, "promo", "close", "p2")
	if !strings.Contains(r.stdout, "closed at") {
		t.Errorf("close table:\n%s", r)
	}
}

// waitIssued waits until no claim of promotion is pending.
func waitIssued(t *testing.T, c *client.Client, promotion string) {
	t.Helper()
	wait.NoError(t, time.Minute, promotion+": every claim issued", func() error {
		p, err := c.GetPromotion(context.Background(), promotion)
		if err == nil && p.Counts.Pending != 0 {
			err = fmt.Errorf("%d pending", p.Counts.Pending)
		}
		return err
	})
}

func TestGrantCommand(t *testing.T) {
	t.Parallel()
	srv, c := opsServer(t)
	var p client.Promotion
	opsJSON(t, srv, &p, "promo", "create", "--id", "g1", "--mode", "grant", "--kind", "point", "--value", "5")
	if p.Mode != client.ModeGrant || p.Counts.Remaining != nil {
		t.Fatalf("grant promotion %+v", p)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.txt")
	// Line 4 is bad; line 5 repeats line 1; line 3 is blank.
	if err := os.WriteFile(bad, []byte("u1\n{\"user_id\": \"u2\"}\n\nnot an id!\nu1\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := ops(t, srv, 1, "grant", "--promotion", "g1", bad, "--json")
	var res client.GrantResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("output: %v\n%s", err, r)
	}
	if res.Enqueued != 2 || res.Duplicates != 1 || res.Rejected != 1 || len(res.Errors) != 1 || res.Errors[0].Line != 4 {
		t.Fatalf("result %+v", res)
	}
	if r.stderr != "dibs: invalid_request: 1 line rejected\n" {
		t.Errorf("stderr %q", r.stderr)
	}

	good := filepath.Join(dir, "good.txt")
	var b strings.Builder
	for i := range 2500 {
		fmt.Fprintf(&b, "user-%d\n", i)
	}
	if err := os.WriteFile(good, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	opsJSON(t, srv, &res, "grant", good, "--promotion", "g1")
	if res.Enqueued != 2500 || res.Rejected != 0 || len(res.Errors) != 0 {
		t.Fatalf("good file: %+v", res)
	}
	r = ops(t, srv, 0, "grant", "--promotion", "g1", good)
	if r.stdout != "enqueued 0, duplicates 2500, rejected 0\n" {
		t.Errorf("again: %q", r.stdout)
	}
	waitIssued(t, c, "g1")
	bal, err := c.Balance(context.Background(), "user-7")
	if err != nil || bal.Balance != 5 {
		t.Fatalf("balance %+v, %v", bal, err)
	}

	r = ops(t, srv, 1, "grant", "--promotion", "nope", good)
	wantProblemLine(t, r, client.CodeNotFound)
	if r := ops(t, srv, 2, "grant", good); !strings.Contains(r.stderr, "--promotion is required") {
		t.Errorf("no promotion:\n%s", r)
	}
	ops(t, srv, 2, "grant", "--promotion", "g1", filepath.Join(dir, "missing.txt"))
}

// TestDLQCommands: claims past a pool's last code are dead-lettered; the
// commands list them, replay one once a code is there, and void another.
func TestDLQCommands(t *testing.T) {
	t.Parallel()
	srv, c := opsServer(t)
	ctx := t.Context()
	partner := partnertest.New(t, "u2", "u3")
	ops(t, srv, 0, "promo", "create", "--id", "d1", "--stock", "5", "--kind", "webhook", "--webhook-url", partner.URL())
	for _, u := range []string{"u1", "u2", "u3"} {
		if _, err := c.Claim(ctx, "d1", u); err != nil {
			t.Fatal(err)
		}
	}
	waitIssued(t, c, "d1")

	var dead []client.DeadLetter
	opsJSON(t, srv, &dead, "dlq", "list", "d1")
	if len(dead) != 2 || dead[0].Reason == "" || dead[0].Deliveries < 1 {
		t.Fatalf("dead letters %+v", dead)
	}
	r := ops(t, srv, 0, "dlq", "list", "d1")
	if !strings.HasPrefix(r.stdout, "CLAIM ID") || !strings.Contains(r.stdout, dead[0].ClaimID) || !strings.Contains(r.stdout, "not eligible") {
		t.Errorf("table:\n%s", r)
	}

	partner.Accept(dead[0].UserID)
	var replayed struct{ Replayed int }
	opsJSON(t, srv, &replayed, "dlq", "replay", "d1", dead[0].ClaimID)
	if replayed.Replayed != 1 {
		t.Fatalf("replayed %+v", replayed)
	}
	var voided struct{ Voided int }
	opsJSON(t, srv, &voided, "dlq", "void", "d1", dead[1].ClaimID)
	if voided.Voided != 1 {
		t.Fatalf("voided %+v", voided)
	}
	waitIssued(t, c, "d1")
	p, err := c.GetPromotion(ctx, "d1")
	if err != nil || p.Counts.Issued != 2 || p.Counts.Failed != 0 {
		t.Fatalf("after replay and void: %+v, %v", p, err)
	}
	opsJSON(t, srv, &dead, "dlq", "list", "d1")
	if len(dead) != 0 {
		t.Fatalf("dead letters left: %+v", dead)
	}
	if r := ops(t, srv, 0, "dlq", "replay", "--all", "d1"); r.stdout != "replayed 0\n" {
		t.Errorf("replay --all: %q", r.stdout)
	}

	ops(t, srv, 2, "dlq", "replay", "d1")
	ops(t, srv, 2, "dlq", "replay", "d1", "--all", "x")
	ops(t, srv, 2, "dlq", "void", "d1")
	ops(t, srv, 2, "dlq", "void", "d1", "--all")
	ops(t, srv, 2, "dlq", "bogus")
	wantProblemLine(t, ops(t, srv, 1, "dlq", "list", "nope"), client.CodeNotFound)
}

// syncBuffer is a bytes.Buffer safe to write and read at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStatusLive runs the live view in this process: a frame every
// interval, the rates from the second frame on, and a clean stop when the
// context ends (Ctrl-C).
func TestStatusLive(t *testing.T) {
	t.Parallel()
	srv, c := opsServer(t)
	if _, err := c.CreatePromotion(t.Context(), client.NewPromotion{ID: "live", Stock: 100}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"status", "live", "--server", srv, "--interval", "100ms", "--json"}, &stdout, &stderr)
	}()
	frames := func() []statusFrame {
		var out []statusFrame
		for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			var f statusFrame
			if json.Unmarshal([]byte(line), &f) == nil && f.Promotion != nil {
				out = append(out, f)
			}
		}
		return out
	}
	claimed := 0
	wait.For(t, time.Minute, "frames with the claims counted", func() bool {
		if claimed < 10 {
			if _, err := c.Claim(ctx, "live", fmt.Sprintf("u%d", claimed)); err == nil {
				claimed++
			}
		}
		fs := frames()
		if len(fs) < 2 {
			return false
		}
		last := fs[len(fs)-1]
		return last.Promotion.Counts.Accepted == 10 && last.ClaimsPerSecond != nil
	})
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after Ctrl-C; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("status did not stop when its context ended")
	}
	fs := frames()
	if fs[0].ClaimsPerSecond != nil || fs[len(fs)-1].Progress != 0.1 {
		t.Errorf("first frame's rate %v, last progress %v", fs[0].ClaimsPerSecond, fs[len(fs)-1].Progress)
	}
	for i := 1; i < len(fs); i++ {
		if d := fs[i].At.Sub(fs[i-1].At); d < 100*time.Millisecond {
			t.Errorf("frames %d and %d only %v apart: not paced by the interval", i-1, i, d)
		}
	}
}

// TestOpsWithoutServer: a server nobody listens at exits 3; bad command
// lines exit 2 before any request; every help starts with what the
// command does and shows its flags as --flag.
func TestOpsWithoutServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	file := filepath.Join(t.TempDir(), "users.txt")
	if err := os.WriteFile(file, []byte("u1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"promo", "list"}, {"promo", "show", "p"}, {"promo", "create", "--stock", "1"}, {"promo", "close", "p"},
		{"grant", "--promotion", "g", file}, {"dlq", "list", "p"}, {"dlq", "replay", "p", "--all"},
		{"dlq", "void", "p", "p#1"}, {"status", "p", "--once"}, {"status", "p"},
		{"promo", "pause", "p"}, {"promo", "resume", "p"}, {"promo", "set", "p", "--stock", "2"}, {"user", "u"},
	} {
		r := ops(t, down, 3, args...)
		if !strings.HasPrefix(r.stderr, "dibs: unreachable: ") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("dibs %v: stderr %q", args, r.stderr)
		}
	}
	for _, args := range [][]string{
		{"promo"}, {"promo", "nope"}, {"promo", "list", "extra"}, {"promo", "list", "--limit", "-1"},
		{"status"}, {"status", "p", "--interval", "1ms"}, {"dlq"}, {"grant"},
		{"promo", "list", "--server", "localhost:8080"},
		{"promo", "set", "p"}, {"promo", "set", "p", "--ends-at", "tomorrow"}, {"promo", "pause"}, {"user"}, {"user", "a", "b"},
	} {
		if r := ops(t, down, 2, args...); r.stdout != "" {
			t.Errorf("dibs %v printed %q", args, r.stdout)
		}
	}
	for _, tt := range []struct {
		args []string
		what string
	}{
		{[]string{"promo", "create", "--help"}, "dibs promo create: create a promotion.\n"},
		{[]string{"promo", "list", "-h"}, "dibs promo list: list the promotions.\n"},
		{[]string{"promo", "show", "--help"}, "dibs promo show: show one promotion"},
		{[]string{"promo", "close", "--help"}, "dibs promo close: end a promotion now"},
		{[]string{"grant", "--help"}, "dibs grant: upload the target users of a grant promotion"},
		{[]string{"dlq", "list", "--help"}, "dibs dlq list: list a promotion's dead letters.\n"},
		{[]string{"dlq", "replay", "--help"}, "dibs dlq replay: put dead letters back"},
		{[]string{"dlq", "void", "--help"}, "dibs dlq void: give up on dead letters"},
		{[]string{"status", "--help"}, "dibs status: a live view of a promotion"},
		{[]string{"promo", "pause", "--help"}, "dibs promo pause: stop taking claims"},
		{[]string{"promo", "resume", "--help"}, "dibs promo resume: take claims of a paused promotion again"},
		{[]string{"promo", "set", "--help"}, "dibs promo set: change a running promotion's stock, end or waiting room"},
		{[]string{"user", "--help"}, "dibs user: a user's claims and standing across promotions"},
		{[]string{"bench", "--help"}, "dibs bench: load-generate claims"},
	} {
		r := ops(t, down, 0, tt.args...)
		if !strings.HasPrefix(r.stderr, tt.what) || !strings.Contains(r.stderr, "\n  --server") ||
			strings.Contains(r.stderr, "\n  -server") {
			t.Errorf("dibs %v help:\n%s", tt.args, r.stderr)
		}
	}
	for _, args := range [][]string{{"promo", "--help"}, {"dlq", "help"}} {
		if r := ops(t, down, 0, args...); !strings.Contains(r.stderr, "Verbs:") {
			t.Errorf("dibs %v:\n%s", args, r)
		}
	}
}
