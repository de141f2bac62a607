package httpapi

import (
	"net/http"
	"time"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/httpapi/ui"
	"github.com/dibsio/dibs/promotion"
)

// reportBuckets are the bucket widths a report or timeline may ask for, by
// name, narrowest first; a report without one takes the narrowest that
// spans its drop in at most reportMaxBuckets.
var reportBuckets = []struct {
	name string
	d    time.Duration
}{{"1s", time.Second}, {"10s", 10 * time.Second}, {"1m", time.Minute}, {"10m", 10 * time.Minute}, {"1h", time.Hour}}

// reportMaxBuckets is how many buckets a report's timeline aims at, at
// most, when it picks the width.
const reportMaxBuckets = 1000

// timelineDefault is the span of a timeline asked for without from.
const timelineDefault = 10 * time.Minute

// bucketParam reads the query's bucket: one of reportBuckets, or the zero
// duration when absent.
func bucketParam(r *http.Request) (time.Duration, *Problem) {
	v := r.URL.Query().Get("bucket")
	if v == "" {
		return 0, nil
	}
	for _, b := range reportBuckets {
		if b.name == v {
			return b.d, nil
		}
	}
	return 0, problem(CodeInvalidRequest, "bucket must be one of 1s, 10s, 1m, 10m, 1h").withField("bucket")
}

// timeParam reads an RFC 3339 time from the query, def when absent.
func timeParam(r *http.Request, name string, def time.Time) (time.Time, *Problem) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, problem(CodeInvalidRequest, name+" must be an RFC 3339 time").withField(name)
	}
	return t, nil
}

// getTimeline answers the promotion's settled claims per bucket between
// from (default: ten minutes before to) and to (default: now), by accepted
// and issued time, with the longest issue lag of each bucket.
func (s *Server) getTimeline(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	bucket, pr := bucketParam(r)
	if pr != nil {
		pr.write(w, r)
		return
	}
	to, pr := timeParam(r, "to", time.Now())
	if pr != nil {
		pr.write(w, r)
		return
	}
	from, pr := timeParam(r, "from", to.Add(-timelineDefault))
	if pr != nil {
		pr.write(w, r)
		return
	}
	q := promotion.TimelineQuery{From: from, To: to, Bucket: max(bucket, time.Second)}
	bs, err := s.cfg.Manager.Timeline(r.Context(), id, q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Timeline{PromotionID: id, BucketSeconds: int64(q.Bucket / time.Second),
		From: from.UTC(), To: to.UTC(), Buckets: bucketsOut(bs)})
}

// bucketsOut is bs as the API shows them.
func bucketsOut(bs []promotion.TimeBucket) []api.TimeBucket {
	out := make([]api.TimeBucket, len(bs))
	for i, b := range bs {
		out[i] = api.TimeBucket{At: b.At.UTC(), Accepted: b.Accepted, Issued: b.Issued,
			MaxLagMS: b.MaxLag.Milliseconds(), DeadLettered: b.DeadLettered}
	}
	return out
}

