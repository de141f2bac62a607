package httpapi_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
)

// TestCodesCapStock holds a promotion with a code pool to its codes: with
// stock 40 and a pool of 5, 24 users claiming at once through two
// instances get exactly 5 claims accepted, all issued with distinct pool
// codes and none dead-lettered; a later upload of 3 codes lets exactly 3
// more in; a PATCH raising the stock above the pool is refused
// not_enough_codes and changes nothing, one lowering it is taken.
func TestCodesCapStock(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		const pool, top, users = 5, 3, 24
		startAt := time.Now().Add(1500 * time.Millisecond)
		e.create(t, fmt.Sprintf(`{"id":"capped","kind":"coupon","stock":40,"starts_at":%q}`, startAt.UTC().Format(time.RFC3339Nano)))
		codes := func(from, n int) string {
			var q []string
			for i := from; i < from+n; i++ {
				q = append(q, fmt.Sprintf("%q", fmt.Sprintf("CAP-%d", i)))
			}
			return `{"codes":[` + strings.Join(q, ",") + `]}`
		}
		if r := e.admin(t, "POST", "/v1/promotions/capped/codes", codes(0, pool)); r.status != 200 || r.body["total"] != float64(pool) || r.body["stock"] != 40.0 {
			t.Fatalf("upload: %d %s", r.status, r.raw)
		}
		_, _, second := startInstance(t, e.client, e.store, e.prefix, nil, instanceTuning{})
		urls := []string{e.url, second}

		// A raise above the pool is refused; nothing changes.
		r := e.admin(t, "PATCH", "/v1/promotions/capped", `{"stock":41}`)
		if r.status != 409 || r.code() != "not_enough_codes" || !strings.Contains(r.raw, "5 codes") {
			t.Fatalf("PATCH above the pool: %d %s", r.status, r.raw)
		}
		if got := e.do(t, "GET", "/v1/promotions/capped", ""); got.body["stock"] != 40.0 {
			t.Fatalf("a refused PATCH changed the stock: %s", got.raw)
		}

		wait.For(t, 30*time.Second, "the start", func() bool { return time.Now().After(startAt.Add(50 * time.Millisecond)) })
		claimAll := func(prefix string, n int) (accepted int) {
			var (
				mu sync.Mutex
				wg sync.WaitGroup
			)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					u := fmt.Sprintf("%s%d", prefix, i)
					base := urls[i%len(urls)]
					var st int
					wait.For(t, 30*time.Second, u+"'s claim answered", func() bool {
						x := (&env{url: base}).claim(t, "capped", u)
						st = x.status
						if st != 202 && st != 410 && st != 403 {
							t.Errorf("%s: %d %s", u, x.status, x.raw)
						}
						return st != 403 // not started yet: ask again
					})
					if st == 202 {
						mu.Lock()
						accepted++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			return accepted
		}
		if got := claimAll("a", users); got != pool {
			t.Fatalf("%d claims accepted with %d codes", got, pool)
		}
		wait.For(t, 30*time.Second, "the pool's claims issued", func() bool {
			c := e.counts(t, "capped")
			return c["issued"] == float64(pool)
		})

		// A top-up lets exactly as many more in, on both instances.
		if r := e.admin(t, "POST", "/v1/promotions/capped/codes", codes(pool, top)); r.status != 200 || r.body["total"] != float64(pool+top) {
			t.Fatalf("top-up: %d %s", r.status, r.raw)
		}
		if got := claimAll("b", users); got != top {
			t.Fatalf("%d claims accepted after %d codes were added", got, top)
		}
		wait.For(t, 30*time.Second, "every claim issued", func() bool {
			c := e.counts(t, "capped")
			return c["issued"] == float64(pool+top)
		})
		c := e.counts(t, "capped")
		if c["accepted"] != float64(pool+top) || c["failed"] != 0.0 || c["remaining"] != 0.0 {
			t.Fatalf("counts: %v", c)
		}
		if dl := e.admin(t, "GET", "/v1/promotions/capped/dead-letters", ""); strings.Contains(dl.raw, "claim_id") {
			t.Fatalf("dead letters: %s", dl.raw)
		}
		// Lowering a stock still above the pool is taken (the pool keeps
		// capping it); raising it again above the pool is not.
		if r := e.admin(t, "PATCH", "/v1/promotions/capped", `{"stock":9}`); r.status != 200 || r.body["stock"] != 9.0 {
			t.Fatalf("PATCH lowering the stock: %d %s", r.status, r.raw)
		}
		if r := e.admin(t, "PATCH", "/v1/promotions/capped", `{"stock":10}`); r.status != 409 || r.code() != "not_enough_codes" {
			t.Fatalf("PATCH above the topped-up pool: %d %s", r.status, r.raw)
		}
		if r := e.admin(t, "PATCH", "/v1/promotions/capped", `{"stock":8}`); r.status != 200 || r.body["stock"] != 8.0 {
			t.Fatalf("PATCH down to the pool: %d %s", r.status, r.raw)
		}
		if r := e.claim(t, "capped", "late"); r.status != 410 {
			t.Fatalf("a claim after the changes: %d %s", r.status, r.raw)
		}
	})
}
