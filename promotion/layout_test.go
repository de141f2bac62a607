package promotion_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
)

// compact reports whether the promotion of k keeps the compact layout (see
// claim.Layout).
func compact(t *testing.T, c rueidis.Client, k claim.Keys) bool {
	t.Helper()
	mode, err := c.Do(context.Background(), c.B().Hget().Key(k.Meta()).Field("mode").Build()).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatal(err)
	}
	return strings.HasSuffix(mode, ":2")
}

// statusOf returns the status Redis holds for rank of the promotion of k,
// in its layout: "" for none, i (compact) or i:<unix ms> (classic) for
// issued.
func statusOf(t *testing.T, c rueidis.Client, k claim.Keys, rank string) string {
	t.Helper()
	cmd := c.B().Hget().Key(k.Status()).Field(rank).Build()
	if compact(t, c, k) {
		r, _ := strconv.ParseInt(rank, 10, 64)
		cmd = c.B().Getrange().Key(k.StatusBytes()).Start(r).End(r).Build()
	}
	s, err := c.Do(context.Background(), cmd).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatal(err)
	}
	return strings.Trim(s, "\x00")
}

// setStatus sets the status of rank in the promotion of k, in its layout;
// "" makes Redis forget it.
func setStatus(t *testing.T, c rueidis.Client, k claim.Keys, rank, s string) {
	t.Helper()
	cmd := c.B().Hdel().Key(k.Status()).Field(rank).Build()
	switch {
	case compact(t, c, k):
		r, _ := strconv.ParseInt(rank, 10, 64)
		cmd = c.B().Setrange().Key(k.StatusBytes()).Offset(r).Value((s + "\x00")[:1]).Build()
	case s != "":
		cmd = c.B().Hset().Key(k.Status()).FieldValue().FieldValue(rank, s).Build()
	}
	if err := c.Do(context.Background(), cmd).Error(); err != nil {
		t.Fatal(err)
	}
}

// forgetStatusLua is a Lua function for the tests' loss scripts:
// forget_status(status, bytes, rank) makes Redis forget rank's status in
// either layout (status: the status hash; bytes: the status bytes).
const forgetStatusLua = `local function forget_status(status, bytes, rank)
  redis.call('HDEL', status, tostring(rank))
  if redis.call('EXISTS', bytes) == 1 then redis.call('SETRANGE', bytes, rank, '\0') end
end
`

// TestClaimLayouts runs claims through a manager of each layout setting:
// the promotion it creates keeps that layout (the meta hash's mode), its
// claims are issued, Redis's status of each reads issued, and the user's
// claims answer issued with the time of issue (from the database for a
// compact promotion, which keeps none in Redis).
func TestClaimLayouts(t *testing.T) {
	t.Parallel()
	for _, classic := range []bool{false, true} {
		t.Run(map[bool]string{false: "compact", true: "classic"}[classic], func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", "sqlite")
			m := w.start(t, promotion.Config{Prefix: w.prefix, Instance: "layout", Stream: fastStream(),
				ClassicClaims: classic})
			ctx := context.Background()
			const id = "layout"
			create(t, m, promotion.Promotion{ID: id, Stock: 3})
			for _, u := range []string{"u1", "u2"} {
				if _, err := m.Claim(ctx, id, u, ""); err != nil {
					t.Fatal(err)
				}
			}
			waitCounts(t, m, id, 2, 0)
			k := claim.KeysFor(w.prefix, id)
			if got := compact(t, w.client, k); got == classic {
				t.Fatalf("compact layout %v, want %v", got, !classic)
			}
			for _, rank := range []string{"1", "2"} {
				wait.For(t, 10*time.Second, "rank "+rank+" issued in Redis", func() bool {
					return strings.HasPrefix(statusOf(t, w.client, k, rank), "i")
				})
			}
			cs, err := m.UserClaims(ctx, id, "u1")
			if err != nil || len(cs) != 1 || cs[0].Status != claim.StatusIssued || cs[0].IssuedAt.IsZero() {
				t.Fatalf("claims of u1: %+v, %v; want one issued, with its time of issue", cs, err)
			}
			if _, err := m.Claim(ctx, id, "u1", ""); !errors.Is(err, promotion.ErrAlreadyClaimed) {
				t.Fatalf("second claim of u1: %v, want already claimed", err)
			}
		})
	}
}
