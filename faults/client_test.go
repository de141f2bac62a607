package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

var httpClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// answer is what dibs answered one request, or the transport error.
type answer struct {
	status     int
	code       string
	rank       int64
	claimID    string
	retryAfter string
	err        error
}

// definitive tells an answer that settles a claim (accepted or refused)
// from one that leaves it unknown (no answer, or a 5xx).
func (a answer) definitive() bool { return a.err == nil && a.status < 500 }

func (a answer) String() string {
	if a.err != nil {
		return "error: " + a.err.Error()
	}
	return fmt.Sprintf("%d %s rank=%d claim=%s retry-after=%q", a.status, a.code, a.rank, a.claimID, a.retryAfter)
}

func do(ctx context.Context, addr, method, path, body string, hdr ...string) answer {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := httpClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{err: err}
	}
	var v struct {
		Code    string `json:"code"`
		Rank    int64  `json:"rank"`
		ClaimID string `json:"claim_id"`
	}
	_ = json.Unmarshal(raw, &v)
	return answer{status: res.StatusCode, code: v.Code, rank: v.Rank, claimID: v.ClaimID, retryAfter: res.Header.Get("Retry-After")}
}

// createPromotion creates a first-come promotion through addr.
func createPromotion(t *testing.T, addr, id string, stock, perUser int) {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"stock":%d,"per_user_limit":%d}`, id, stock, perUser)
	a := do(context.Background(), addr, "POST", "/v1/promotions", body, "Authorization", "Bearer "+adminToken)
	if a.err != nil || a.status != http.StatusCreated {
		t.Fatalf("create promotion %s: %v", id, a)
	}
}

// attempt is one claim a client makes: a user and the Idempotency-Key it
// uses for this claim and every retry of it.
type attempt struct{ user, key string }

// attempts returns n users named prefix0..prefixN-1 making per claims each.
func attempts(prefix string, n, per int) []attempt {
	out := make([]attempt, 0, n*per)
	for i := range n {
		for j := range per {
			u := fmt.Sprintf("%s%d", prefix, i)
			out = append(out, attempt{user: u, key: fmt.Sprintf("k-%s-%d", u, j)})
		}
	}
	return out
}

// ledger is what the clients were told: the first definitive answer of
// every attempt, and the attempts still unknown.
type ledger struct {
	promo string

	mu      sync.Mutex
	final   map[attempt]answer
	unknown map[attempt]answer // the last indefinite answer
	n       int                // answers recorded, definitive or not
}

func newLedger(promo string) *ledger {
	return &ledger{promo: promo, final: map[attempt]answer{}, unknown: map[attempt]answer{}}
}

// claim sends one claim of at through addr and records the answer.
func (l *ledger) claim(ctx context.Context, addr string, at attempt) answer {
	a := do(ctx, addr, "POST", "/v1/promotions/"+l.promo+"/claims",
		fmt.Sprintf(`{"user_id":%q}`, at.user), "Idempotency-Key", at.key)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if _, done := l.final[at]; done {
		return a
	}
	if a.definitive() {
		l.final[at] = a
		delete(l.unknown, at)
	} else {
		l.unknown[at] = a
	}
	return a
}

// answered is the number of answers recorded so far.
func (l *ledger) answered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// accepted returns the attempts answered 202, with their answers.
func (l *ledger) accepted() map[attempt]answer {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[attempt]answer{}
	for at, a := range l.final {
		if a.status == http.StatusAccepted {
			out[at] = a
		}
	}
	return out
}

// finals returns the definitive answers by attempt.
func (l *ledger) finals() map[attempt]answer {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[attempt]answer, len(l.final))
	for at, a := range l.final {
		out[at] = a
	}
	return out
}

// unknowns returns the attempts without a definitive answer.
func (l *ledger) unknowns() []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]attempt, 0, len(l.unknown))
	for at := range l.unknown {
		out = append(out, at)
	}
	return out
}

// burst sends the attempts with workers concurrent clients, spread over
// addrs in turn, once each. After every answer it calls onAnswer (if not
// nil) with the number of answers so far.
func (l *ledger) burst(addrs []string, ats []attempt, workers int, onAnswer func(int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				l.claim(context.Background(), addrs[i%len(addrs)], ats[i])
				if onAnswer != nil {
					onAnswer(l.answered())
				}
			}
		}()
	}
	for i := range ats {
		next <- i
	}
	close(next)
	wg.Wait()
}

// timed is an answer with when its request was sent and answered, and the
// instance that answered.
type timed struct {
	sent, done time.Time
	via        string
	at         attempt
	a          answer
}

// trickle sends the claim of a new user every interval — prefix0,
// prefix1, … with keys k-prefix0, … — through addrs in turn, each in its
// own goroutine, until stop is closed. It calls onAnswer (if not nil) with
// the number of answers so far and each answer; once stop is closed and
// every request answered, the channel it returns yields the answers.
func (l *ledger) trickle(addrs []string, prefix string, interval time.Duration, stop <-chan struct{}, onAnswer func(int, timed)) <-chan []timed {
	out := make(chan []timed, 1)
	go func() {
		var (
			as []timed
			mu sync.Mutex
			wg sync.WaitGroup
		)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				wg.Wait()
				out <- as
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				u := fmt.Sprintf("%s%d", prefix, i)
				a := timed{sent: time.Now(), via: addrs[i%len(addrs)], at: attempt{user: u, key: "k-" + u}}
				a.a = l.claim(context.Background(), a.via, a.at)
				a.done = time.Now()
				mu.Lock()
				as = append(as, a)
				n := len(as)
				mu.Unlock()
				if onAnswer != nil {
					onAnswer(n, a)
				}
			}(i)
		}
	}()
	return out
}

// settle retries every unknown attempt with its key through addrs until
// each has a definitive answer, as a client that lost its answer does.
func (l *ledger) settle(t *testing.T, addrs []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for round := 0; ; round++ {
		left := l.unknowns()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			l.mu.Lock()
			a := l.unknown[left[0]]
			l.mu.Unlock()
			t.Fatalf("%d claims still without a definitive answer after %v, e.g. %v: %v", len(left), within, left[0], a)
		}
		l.burst(addrs, left, 8, nil)
		if len(l.unknowns()) > 0 {
			<-tick.C
		}
	}
}

// checkReplays retries every accepted attempt with its key and checks the
// original answer comes back (Idempotency-Key retries are safe).
func (l *ledger) checkReplays(t *testing.T, addr string) {
	t.Helper()
	for at, first := range l.accepted() {
		again := do(context.Background(), addr, "POST", "/v1/promotions/"+l.promo+"/claims",
			fmt.Sprintf(`{"user_id":%q}`, at.user), "Idempotency-Key", at.key)
		if again.status != http.StatusAccepted || again.claimID != first.claimID || again.rank != first.rank {
			t.Errorf("retry of accepted %v: got %v, first answer %v", at, again, first)
		}
	}
}

// readiness returns the status /readyz of addr answers (0 without one).
func readiness(addr string) int {
	return do(context.Background(), addr, "GET", "/readyz", "").status
}

// waitReady waits until addr answers /readyz with 200.
func waitReady(t *testing.T, addr string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		a := do(context.Background(), addr, "GET", "/readyz", "")
		if a.err == nil && a.status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %v: %v", addr, within, a)
		}
		<-tick.C
	}
}
