package httpapi_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/dibsio/dibs/internal/testkit/partnertest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// chromiumPath is Debian's chromium, which scripts/deps.sh installs.
const chromiumPath = "/usr/bin/chromium"

// browser starts headless chromium for the test and returns a tab's
// context; everything is cancelled and waited for at the test's end. The
// test fails (never skips) when chromium cannot start.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("chromium is needed for the dashboard's browser tests (run scripts/deps.sh): %v", err)
	}
	// The profile is not a t.TempDir: chromium's helper processes may
	// still write into it for a moment after the browser exited, and
	// TempDir's cleanup fails the test on a directory that is not empty.
	profile, err := os.MkdirTemp("", "dibs-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox, // root in CI
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(profile),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp reports CDP events it does not know (newer chromium) as
	// errors; they are not the page's.
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(func(string, ...any) {}))
	ctx, cancelTime := context.WithTimeout(ctx, 120*time.Second)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc() // waits for chromium to exit
		wait.For(t, 10*time.Second, "chromium's profile removed", func() bool { return os.RemoveAll(profile) == nil })
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("chromium did not start: %v", err)
	}
	return ctx
}

// screenshot saves the page as docs/img/ui-NAME.png when
// DIBS_UI_SCREENSHOTS=1.
func screenshot(name string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		if os.Getenv("DIBS_UI_SCREENSHOTS") != "1" {
			return nil
		}
		var png []byte
		if err := chromedp.FullScreenshot(&png, 100).Do(ctx); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join("..", "docs", "img", "ui-"+name+".png"), png, 0o644)
	})
}

// cellJS is the JavaScript that reads a promotion's number in the table.
func cellJS(promo, field string) string {
	return fmt.Sprintf(`(() => { const c = document.querySelector('tr[data-promotion=%q] td[data-field=%q]');
		return c ? Number(c.textContent.replace(/,/g, '')) : -1; })()`, promo, field)
}

// waitJS waits until the JavaScript expression is true.
// jsClick clicks the element sel finds through the page's own click(),
// whatever moved on the page meanwhile.
func jsClick(sel string) chromedp.Action {
	return chromedp.Evaluate(`document.querySelector(`+strconv.Quote(sel)+`).click()`, nil)
}

func waitJS(expr string) chromedp.Action {
	return chromedp.Poll(expr, nil, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second))
}

