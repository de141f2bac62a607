package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/httpapi/edge"
	"github.com/dibsio/dibs/httpapi/queuepage"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// paged is a watched instance with user tokens on, as the queue page needs.
func paged(t *testing.T) *env {
	t.Helper()
	return watched(t, single, func(c *httpapi.Config) {
		c.Edge = edge.Config{UserTokens: edge.UserTokenConfig{Algorithm: edge.AlgHS256, Secret: userSecret}}
	})
}

// roomedPage is roomed with the queue page's setting page (JSON).
func (e *env) roomedPage(t *testing.T, id string, stock int, page string) {
	t.Helper()
	start := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	e.create(t, fmt.Sprintf(`{"id":%q,"stock":%d,"starts_at":%q,"waiting_room":{"enabled":true,"admit_per_second":1000,"entry_ttl_seconds":60,"page":%s}}`,
		id, stock, start, page))
}

// pageWatch records what a tab asks for and what goes wrong in it: every
// request's URL, console errors (a CSP violation among them) and uncaught
// exceptions.
type pageWatch struct {
	// failedLoads says that loads answered with an error are expected
	// (a proxy that refuses them), so only the other errors count.
	failedLoads bool

	mu       sync.Mutex
	requests []string
	errors   []string
}

// watchTab opens a new tab of the browser ctx, watched by pw.
func watchTab(t *testing.T, ctx context.Context, pw *pageWatch) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	chromedp.ListenTarget(tab, func(ev any) {
		pw.mu.Lock()
		defer pw.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			pw.requests = append(pw.requests, e.Request.URL)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.LevelError && (!pw.failedLoads || e.Entry.Source != log.SourceNetwork) {
				pw.errors = append(pw.errors, string(e.Entry.Source)+": "+e.Entry.Text+" "+e.Entry.URL)
			}
		case *runtime.EventExceptionThrown:
			pw.errors = append(pw.errors, "exception: "+e.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				pw.errors = append(pw.errors, "console.error")
			}
		}
	})
	if err := chromedp.Run(tab, network.Enable(), log.Enable(), runtime.Enable()); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return tab
}

// check fails the test for a request outside the origins allowed, or any
// error in the page.
func (pw *pageWatch) check(t *testing.T, origins ...string) {
	t.Helper()
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if len(pw.requests) == 0 {
		t.Error("no request seen: the tabs were not watched")
	}
	for _, u := range pw.requests {
		ok := false
		for _, o := range origins {
			ok = ok || strings.HasPrefix(u, o+"/")
		}
		if !ok {
			t.Errorf("the page asked for %s, outside %v", u, origins)
		}
	}
	for _, e := range pw.errors {
		t.Errorf("error in the page: %s", e)
	}
}

// stateIs is the JavaScript that says whether the page shows state.
func stateIs(state string) string {
	return fmt.Sprintf(`document.getElementById('room').dataset.state === %q`, state)
}

// textOf is the JavaScript that reads an element's text.
func textOf(id string) string {
	return fmt.Sprintf(`document.getElementById(%q).textContent`, id)
}

