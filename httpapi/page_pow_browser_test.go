package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
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
// challenge, joins with the solution, is admitted and
// claims; the server counted the challenges (the page's and the one of a
// join sent without a solution before it). It then checks the page's own
// SHA-256 against Web Crypto and Go, and its nonces against Go's solver,
// and measures it beside Web Crypto at difficulty 16 (logged, never
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

	checkSolver(t, erin)
	measureSolver(t, erin)
}

// checkSolver checks the page's own SHA-256 and solver in the browser of
// tab: the digests of strings of 0 to 200 characters (some of them
// outside ASCII, so whole blocks, padding that spills into a second block
// and the multi-byte UTF-8 all come up) against Web Crypto's and Go's, and
// the nonces of challenges of 0 to 140 bytes at difficulty 8, and of
// lengths where the digits straddle a block at 12, against Go's reference
// solver (the first nonce from 0 up, so every hash tried on the way
// counts).
func checkSolver(t *testing.T, tab context.Context) {
	t.Helper()
	runes := []rune("dibs-é€😀_0123456789")
	var texts []string
	for n := 0; n <= 200; n++ {
		var b strings.Builder
		for i := range n {
			b.WriteRune(runes[(i*7+n)%len(runes)])
		}
		texts = append(texts, b.String())
	}
	arg, _ := json.Marshal(texts)
	var sums struct {
		Own, Web []string
	}
	js := fmt.Sprintf(`(async () => {
		const hex = (b) => Array.from(new Uint8Array(b), (x) => (x + 256).toString(16).slice(1)).join('');
		const texts = %s, own = [], web = [];
		for (const s of texts) {
			own.push(hex(DibsWaitroom.sha256(s)));
			web.push(hex(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(s))));
		}
		return {own, web};
	})()`, arg)
	if err := chromedp.Run(tab, chromedp.Evaluate(js, &sums, awaitPromise)); err != nil {
		t.Fatalf("hash in the page: %v", err)
	}
	for i, s := range texts {
		want := fmt.Sprintf("%x", sha256.Sum256([]byte(s)))
		if i >= len(sums.Own) || sums.Own[i] != want || sums.Web[i] != want {
			t.Fatalf("SHA-256 of %q (%d bytes): page %v, Web Crypto %v, Go %s", s, len(s), sums.Own[i:min(i+1, len(sums.Own))], sums.Web[i:min(i+1, len(sums.Web))], want)
		}
	}

	type job struct {
		Challenge  string `json:"challenge"`
		Difficulty int    `json:"difficulty"`
	}
	var jobs []job
	alphabet := "AQJ0MQtzcHJpbmctZHJvcAV1LTEyMxR-_9"
	for n := 0; n <= 140; n++ {
		jobs = append(jobs, job{strings.Repeat(alphabet, 5)[:n], 8})
	}
	for _, n := range []int{49, 50, 51, 52, 53, 54, 55, 56, 113, 114, 115, 116, 117, 118, 119, 120, 130} {
		jobs = append(jobs, job{strings.Repeat("9"+alphabet, 5)[:n], 12})
	}
	jobs = append(jobs, job{"é€😀 challenge", 12})
	arg, _ = json.Marshal(jobs)
	var nonces []string
	js = fmt.Sprintf(`(async () => {
		const out = [];
		for (const j of %s) out.push(await DibsWaitroom.solve(j.challenge, j.difficulty));
		return out;
	})()`, arg)
	if err := chromedp.Run(tab, chromedp.Evaluate(js, &nonces, awaitPromise)); err != nil {
		t.Fatalf("solve in the page: %v", err)
	}
	for i, j := range jobs {
		want, err := waitroom.Solve(t.Context(), j.Challenge, j.Difficulty)
		if err != nil {
			t.Fatal(err)
		}
		if i >= len(nonces) || nonces[i] != want {
			t.Fatalf("challenge %q (%d bytes) at difficulty %d: page %v, Go %s", j.Challenge, len(j.Challenge), j.Difficulty, nonces[i:min(i+1, len(nonces))], want)
		}
	}
}

// measureSolver logs the page's solver at difficulty 16 in the browser of
// tab, and beside it a solver that hashes each try with Web Crypto, in
// awaited batches of 64 (the page's solver before it had its own
// SHA-256): solves of the same distinct challenges (both find the same,
// first nonce), their mean time, and the SHA-256 per second (the page's:
// every nonce up to the one found; Web Crypto's: the batches it hashes
// whole).
func measureSolver(t *testing.T, tab context.Context) {
	t.Helper()
	const (
		difficulty = 16
		solves     = 16
	)
	type rate struct {
		Hashes float64 `json:"hashes"`
		MS     float64 `json:"ms"`
		Max    float64 `json:"max"`
	}
	var out struct {
		Own, Web rate
		Same     bool
	}
	js := fmt.Sprintf(`(async () => {
		const enc = new TextEncoder();
		const web = async (challenge, difficulty) => {
			for (let n = 0; ; n += 64) {
				const jobs = [];
				for (let i = 0; i < 64; i++) jobs.push(crypto.subtle.digest('SHA-256', enc.encode(challenge + ':' + (n + i))));
				const sums = await Promise.all(jobs);
				for (let j = 0; j < 64; j++) {
					const h = new Uint8Array(sums[j]);
					let bits = 0;
					for (const b of h) { if (b === 0) { bits += 8; continue; } bits += Math.clz32(b) - 24; break; }
					if (bits >= difficulty) return String(n + j);
				}
			}
		};
		const challenges = [];
		for (let i = 0; i < %d; i++) challenges.push('measure-challenge-' + i + '-' + Math.random() + '-'.repeat(90));
		const own = {hashes: 0, ms: 0, max: 0}, webr = {hashes: 0, ms: 0, max: 0}, found = [];
		for (const c of challenges) {
			const t0 = performance.now();
			const nonce = await DibsWaitroom.solve(c, %d);
			const took = performance.now() - t0;
			own.hashes += Number(nonce) + 1; own.ms += took; own.max = Math.max(own.max, took);
			found.push(nonce);
		}
		let same = true;
		for (let i = 0; i < challenges.length; i++) {
			const t0 = performance.now();
			const nonce = await web(challenges[i], %d);
			const took = performance.now() - t0;
			webr.hashes += (Math.floor(Number(nonce) / 64) + 1) * 64; webr.ms += took; webr.max = Math.max(webr.max, took);
			same = same && nonce === found[i];
		}
		return {own, web: webr, same};
	})()`, solves, difficulty, difficulty)
	if err := chromedp.Run(tab, chromedp.Evaluate(js, &out, awaitPromise)); err != nil {
		t.Fatalf("measure the solver: %v", err)
	}
	if !out.Same {
		t.Errorf("the page's solver and Web Crypto found different nonces")
	}
	for _, r := range []struct {
		name string
		rate
	}{{"the page's solver", out.Own}, {"Web Crypto", out.Web}} {
		t.Logf("headless chromium, %s: %d solves at difficulty %d, mean %.0f ms, max %.0f ms, %.0f hashes in %.2f s: %.2f M SHA-256/s",
			r.name, solves, difficulty, r.MS/solves, r.Max, r.Hashes, r.MS/1000, r.Hashes/(r.MS/1000)/1e6)
	}
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
