package promotion_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
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