// TestDashboardBrowser drives the dashboard in headless chromium against a
// real server (Redis and SQLite): a drop that ran while no page was open
// shows its history and its lag once one opens, a sold-out promotion
// offers no Pause and names the refusals, a wrong token is refused, the
// right one shows the promotions, the numbers move during a claim run, a
// dead letter stands out and is replayed from the page, a user and a claim
// are found with the search box, a report opens, and a promotion is closed
// from the page after its confirmation.
func TestDashboardBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	t.Parallel()
	e := setupInstance(t, backend{"single", "sqlite"}, withWebhooks(t))
	ctx := browser(t)

	// partner issues through a partner's webhook that refuses b's claim: it
	// is dead-lettered.
	partner := partnertest.New(t, "b")
	e.create(t, fmt.Sprintf(`{"id":"partner","name":"Partner codes","kind":"webhook","stock":3,"value":5,"webhook_url":%q}`, partner.URL()))
	e.create(t, `{"id":"closing","name":"To be closed","stock":10}`)
	e.create(t, `{"id":"live","name":"Flash sale","stock":100000}`)

	// A drop that runs while no page is open: 300 units, 400 users, all
	// issued before anyone looks.
	e.create(t, `{"id":"past","name":"Night drop","stock":300}`)
	for i := range 400 {
		r := e.claim(t, "past", fmt.Sprintf("n-%d", i))
		if want := map[bool]int{true: 202, false: 410}[i < 300]; r.status != want {
			t.Fatalf("night claim %d: %d %s", i, r.status, r.raw)
		}
	}
	e.waitIssued(t, "past", 300)

	url := e.url + "/ui/"
	var refused string
	err := chromedp.Run(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(`#token`, chromedp.ByQuery),
		chromedp.SendKeys(`#token`, "not-the-token", chromedp.ByQuery),
		chromedp.Click(`#login-form button[type=submit]`, chromedp.ByQuery),
		waitJS(`document.querySelector('#login-error').textContent.includes('refused')`),
		chromedp.Text(`#login-error`, &refused, chromedp.ByQuery),
		screenshot("login-refused"),
	)
	if err != nil {
		t.Fatalf("wrong token: %v", err)
	}
	if r := e.do(t, "GET", "/v1/promotions/live", ""); r.status != 200 {
		t.Fatal(r.raw)
	}

	err = chromedp.Run(ctx,
		chromedp.Evaluate(`document.querySelector('#token').value = ''`, nil),
		chromedp.SendKeys(`#token`, token, chromedp.ByQuery),
		chromedp.Click(`#login-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`tr[data-promotion="live"]`, chromedp.ByQuery),
		waitJS(cellJS("live", "accepted")+` === 0`),
	)
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	pastOpened(t, ctx)
	err = chromedp.Run(ctx, chromedp.Click(`tr[data-promotion="live"] [data-action="details"]`, chromedp.ByQuery))
	if err != nil {
		t.Fatalf("details of live: %v", err)
	}

	// The claim run: 20 claims every 100 ms for about 3 s, so the page's
	// snapshots (one a second) see it in progress.
	const total = 600
	var wg sync.WaitGroup
	runCtx, stopRun := context.WithCancel(context.Background())
	defer func() { stopRun(); wg.Wait() }()
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for n := 0; n < total; {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
			for range 20 {
				n++
				if r := e.claim(t, "live", fmt.Sprintf("u-%d", n)); r.status != 202 {
					t.Errorf("claim: %d %s", r.status, r.raw)
					return
				}
			}
		}
	})
	var during float64
	err = chromedp.Run(ctx,
		waitJS(cellJS("live", "accepted")+` > 0`),
		chromedp.Evaluate(cellJS("live", "accepted"), &during),
		waitJS(cellJS("live", "accepted")+fmt.Sprintf(` === %d && %s === %d`, total, cellJS("live", "issued"), total)),
	)
	if err != nil {
		t.Fatalf("the numbers did not move during the claim run: %v", err)
	}
	wg.Wait()
	t.Logf("accepted on the page: %v during the run, %d after", during, total)
	if err := chromedp.Run(ctx, screenshot("dashboard")); err != nil {
		t.Fatal(err)
	}

	// A dead letter, replayed from the page once the partner accepts it.
	for _, u := range []string{"a", "b"} {
		waitClaim(t, e, "partner", u)
	}
	err = chromedp.Run(ctx,
		waitJS(`document.querySelector('tr[data-promotion="partner"] td[data-field="failed"]').textContent === '\u26a0 1'`),
		waitJS(`document.querySelector('tr[data-promotion="partner"] td[data-field="failed"]').classList.contains('alert')`),
		chromedp.Click(`tr[data-promotion="partner"] [data-action="details"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#dl-table tr[data-claim] [data-action="replay"]`, chromedp.ByQuery),
		screenshot("dead-letters"),
	)
	if err != nil {
		t.Fatalf("dead letter on the page: %v", err)
	}
	partner.Accept("b")
	err = chromedp.Run(ctx,
		chromedp.Click(`#dl-table tr[data-claim] [data-action="replay"]`, chromedp.ByQuery),
		waitJS(`document.querySelector('#notice').textContent.includes('Replayed 1')`),
		waitJS(cellJS("partner", "failed")+` === 0 && `+cellJS("partner", "issued")+` === 2`),
		waitJS(`!document.querySelector('tr[data-promotion="partner"] td[data-field="failed"]').classList.contains('alert')`),
	)
	if err != nil {
		t.Fatalf("replay from the page: %v", err)
	}
	searchAndReport(t, ctx)

	// Close, confirmed in the dialog; a cancelled one changes nothing.
	closeBtn := `tr[data-promotion="closing"] [data-action="close"]`
	// The buttons are clicked by the element, not at a point of the screen:
	// the table is updated every second, and a row that moved between the
	// point's reckoning and the click would take the click elsewhere.
	err = chromedp.Run(ctx,
		jsClick(closeBtn),
		chromedp.WaitVisible(`#confirm[open]`, chromedp.ByQuery),
		jsClick(`#confirm-cancel`),
		chromedp.WaitNotPresent(`#confirm[open]`, chromedp.ByQuery),
		jsClick(closeBtn),
		chromedp.WaitVisible(`#confirm[open]`, chromedp.ByQuery),
		screenshot("close-confirm"),
		jsClick(`#confirm-ok`),
		waitJS(`document.querySelector('tr[data-promotion="closing"] td[data-field="state"]').textContent.startsWith('ended')`),
	)
	if err != nil {
		var seen string
		_ = chromedp.Run(context.WithoutCancel(ctx), chromedp.Evaluate(`document.querySelector('tr[data-promotion="closing"]').innerText +
			' | ' + document.querySelector('#notice').textContent + ' | ' + document.querySelector('#conn').textContent`, &seen))
		t.Fatalf("close from the page: %v (the page: %s)", err, seen)
	}
	if r := e.do(t, "GET", "/v1/promotions/closing", ""); r.body["closed_at"] == nil || r.body["state"] != "ended" {
		t.Fatalf("closed from the page: %s", r.raw)
	}
	entries, _ := e.audit(t)
	if entries[0]["action"] != "promotion.close" || entries[0]["actor"] != "default" || entries[0]["promotion_id"] != "closing" {
		t.Fatalf("audit of the page's close: %v", entries[0])
	}
}

// pastOpened checks what the page shows of the drop "past", which ran and
// settled before the page opened: its row (sold out, nothing pending, no
// lag, no Pause nor Resume offered, the refusals counted), and its charts,
// which have the drop's claims although nobody watched.
func pastOpened(t *testing.T, ctx context.Context) {
	t.Helper()
	row := `tr[data-promotion="past"]`
	var lag, pauseHidden, resumeHidden string
	var peak, lagPoints float64
	err := chromedp.Run(ctx,
		waitJS(cellJS("past", "accepted")+` === 300 && `+cellJS("past", "issued")+` === 300`),
		waitJS(`document.querySelector('`+row+` td[data-field="state"]').textContent === 'sold out'`),
		chromedp.Text(row+` td[data-field="issue_lag_seconds"]`, &lag, chromedp.ByQuery),
		chromedp.Evaluate(`String(document.querySelector('`+row+` [data-action="pause"]').hidden)`, &pauseHidden),
		chromedp.Evaluate(`String(document.querySelector('`+row+` [data-action="resume"]').hidden)`, &resumeHidden),
		chromedp.Click(row+` [data-action="details"]`, chromedp.ByQuery),
		// The database's timeline and the server's ring: the drop's claims.
		waitJS(`/peak [1-9]/.test(document.querySelector('#c-claims-cap').textContent)`),
		waitJS(`document.querySelectorAll('#c-claims text').length > 4`),
		waitJS(`document.querySelector('#c-lag polyline.l-lag').getAttribute('points').split(' ').length >= 1 &&
			document.querySelector('#c-lag polyline.l-lag').getAttribute('points') !== ''`),
		chromedp.Evaluate(`Number(/peak ([0-9.,]+)/.exec(document.querySelector('#c-claims-cap').textContent)[1].replace(/,/g, ''))`, &peak),
		chromedp.Evaluate(`document.querySelector('#c-lag polyline.l-lag').getAttribute('points').split(' ').length`, &lagPoints),
		screenshot("history"),
	)
	if err != nil {
		t.Fatalf("the drop run while no page was open: %v", err)
	}
	if lag != "0 s" || pauseHidden != "true" || resumeHidden != "true" {
		t.Fatalf("past row: lag %q, pause hidden %s, resume hidden %s", lag, pauseHidden, resumeHidden)
	}
	// At 1,024 px the table scrolls sideways and each row keeps its name in
	// view.
	var nameInView bool
	err = chromedp.Run(ctx,
		chromedp.EmulateViewport(1024, 900),
		waitJS(`document.querySelector('#promos').parentElement.scrollWidth > document.querySelector('#promos').parentElement.clientWidth`),
		chromedp.Evaluate(`document.querySelector('#promos').parentElement.scrollLeft = 10000`, nil),
		chromedp.Evaluate(`(() => { const box = document.querySelector('#promos').parentElement.getBoundingClientRect();
			const th = document.querySelector('tr[data-promotion="past"] th').getBoundingClientRect();
			return document.querySelector('#promos').parentElement.scrollLeft > 0 && Math.abs(th.left - box.left) < 2; })()`, &nameInView),
		screenshot("narrow"),
		chromedp.Evaluate(`document.querySelector('#promos').parentElement.scrollLeft = 0`, nil),
		chromedp.EmulateViewport(1400, 1000),
	)
	if err != nil || !nameInView {
		t.Fatalf("at 1,024 px the promotion's name scrolls away: %v", err)
	}
	t.Logf("a drop nobody watched: peak %v claims/s, %v lag points on the chart", peak, lagPoints)
}

// searchAndReport finds a user of the drop "past" and one of its claims
// with the search box, and opens its report.
func searchAndReport(t *testing.T, ctx context.Context) {
	t.Helper()
	err := chromedp.Run(ctx,
		chromedp.SetValue(`#search-q`, "n-7", chromedp.ByQuery),
		chromedp.Click(`#search-form button[type=submit]`, chromedp.ByQuery),
		waitJS(`document.querySelector('#search-status').textContent.startsWith('1 result')`),
		waitJS(`[...document.querySelectorAll('#search-table tbody td')].some((td) => td.textContent === 'issued')`),
		chromedp.SetValue(`#search-q`, "past#3", chromedp.ByQuery),
		chromedp.Click(`#search-form button[type=submit]`, chromedp.ByQuery),
		waitJS(`[...document.querySelectorAll('#search-table tbody td')].some((td) => td.textContent === 'past#3')`),
		screenshot("search"),
		chromedp.Click(`tr[data-promotion="past"] [data-action="report"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#report-table`, chromedp.ByQuery),
		waitJS(`[...document.querySelectorAll('#report-table th')].some((th) => th.textContent === 'Accepted' &&
			th.nextElementSibling.textContent === '300')`),
		waitJS(`[...document.querySelectorAll('#report-table td')].some((td) => td.textContent.includes('sold_out 100'))`),
		waitJS(`document.querySelector('#c-report polyline').getAttribute('points') !== ''`),
		screenshot("report"),
		chromedp.Click(`#report-close`, chromedp.ByQuery),
	)
	if err != nil {
		t.Fatalf("search and report: %v", err)
	}
}

// waitClaim claims for user, waiting for the promotion to start.
func waitClaim(t *testing.T, e *env, promo, user string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		r := e.claim(t, promo, user)
		if r.status == 202 {
			return
		}
		if r.code() != "not_started" || time.Now().After(deadline) {
			t.Fatalf("claim %s: %d %s", user, r.status, r.raw)
		}
		<-tick.C
	}
}
