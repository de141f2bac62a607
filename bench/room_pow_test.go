package bench

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/assembly/service"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// startServer starts a dibs server in this process (Redis of the test
// binary, SQLite in a temporary directory) with admin token "secret" and
// fast waiting-room ticks, stopped when the test ends, and returns its URL.
func startServer(t *testing.T) string {
	t.Helper()
	cfg := service.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Redis = "redis://" + redistest.Single(t).Addr()
	cfg.DB = "sqlite://" + filepath.Join(t.TempDir(), "dibs.db")
	cfg.AdminToken = "secret"
	cfg.Instance = "bench-test"
	cfg.WaitingRoom.TickMS = 50
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := service.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return "http://" + svc.Addr().String()
}

// TestRoomProofOfWork: a waiting-room run with a difficulty creates the
// room with it; every user's first join is answered challenge_required,
// solved and sent again; the run passes its checks and the report gives
// the solves.
func TestRoomProofOfWork(t *testing.T) {
	t.Parallel()
	const users = 40
	rep, err := Run(t.Context(), Config{
		Target: startServer(t), AdminToken: "secret", PromotionID: "pow-run",
		Stock: 25, Users: users, WaitingRoom: true, AdmitPerSecond: 1000, PowDifficulty: 8,
		Concurrency: 8, MaxPoll: 100 * time.Millisecond, ConfirmTimeout: 30 * time.Second,
		PollInterval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	rm := rep.Room
	if !rep.OK() || rm == nil {
		t.Fatalf("the run failed:\n%s", text(t, rep))
	}
	if rm.PowDifficulty != 8 || rm.Challenges != users || rm.Solves != users || rm.Joined != users ||
		rm.Admitted != 25 || rm.SoldOut != users-25 || rm.Hashes < users || rm.SolveTime.Max <= 0 {
		t.Fatalf("room report %+v", rm)
	}
	t.Logf("%d solves at difficulty 8: p50 %s, max %s, %.2f M hashes/s", rm.Solves, rm.SolveTime.P50, rm.SolveTime.Max, rm.HashesPerSecond()/1e6)
	out := text(t, rep)
	if !strings.Contains(out, "difficulty 8: 40 challenges answered, 40 solved") {
		t.Errorf("the text report has no proof-of-work line:\n%s", out)
	}
	b, err := rep.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"proof_of_work":{"difficulty":8,"challenges":40,"solves":40,`) {
		t.Errorf("the JSON report: %s", b)
	}
}
