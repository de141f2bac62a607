package httpapi

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/httpapi/ui"
	"github.com/dibsio/dibs/promotion"
)

// issueLags sets the IssueLagSeconds of the promotions with claims
// pending: the age of the oldest entry of their work streams (every
// segment's) that is not yet acknowledged — the first one a consumer holds
// (XPENDING), else the first not yet delivered (after the group's
// last-delivered-id) — as its "at" field tells (the time the claim was
// accepted; the entry id's time for an entry without one). Two round trips
// for all of them, and none for a promotion without pending claims.
func (s *uiSource) issueLags(ctx context.Context, ps []ui.Promotion, segments []int, now time.Time) {
	type stream struct {
		promo int
		key   string
	}
	var streams []stream
	for i, p := range ps {
		if p.Pending <= 0 {
			continue
		}
		for _, key := range promotion.WorkStreams(s.prefix, p.ID, segments[i]) {
			streams = append(streams, stream{i, key})
		}
	}
	if len(streams) == 0 {
		return
	}
	cmds := make(rueidis.Commands, 0, 2*len(streams))
	for _, st := range streams {
		cmds = append(cmds, s.redis.B().Xpending().Key(st.key).Group(promotion.IssuerGroup).Build(),
			s.redis.B().XinfoGroups().Key(st.key).Build())
	}
	res := s.redis.DoMulti(ctx, cmds...)
	firsts := make(rueidis.Commands, 0, len(streams))
	for i, st := range streams {
		start := ""
		if pend, err := res[2*i].ToArray(); err == nil && len(pend) >= 2 {
			if n, _ := pend[0].AsInt64(); n > 0 {
				start, _ = pend[1].ToString()
			}
		}
		if start == "" {
			start = "(" + lastDelivered(res[2*i+1])
		}
		firsts = append(firsts, s.redis.B().Xrange().Key(st.key).Start(start).End("+").Count(1).Build())
	}
	for i, r := range s.redis.DoMulti(ctx, firsts...) {
		at, ok := firstEntryAt(r)
		if !ok {
			continue
		}
		p := &ps[streams[i].promo]
		p.IssueLagSeconds = max(p.IssueLagSeconds, now.Sub(at).Seconds(), 0)
	}
}

// lastDelivered is the last-delivered-id of the issuers' group in an
// XINFO GROUPS answer; "0-0" if it cannot be read.
func lastDelivered(r rueidis.RedisResult) string {
	groups, err := r.ToArray()
	if err != nil {
		return "0-0"
	}
	for _, g := range groups {
		m, err := g.AsStrMap()
		if err == nil && m["name"] == promotion.IssuerGroup && m["last-delivered-id"] != "" {
			return m["last-delivered-id"]
		}
	}
	return "0-0"
}

// firstEntryAt is the acceptance time of the one entry of an XRANGE answer:
// its "at" field (Unix milliseconds), else its id's milliseconds.
func firstEntryAt(r rueidis.RedisResult) (time.Time, bool) {
	es, err := r.AsXRange()
	if err != nil || len(es) == 0 {
		return time.Time{}, false
	}
	e := es[0]
	if ms, err := strconv.ParseInt(e.FieldValues["at"], 10, 64); err == nil && ms > 0 {
		return time.UnixMilli(ms), true
	}
	idMS, _, _ := strings.Cut(e.ID, "-")
	if ms, err := strconv.ParseInt(idMS, 10, 64); err == nil && ms > 0 {
		return time.UnixMilli(ms), true
	}
	return time.Time{}, false
}
