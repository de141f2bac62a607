package edge_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/dibsio/dibs/httpapi/edge"
)

// A claim endpoint behind a load balancer at 10.0.0.0/8, for browser pages
// of https://shop.example, with HS256 user tokens and one claim per user
// every ten seconds (kept locally here; in Redis when a client is given).
func Example() {
	secret := "an-example-secret-of-32-bytes-or-more"
	e, err := edge.New(edge.Config{
		TrustedProxies: []string{"10.0.0.0/8"},
		RateLimits: edge.RateLimitConfig{
			Backend: edge.BackendLocal,
			Claim:   edge.Limits{PerUser: edge.Limit{Requests: 1, WindowSeconds: 10}},
		},
		UserTokens: edge.UserTokenConfig{Algorithm: edge.AlgHS256, Secret: secret},
		CORS:       edge.CORSConfig{AllowedOrigins: []string{"https://shop.example"}},
	}, nil)
	if err != nil {
		panic(err)
	}

	claim := func(w http.ResponseWriter, r *http.Request) {
		// A user_id sent in the body must be the token's user, or absent.
		user, err := edge.CheckUser(r.Context(), r.URL.Query().Get("user_id"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ip, _ := edge.ClientIPFrom(r.Context())
		fmt.Fprintf(w, "claim for %s from %s", user, ip)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/promotions/{id}/claims", e.Wrap(edge.KindClaim,
		func(r *http.Request) string { return r.PathValue("id") }, http.HandlerFunc(claim)))

	token, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   "u-1",
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
	}).SignedString([]byte(secret))
	send := func(query string) {
		r := httptest.NewRequest("POST", "/v1/promotions/spring-drop/claims"+query, nil)
		r.RemoteAddr = "10.0.0.1:443"
		r.Header.Set("X-Forwarded-For", "1.2.3.4, 203.0.113.5")
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Origin", "https://shop.example")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Printf("%d origin=%s retry-after=%s\n", w.Code, w.Header().Get("Access-Control-Allow-Origin"), w.Header().Get("Retry-After"))
		if w.Code == http.StatusOK {
			fmt.Println(w.Body)
		}
	}
	send("?user_id=u-1")
	send("?user_id=u-1")
	// Output:
	// 200 origin=https://shop.example retry-after=
	// claim for u-1 from 203.0.113.5
	// 429 origin=https://shop.example retry-after=10
}
