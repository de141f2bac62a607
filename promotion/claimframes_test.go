package promotion_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/promotion"
)

// execSpy is a Redis client that records, for each script a claim runs,
// the frames from Manager.ClaimWithToken down to the script's Exec, both
// included: the frames a reader follows from the HTTP handler to the
// script.
type execSpy struct {
	rueidis.Client
	mu    sync.Mutex
	paths [][]string
}

func (s *execSpy) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	s.record()
	return s.Client.Do(ctx, cmd)
}

func (s *execSpy) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	s.record()
	return s.Client.DoMulti(ctx, cmds...)
}

func (s *execSpy) record() {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	var (
		path   []string
		inExec bool
	)
	for {
		f, more := frames.Next()
		name := f.Function[strings.LastIndex(f.Function, "/")+1:]
		if strings.HasSuffix(name, "rueidis.(*Lua).Exec") {
			inExec, path = true, nil
		}
		if inExec {
			path = append([]string{name}, path...)
			if strings.HasSuffix(name, "promotion.(*Manager).ClaimWithToken") {
				s.mu.Lock()
				s.paths = append(s.paths, path)
				s.mu.Unlock()
				return
			}
		}
		if !more {
			return
		}
	}
}

// first returns the frames of the first script a claim ran since the last
// call, and forgets the others.
func (s *execSpy) first(t *testing.T) []string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.paths) == 0 {
		t.Fatal("no script ran from ClaimWithToken")
	}
	p := s.paths[0]
	s.paths = nil
	return p
}

// TestClaimFrames: a claim reaches its script in at most four frames from
// the handler — ClaimWithToken, the path its promotion's handle names, the
// gate's claim method, the script's Exec — on each path: plain (unbatched;
// a batched claim is queued for the batcher), segmented, and with a
// waiting room (also the path of a promotion this instance has not
// published).
func TestClaimFrames(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	spy := &execSpy{Client: w.client}
	w.client = spy
	m := w.startManager(t, promotion.Config{Instance: "a", UnbatchedClaims: true})
	create(t, m, promotion.Promotion{ID: "plain", Stock: 10})
	create(t, m, promotion.Promotion{ID: "split", Stock: 10, Segments: 3})
	for _, c := range []struct{ id, path string }{
		{"plain", "claimPlain"}, {"split", "claimSegmented"}, {"nobody-made-it", "claimRoomed"},
	} {
		_, _ = m.Claim(context.Background(), c.id, "u1", "")
		frames := spy.first(t)
		if len(frames) > 4 || !strings.HasSuffix(frames[1], "."+c.path) {
			t.Errorf("claim of %s: %d frames to the script, want at most 4 through %s:\n%s",
				c.id, len(frames), c.path, strings.Join(frames, "\n"))
		}
	}
}