// TestQueuePageBrowser drives the queue page in headless chromium against
// a real server: two users join with their user tokens (the token leaves
// the address bar), see their place and the wait, the second one that the
// stock may not last; the room admits the first, whose page claims at once
// and shows the rank, and the second one's page shows the promotion's
// sold-out text. The page has the CSP, asks nothing of another origin and
// shows no error; its proof-of-work solver finds a nonce Go checks; a
// server without user tokens shows a page that refuses to work.
func TestQueuePageBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	t.Parallel()
	e := paged(t)
	e.roomedPage(t, "drop", 1, `{"title":"Spring drop","colors":{"background":"#102030","text":"#f0f0f0","accent":"#ff8800"},
		"texts":{"sold_out":"All gone, sorry."},"return_url":"https://shop.example/drop"}`)
	ctx := browser(t)
	pw := &pageWatch{}
	alice, bob := watchTab(t, ctx, pw), watchTab(t, ctx, pw)

	res, err := http.Get(e.url + "/w/drop")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if csp := res.Header.Get("Content-Security-Policy"); csp != queuepage.CSP ||
		!strings.Contains(csp, "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' https:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'") {
		t.Fatalf("the page's CSP: %q", csp)
	}

	var hash, kept, bg string
	err = chromedp.Run(alice,
		chromedp.Navigate(e.url+"/w/drop#token="+userToken(t, "alice")),
		waitJS(stateIs("waiting")+` && `+textOf("position")+` === '1'`),
		waitJS(`document.getElementById('room').dataset.transport === 'stream'`),
		chromedp.Evaluate(`location.hash`, &hash),
		chromedp.Evaluate(`sessionStorage.getItem('dibs-waitroom:token:drop') || ''`, &kept),
		chromedp.Evaluate(`getComputedStyle(document.body).backgroundColor`, &bg),
		screenshot("queue-waiting"),
	)
	if err != nil {
		t.Fatalf("alice's page: %v", err)
	}
	if hash != "" || kept == "" || bg != "rgb(16, 32, 48)" {
		t.Errorf("after loading: hash %q (want none), token kept %t, background %s", hash, kept != "", bg)
	}
	var wait, short string
	err = chromedp.Run(bob,
		chromedp.Navigate(e.url+"/w/drop#token="+userToken(t, "bob")),
		waitJS(stateIs("waiting")+` && `+textOf("position")+` === '2'`),
		waitJS(`!document.getElementById('stock-short').hidden`),
		chromedp.Evaluate(textOf("wait"), &wait),
		chromedp.Evaluate(textOf("stock-short"), &short),
	)
	if err != nil {
		t.Fatalf("bob's page: %v", err)
	}
	if wait == "" || wait == "–" || !strings.Contains(short, "stock may run out") {
		t.Errorf("bob sees the wait %q and %q", wait, short)
	}

	// A pause shows on the pages of the waiting users.
	if r := e.admin(t, "PATCH", "/v1/promotions/drop", `{"paused":true}`); r.status != http.StatusOK {
		t.Fatalf("pause: %d %s", r.status, r.raw)
	}
	if err := chromedp.Run(bob, waitJS(textOf("note")+`.includes('paused') && `+textOf("wait")+`.includes('once the sale goes on')`)); err != nil {
		t.Fatalf("bob's page while paused: %v", err)
	}
	if r := e.admin(t, "PATCH", "/v1/promotions/drop", `{"paused":false}`); r.status != http.StatusOK {
		t.Fatalf("resume: %d %s", r.status, r.raw)
	}
	if err := chromedp.Run(bob, waitJS(`!`+textOf("note")+`.includes('paused')`)); err != nil {
		t.Fatalf("bob's page after the resume: %v", err)
	}

	if res := e.tick(t, "drop"); res.Admitted != 1 {
		t.Fatalf("tick: %+v, want alice admitted", res)
	}
	var result string
	err = chromedp.Run(alice,
		waitJS(stateIs("claimed")),
		chromedp.Evaluate(textOf("result"), &result),
		screenshot("queue-claimed"),
	)
	if err != nil {
		t.Fatalf("alice's claim: %v", err)
	}
	if !strings.Contains(result, "You got one!") || !strings.Contains(result, "#1") {
		t.Errorf("alice's result: %q", result)
	}
	if r := e.admin(t, "GET", "/v1/promotions/drop/claims/alice", ""); r.status != 200 || r.body["status"] == "none" {
		t.Fatalf("alice's claims: %d %s", r.status, r.raw)
	}
	err = chromedp.Run(bob,
		waitJS(stateIs("sold_out")+` && `+textOf("result")+` === 'All gone, sorry.'`),
		waitJS(`!document.getElementById('back').hidden && document.getElementById('back').href === 'https://shop.example/drop'`),
	)
	if err != nil {
		t.Fatalf("bob's page once sold out: %v", err)
	}

	// The solver, recomputed in Go.
	var nonce string
	if err := chromedp.Run(alice, chromedp.Evaluate(`DibsWaitroom.solve('test-challenge', 8)`, &nonce, awaitPromise)); err != nil {
		t.Fatalf("solve: %v", err)
	}
	if !api.Solved("test-challenge", nonce, 8) || strings.TrimLeft(nonce, "0123456789") != "" {
		t.Errorf("nonce %q: fewer than 8 leading zero bits of SHA-256, or not decimal", nonce)
	}
	pw.check(t, e.url)

	// Without user tokens the page says so and joins nobody.
	plain := setup(t, single)
	plain.roomed(t, "open", 1)
	err = chromedp.Run(alice,
		chromedp.Navigate(plain.url+"/w/open#token="+userToken(t, "alice")),
		waitJS(stateIs("no_tokens")+` && `+textOf("result")+`.includes('user tokens')`),
	)
	if err != nil {
		t.Fatalf("the page without user tokens: %v", err)
	}
	if r := plain.standing(t, "open", "alice"); r.status != http.StatusNotFound {
		t.Errorf("alice joined a room without user tokens: %d %s", r.status, r.raw)
	}
}