// getReport answers the promotion's report: the morning-after summary of
// a drop (see docs/contract.md). The figures of claims come from the
// database, whatever instance wrote them; the refusals from this
// instance's counts; the waiting room from Redis while it holds it.
func (s *Server) getReport(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	bucket, pr := bucketParam(r)
	if pr != nil {
		pr.write(w, r)
		return
	}
	ctx := r.Context()
	v, err := s.cfg.Manager.Get(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sum, err := s.cfg.Manager.ClaimSummary(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := newReport(v, sum, s.hub.Tally().Totals(id), s.started)
	if !sum.FirstAcceptedAt.IsZero() {
		from, to := sum.FirstAcceptedAt, later(sum.LastAcceptedAt, sum.LastIssuedAt).Add(time.Second)
		if bucket == 0 {
			bucket = pickBucket(to.Sub(from))
		}
		bs, err := s.cfg.Manager.Timeline(ctx, id, promotion.TimelineQuery{From: from, To: to, Bucket: bucket})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out.ClaimsPerSecond = claimRates(bs, bucket, sum)
	}
	writeJSON(w, http.StatusOK, out)
}

// newReport fills in what needs no timeline.
func newReport(v promotion.View, sum promotion.ClaimSummary, tot ui.Totals, since time.Time) api.Report {
	out := api.Report{PromotionID: v.ID, Name: v.Name, Mode: v.Mode, Kind: v.Kind, State: v.State, Stock: v.Stock,
		StartsAt: v.StartsAt.UTC(), EndsAt: v.EndsAt.UTC(), ClosedAt: optTime(v.ClosedAt),
		GeneratedAt: time.Now().UTC(), Accepted: v.Counts.Accepted, Issued: sum.Issued, Revoked: sum.Revoked,
		Pending: v.Counts.Pending, DeadLetters: sum.DeadLetters,
		FirstAcceptedAt: optTime(sum.FirstAcceptedAt), LastAcceptedAt: optTime(sum.LastAcceptedAt),
		LastIssuedAt:    optTime(sum.LastIssuedAt),
		IssueLag:        api.IssueLag{P50MS: sum.LagP50.Milliseconds(), P99MS: sum.LagP99.Milliseconds(), MaxMS: sum.LagMax.Milliseconds()},
		ClaimsPerSecond: api.ClaimRate{BucketSeconds: 1, Buckets: []api.TimeBucket{}},
		Rejected:        api.Rejected{Scope: "instance", Since: since.UTC(), Total: tot.RejectedSum(), ByCode: tot.Rejected},
		Notes: []string{"rejected counts the claims this instance refused since it started; other instances, " +
			"and this one before a restart, are not in it"},
	}
	if v.Mode == promotion.ModeFirstCome && v.Counts.Remaining != nil && *v.Counts.Remaining <= 0 && !sum.LastAcceptedAt.IsZero() {
		out.SoldOutAt = optTime(sum.LastAcceptedAt)
	}
	switch {
	case v.WaitingRoom.Enabled && v.RetiredAt.IsZero():
		rc := v.Room
		out.WaitingRoom = &api.ReportRoom{Joins: rc.Waiting + rc.Admitted + rc.Abandoned, Admitted: rc.Admitted,
			Abandoned: rc.Abandoned, Waiting: rc.Waiting, Spent: rc.PassesSpent}
	case v.WaitingRoom.Enabled:
		out.Notes = append(out.Notes, "the waiting room's counts were kept in Redis, which no longer holds them: "+
			"the promotion was retired")
	}
	if out.Pending > 0 {
		out.Notes = append(out.Notes, "claims are still pending: the lag and timeline cover the issued ones only")
	}
	return out
}

// claimRates is a report's claims per second from its timeline: the
// busiest bucket's accepted claims over its width, and the issued claims
// over the span from the first to the last acceptance.
func claimRates(bs []promotion.TimeBucket, bucket time.Duration, sum promotion.ClaimSummary) api.ClaimRate {
	out := api.ClaimRate{BucketSeconds: int64(bucket / time.Second), Buckets: bucketsOut(bs)}
	for _, b := range bs {
		out.Peak = max(out.Peak, float64(b.Accepted)/bucket.Seconds())
	}
	if span := sum.LastAcceptedAt.Sub(sum.FirstAcceptedAt).Seconds(); span >= 1 {
		out.Mean = float64(sum.Issued) / span
	} else {
		out.Mean = float64(sum.Issued)
	}
	return out
}

// pickBucket is the narrowest of reportBuckets that spans d in at most
// reportMaxBuckets.
func pickBucket(d time.Duration) time.Duration {
	for _, b := range reportBuckets {
		if d/b.d < reportMaxBuckets {
			return b.d
		}
	}
	return reportBuckets[len(reportBuckets)-1].d * time.Duration(d/(reportBuckets[len(reportBuckets)-1].d*reportMaxBuckets)+1)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
