package stream

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// checkBounded fails t if l carries more than callSlice ids or fields, or
// asks XREADGROUP for more than callSlice entries.
func checkBounded(t *testing.T, l redistest.Logged) {
	t.Helper()
	switch l.Name() {
	case "XAUTOCLAIM":
		t.Errorf("XAUTOCLAIM sent: it walks the pending list from where it starts, however young: %v", l.Args)
	case "XREADGROUP":
		for i := 0; i+1 < len(l.Args); i++ {
			if strings.EqualFold(l.Args[i], "COUNT") {
				if n, _ := strconv.Atoi(l.Args[i+1]); n > callSlice {
					t.Errorf("XREADGROUP COUNT %d", n)
				}
			}
		}
	case "XACK": // XACK key group id...
		if n := l.Argc - 3; n > callSlice {
			t.Errorf("XACK of %d ids", n)
		}
	case "HMGET", "HDEL": // key field...
		if n := l.Argc - 2; n > callSlice {
			t.Errorf("%s of %d fields", l.Name(), n)
		}
	case "XCLAIM": // key group consumer min-idle id... [JUSTID]
		// SLOWLOG keeps 32 arguments: past them JUSTID cannot be seen.
		truncated := l.Argc > len(l.Args)
		justID := strings.EqualFold(l.Args[len(l.Args)-1], "JUSTID")
		if n := l.Argc - 5; (justID || truncated) && n > callSlice+1 {
			t.Errorf("XCLAIM of %d ids", n)
		} else if !justID && !truncated && n > reclaimTake {
			t.Errorf("XCLAIM of %d entries", n)
		}
	case "XTRIM": // key MINID ~ id LIMIT n
		if len(l.Args) != 7 || l.Args[3] != "~" || !strings.EqualFold(l.Args[5], "LIMIT") {
			t.Errorf("XTRIM without ~ and LIMIT: %v", l.Args)
		} else if n, _ := strconv.Atoi(l.Args[6]); n < 1 || n > trimSlice {
			t.Errorf("XTRIM LIMIT %d", n)
		}
	case "XPENDING": // key group [IDLE ms] start end count [consumer]
		args := l.Args[3:]
		if len(args) > 0 && strings.EqualFold(args[0], "IDLE") {
			args = args[2:]
		}
		if len(args) >= 3 {
			if n, _ := strconv.Atoi(args[2]); n > callSlice {
				t.Errorf("XPENDING of %d entries", n)
			}
		}
	}
}

// The commands a pool sends stay bounded whatever the batch: a batch of 250
// is read, acknowledged, retried and reclaimed in commands of at most 100
// ids or entries, and no reclaim walks the pending list with XAUTOCLAIM.
func TestPoolCommandsBounded(t *testing.T) {
	t.Parallel()
	srv := redistest.Fresh(t, redisserver.Options{AppendFsync: "off"})
	e := setup(t, redistest.Topology{Name: "fresh", Addrs: []string{srv.Addr()}})
	old := e.addAt(t, time.Now().Add(-time.Hour).UnixMilli(), 300)
	e.holdAsGhost(t, time.Hour, old)
	e.add(t, 600)
	redistest.LogEveryCommand(t, e.c, 100000)
	cfg := fastConfig(ReadBlock)
	cfg.BatchSize = 250
	cfg.ReclaimMinIdle = 30 * time.Second
	cfg.HandlerTimeout = 10 * time.Second
	rec := newRecorder()
	e.start(t, "i1", Spec{Handler: HandlerFunc(func(ctx context.Context, msgs []Message) []error {
		rec.see(ctx, msgs)
		return nil
	})}, cfg)
	wait.For(t, 20*time.Second, "old entries reclaimed, new ones handled", func() bool {
		return rec.count() == 900 && e.pending(t) == 0
	})
	logged := redistest.LoggedCommands(t, e.c)
	if len(logged) == 0 {
		t.Fatal("no command logged")
	}
	for _, l := range logged {
		checkBounded(t, l)
	}
}