// awaitPromise makes Evaluate wait for the promise the expression gives.
func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }

// cutProxy stands between the browser and the server. It can cut the event
// streams it carries and refuse new ones (cut), counts the standings read
// as JSON (polls), and asks every first join for a proof of work
// (challenge_required, difficulty 8), checks the answer and passes the
// join on without it.
type cutProxy struct {
	url    string
	rp     *httputil.ReverseProxy
	polls  atomic.Int64
	solved atomic.Int64

	mu      sync.Mutex
	cut     bool
	cancels []context.CancelFunc
	message string // added to the standings read as JSON, when set
}

// addMessage adds the operator's message to a standing read as JSON.
func (p *cutProxy) addMessage(res *http.Response) error {
	p.mu.Lock()
	msg := p.message
	p.mu.Unlock()
	r := res.Request
	if msg == "" || r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/queue/") ||
		!strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		return nil
	}
	var st map[string]any
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		return err
	}
	res.Body.Close()
	st["message"] = msg
	b, _ := json.Marshal(st)
	res.Body, res.ContentLength = io.NopCloser(strings.NewReader(string(b))), int64(len(b))
	res.Header.Del("Content-Length")
	return nil
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{rp: httputil.NewSingleHostReverseProxy(u)}
	p.rp.FlushInterval = -1
	p.rp.ModifyResponse = p.addMessage
	p.rp.ErrorLog = nil
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// cutStreams ends the streams in flight and refuses the next ones.
func (p *cutProxy) cutStreams() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.cancels {
		c()
	}
}

func (p *cutProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Header.Get("Accept") == "text/event-stream":
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			http.Error(w, "the stream is cut", http.StatusBadGateway)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		p.cancels = append(p.cancels, cancel)
		p.mu.Unlock()
		r = r.WithContext(ctx)
	case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/queue/"):
		p.polls.Add(1)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/queue"):
		if !p.challenge(w, r) {
			return
		}
	}
	p.rp.ServeHTTP(w, r)
}

// challenge answers a join without a proof of work 403
// challenge_required, and takes the proof off a join that carries a good
// one; false when it answered.
func (p *cutProxy) challenge(w http.ResponseWriter, r *http.Request) bool {
	var in struct {
		UserID    string `json:"user_id"`
		Challenge string `json:"challenge"`
		Nonce     string `json:"nonce"`
	}
	raw, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(raw, &in)
	want := "proxy-challenge-" + in.UserID
	if in.Challenge != want || !api.Solved(in.Challenge, in.Nonce, 8) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": 403, "code": "challenge_required",
			"title": "prove some work first", "challenge": want, "difficulty": 8})
		return false
	}
	p.solved.Add(1)
	body, _ := json.Marshal(map[string]string{"user_id": in.UserID})
	r.Body, r.ContentLength = io.NopCloser(strings.NewReader(string(body))), int64(len(body))
	return true
}

