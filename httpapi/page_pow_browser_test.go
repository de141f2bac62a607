package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dibsio/dibs/waitroom"
)

// TestQueuePageProofOfWork drives the queue page in headless chromium
// against a real server whose room asks for a proof of work: the page's
// first join is refused challenge_required, it solves the server's
// challenge with Web Crypto, joins with the solution, is admitted and
// claims; the server counted the challenges (the page's and the one of a
// join sent without a solution before it).
// It then measures the page's solver at difficulty 16 (logged, never
// asserted: docs/waitroom.md, "What it costs").
func TestQueuePageProofOfWork(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	t.Parallel()
	const difficulty = 12
	e := paged(t)
	start := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	e.create(t, fmt.Sprintf(`{"id":"pow","stock":1,"starts_at":%q,"waiting_room":{"enabled":true,"admit_per_second":1000,
		"entry_ttl_seconds":60,"pow_difficulty":%d,"page":{"title":"Prove it"}}}`, start, difficulty))
	reg := prometheus.NewRegistry()
	reg.MustRegister(waitroom.NewCollector(e.mgr.Rooms(), 0, 0))

	// The room asks: a join without a solution is refused.
	r := e.do(t, "POST", "/v1/promotions/pow/queue", `{"user_id":"nobody"}`, "Authorization", "Bearer "+userToken(t, "nobody"))
	if r.status != http.StatusForbidden || r.code() != "challenge_required" || r.body["difficulty"] != float64(difficulty) {
		t.Fatalf("a join without a proof: %d %s", r.status, r.raw)
	}

	ctx := browser(t)
	pw := &pageWatch{failedLoads: true} // the first join's 403 challenge_required is logged as a failed load
	erin := watchTab(t, ctx, pw)
	if err := chromedp.Run(erin,
		chromedp.Navigate(e.url+"/w/pow#token="+userToken(t, "erin")),
		waitJS(stateIs("waiting")+` && `+textOf("position")+` === '1'`),
	); err != nil {
		t.Fatalf("erin's page: %v", err)
	}
	if res := e.tick(t, "pow"); res.Admitted != 1 {
		t.Fatalf("tick: %+v, want erin admitted", res)
	}
	var result string
	if err := chromedp.Run(erin, waitJS(stateIs("claimed")), chromedp.Evaluate(textOf("result"), &result)); err != nil {
		t.Fatalf("erin's claim: %v", err)
	}
	if !strings.Contains(result, "#1") {
		t.Errorf("erin's result: %q", result)
	}
	got := scrapeRoom(t, reg)
	for outcome, want := range map[string]float64{"missing": 2, "issued": 2, "solved": 1, "forged": 0, "unsolved": 0} {
		if v := got["dibs_waitroom_challenges_total{"+outcome+",pow}"]; v != want {
			t.Errorf("challenges %s: %v, want %v (all: %v)", outcome, v, want, got)
		}
	}
	pw.check(t, e.url)

	measureSolver(t, erin)
}

// measureSolver logs the page's solver at difficulty 16 in the browser of
// tab: solves of distinct challenges, their mean time, and the SHA-256 per
// second of Web Crypto as the solver calls it (the batches it hashes
// whole count, so the rate is the solver's, not the nonce's).
func measureSolver(t *testing.T, tab context.Context) {
	t.Helper()
	const (
		difficulty = 16
		solves     = 16
	)
	var out struct {
		Hashes float64 `json:"hashes"`
		MS     float64 `json:"ms"`
		Max    float64 `json:"max"`
	}
	js := fmt.Sprintf(`(async () => {
		let hashes = 0, ms = 0, max = 0;
		for (let i = 0; i < %d; i++) {
			const t0 = performance.now();
			const nonce = Number(await DibsWaitroom.solve('measure-challenge-' + i + '-' + Math.random(), %d));
			const took = performance.now() - t0;
			hashes += (Math.floor(nonce / 64) + 1) * 64;
			ms += took;
			max = Math.max(max, took);
		}
		return {hashes, ms, max};
	})()`, solves, difficulty)
	if err := chromedp.Run(tab, chromedp.Evaluate(js, &out, awaitPromise)); err != nil {
		t.Fatalf("measure the solver: %v", err)
	}
	rate := out.Hashes / (out.MS / 1000)
	t.Logf("headless chromium, Web Crypto: %d solves at difficulty %d, mean %.0f ms, max %.0f ms, %.0f hashes in %.2f s: %.2f M SHA-256/s",
		solves, difficulty, out.MS/solves, out.Max, out.Hashes, out.MS/1000, rate/1e6)
}

// scrapeRoom gathers reg into "name{label values, by label name} value"
// lines, one per series.
func scrapeRoom(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return out
}
