package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dibsio/dibs/client"
)

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newOpsFlagSet("report", " PROMOTION", summaryOf("report"), stderr,
		"Prints the promotion's report as Markdown: accepted, issued, refused by code,",
		"the sold-out time, claims/s over time, the issue lag (p50, p99, max of",
		"issued_at - accepted_at), dead letters and the waiting room. The claims come",
		"from the database, so every instance answers the same; the refusals are the",
		"answering instance's count since it started. --json prints the server's",
		"answer (GET /v1/promotions/{id}/report) as it is.")
	bucket := fs.String("bucket", "", "the timeline's bucket width: 1s, 10s, 1m, 10m or 1h (default: the server picks)")
	pos, err := parseArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := sf.client()
	if err != nil {
		return err
	}
	rep, err := c.Report(ctx, pos[0], *bucket)
	if err != nil {
		return err
	}
	if sf.json {
		return writeJSON(stdout, rep)
	}
	_, err = io.WriteString(stdout, reportMarkdown(rep))
	return err
}

// reportTimelineRows bounds the rows of the Markdown timeline; a longer
// timeline is summed into wider rows.
const reportTimelineRows = 60

// reportMarkdown renders a report as Markdown.
func reportMarkdown(r *client.Report) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Report: %s", r.PromotionID)
	if r.Name != "" && r.Name != r.PromotionID {
		p(" (%s)", r.Name)
	}
	p("\n\n%s %s promotion, state **%s**, stock %d; %s to %s", r.Mode, r.Kind, r.State, r.Stock, mdTime(&r.StartsAt), mdTime(&r.EndsAt))
	if r.ClosedAt != nil {
		p(", closed %s", mdTime(r.ClosedAt))
	}
	p(". Generated %s.\n\n", mdTime(&r.GeneratedAt))

	p("## Claims\n\n| | |\n|---|---:|\n")
	p("| Accepted | %d |\n| Issued | %d |\n| Revoked | %d |\n| Pending | %d |\n", r.Accepted, r.Issued, r.Revoked, r.Pending)
	p("| Refused (this instance) | %d |\n", r.Rejected.Total)
	for _, code := range slices.Sorted(maps.Keys(r.Rejected.ByCode)) {
		p("| · %s | %d |\n", code, r.Rejected.ByCode[code])
	}
	for _, st := range slices.Sorted(maps.Keys(r.DeadLetters)) {
		p("| Dead letters %s | %d |\n", st, r.DeadLetters[st])
	}
	p("\n- Sold out: %s\n", mdTime(r.SoldOutAt))
	p("- First and last acceptance of an issued claim: %s, %s\n", mdTime(r.FirstAcceptedAt), mdTime(r.LastAcceptedAt))
	p("- Last issue: %s\n", mdTime(r.LastIssuedAt))
	p("- Claims/s: peak %.1f, mean %.1f\n", r.ClaimsPerSecond.Peak, r.ClaimsPerSecond.Mean)
	p("- Issue lag (issued_at − accepted_at): p50 %s, p99 %s, max %s\n\n", mdMS(r.IssueLag.P50MS), mdMS(r.IssueLag.P99MS), mdMS(r.IssueLag.MaxMS))

	if w := r.WaitingRoom; w != nil {
		p("## Waiting room\n\n| Joins | Admitted | Abandoned | Waiting | Passes spent |\n|---:|---:|---:|---:|---:|\n")
		p("| %d | %d | %d | %d | %d |\n\n", w.Joins, w.Admitted, w.Abandoned, w.Waiting, w.Spent)
	}
	if rows, width := timelineRows(r.ClaimsPerSecond.Buckets, r.ClaimsPerSecond.BucketSeconds); len(rows) > 0 {
		p("## Timeline (%s buckets)\n\n| At (UTC) | Accepted | Claims/s | Issued | Max lag | Dead-lettered |\n|---|---:|---:|---:|---:|---:|\n",
			time.Duration(width)*time.Second)
		for _, t := range rows {
			p("| %s | %d | %.1f | %d | %s | %d |\n", t.At.UTC().Format("2006-01-02 15:04:05"), t.Accepted,
				float64(t.Accepted)/float64(width), t.Issued, mdMS(t.MaxLagMS), t.DeadLettered)
		}
		p("\n")
	}
	if len(r.Notes) > 0 {
		p("## Notes\n\n")
		for _, n := range r.Notes {
			p("- %s\n", n)
		}
	}
	return b.String()
}

// timelineRows sums buckets of width seconds into at most
// reportTimelineRows rows, and returns them with their width.
func timelineRows(bs []client.TimeBucket, width int64) ([]client.TimeBucket, int64) {
	if len(bs) == 0 || width <= 0 {
		return nil, width
	}
	span := bs[len(bs)-1].At.Unix() - bs[0].At.Unix() + width
	per := max((span/width+reportTimelineRows-1)/reportTimelineRows, 1)
	w := width * per
	var out []client.TimeBucket
	for _, b := range bs {
		at := time.Unix(b.At.Unix()-(b.At.Unix()-bs[0].At.Unix())%w, 0).UTC()
		if n := len(out); n > 0 && out[n-1].At.Equal(at) {
			o := &out[n-1]
			o.Accepted, o.Issued, o.DeadLettered = o.Accepted+b.Accepted, o.Issued+b.Issued, o.DeadLettered+b.DeadLettered
			o.MaxLagMS = max(o.MaxLagMS, b.MaxLagMS)
			continue
		}
		b.At = at
		out = append(out, b)
	}
	return out, w
}

func mdTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

func mdMS(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).String()
}