// TestQueuePageFallback: behind a proxy that asks for a proof of work, the
// page solves it and joins; it follows the stream, and when the proxy cuts
// the stream and refuses it again the page polls and still claims once
// admitted. A promotion in mode return sends its admitted user to the
// shop's page with the entry token in the fragment, and the token claims.
func TestQueuePageFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	t.Parallel()
	e := paged(t)
	e.roomedPage(t, "cut", 5, `{}`)
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<!doctype html><title>shop</title><p>the shop")
	}))
	t.Cleanup(shop.Close)
	e.roomedPage(t, "ret", 5, fmt.Sprintf(`{"mode":"return","return_url":%q}`, shop.URL+"/checkout?step=2"))
	px := newCutProxy(t, e.url)
	ctx := browser(t)
	pw := &pageWatch{failedLoads: true}
	carol := watchTab(t, ctx, pw)

	err := chromedp.Run(carol,
		chromedp.Navigate(px.url+"/w/cut#token="+userToken(t, "carol")),
		waitJS(stateIs("waiting")+` && `+textOf("position")+` === '1'`),
		waitJS(`document.getElementById('room').dataset.transport === 'stream'`),
	)
	if err != nil {
		t.Fatalf("carol's page: %v", err)
	}
	if px.solved.Load() != 1 {
		t.Fatalf("proofs of work checked: %d, want 1", px.solved.Load())
	}
	polls := px.polls.Load()
	px.cutStreams()
	if err := chromedp.Run(carol, waitJS(`document.getElementById('room').dataset.transport === 'poll'`)); err != nil {
		t.Fatalf("the page did not fall back to polling: %v", err)
	}
	wait.For(t, 10*time.Second, "the page polls", func() bool { return px.polls.Load() >= polls+2 })
	// The operator's message, shown as text.
	const msg = "<b>Back</b> at 10:00 & \"more\""
	px.mu.Lock()
	px.message = msg
	px.mu.Unlock()
	if err := chromedp.Run(carol, waitJS(`!document.getElementById('message').hidden && `+textOf("message")+fmt.Sprintf(` === %q`, msg)+
		` && document.querySelector('#message b') === null`)); err != nil {
		t.Fatalf("the operator's message: %v", err)
	}
	if res := e.tick(t, "cut"); res.Admitted != 1 {
		t.Fatalf("tick: %+v", res)
	}
	if err := chromedp.Run(carol, waitJS(stateIs("claimed")+` && `+textOf("result")+`.includes('#1')`)); err != nil {
		t.Fatalf("carol's claim after the cut: %v", err)
	}

	// Mode return: to the shop, the token in the fragment only.
	dave := watchTab(t, ctx, pw)
	if err := chromedp.Run(dave,
		chromedp.Navigate(e.url+"/w/ret#token="+userToken(t, "dave")),
		waitJS(stateIs("waiting")),
	); err != nil {
		t.Fatalf("dave's page: %v", err)
	}
	e.tick(t, "ret")
	var landed string
	// Asked again while the tab navigates (an evaluation then fails).
	wait.For(t, 20*time.Second, "dave is sent back to the shop", func() bool {
		return chromedp.Run(dave, chromedp.Location(&landed)) == nil && strings.HasPrefix(landed, shop.URL+"/")
	})
	u, err := url.Parse(landed)
	if err != nil {
		t.Fatal(err)
	}
	frag, _ := url.ParseQuery(u.Fragment)
	if u.Path != "/checkout" || u.RawQuery != "step=2" || frag.Get("entry_token") == "" || frag.Get("promotion") != "ret" ||
		strings.Contains(u.RawQuery, "entry_token") {
		t.Fatalf("landed on %s", landed)
	}
	r := e.claim(t, "ret", "dave", "X-Entry-Token", frag.Get("entry_token"), "Authorization", "Bearer "+userToken(t, "dave"))
	if r.status != http.StatusAccepted {
		t.Fatalf("claim with the entry token from the fragment: %d %s", r.status, r.raw)
	}
	pw.check(t, e.url, px.url, shop.URL)
}
