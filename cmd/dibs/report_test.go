package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/client"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// TestReportCommand: after a drop sold out, dibs report prints its
// summary as Markdown (the claims, the refusals by code, the lag, the
// timeline) and, with --json, the server's report; an unknown promotion
// exits 1 with its code, a missing one 2.
func TestReportCommand(t *testing.T) {
	t.Parallel()
	srv, c := opsServer(t)
	ctx := t.Context()
	var p client.Promotion
	opsJSON(t, srv, &p, "promo", "create", "--id", "rep", "--name", "Morning drop", "--stock", "3")
	for i := range 5 {
		_, err := c.Claim(ctx, "rep", fmt.Sprintf("u%d", i))
		if i < 3 && err != nil || i >= 3 && !client.IsProblem(err, client.CodeSoldOut) {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	wait.For(t, 30*time.Second, "the claims issued", func() bool {
		p, err := c.GetPromotion(ctx, "rep")
		return err == nil && p.Counts.Issued == 3
	})

	var rep client.Report
	opsJSON(t, srv, &rep, "report", "rep")
	if rep.Accepted != 3 || rep.Issued != 3 || rep.Rejected.ByCode["sold_out"] != 2 || rep.SoldOutAt == nil ||
		rep.IssueLag.MaxMS < rep.IssueLag.P50MS || len(rep.ClaimsPerSecond.Buckets) == 0 {
		t.Fatalf("report: %+v", rep)
	}
	r := ops(t, srv, 0, "report", "rep")
	for _, want := range []string{"# Report: rep (Morning drop)", "| Accepted | 3 |", "| Issued | 3 |",
		"| Refused (this instance) | 2 |", "| · sold_out | 2 |", "- Sold out: 20", "Issue lag", "## Timeline (1s buckets)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the Markdown report lacks %q:\n%s", want, r.stdout)
		}
	}
	wantProblemLine(t, ops(t, srv, 1, "report", "nope"), client.CodeNotFound)
	ops(t, srv, 2, "report")
	wantProblemLine(t, ops(t, srv, 1, "report", "rep", "--bucket", "2s"), client.CodeInvalidRequest)
}

// TestTimelineRows: a long timeline is summed into at most
// reportTimelineRows rows of a whole number of buckets.
func TestTimelineRows(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_800_000_000, 0).UTC()
	var bs []client.TimeBucket
	for i := range 150 {
		bs = append(bs, client.TimeBucket{At: t0.Add(time.Duration(i) * time.Second), Accepted: 1, Issued: 1, MaxLagMS: int64(i)})
	}
	rows, w := timelineRows(bs, 1)
	if w != 3 || len(rows) != 50 || rows[0].Accepted != 3 || rows[49].MaxLagMS != 149 || !rows[1].At.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("width %d, %d rows, first %+v, last %+v", w, len(rows), rows[0], rows[len(rows)-1])
	}
	if rows, w := timelineRows(bs[:10], 1); w != 1 || len(rows) != 10 {
		t.Fatalf("a short timeline: width %d, %d rows", w, len(rows))
	}
}
