package client_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/dibsio/dibs/client"
	"github.com/dibsio/dibs/httpapi/edge"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

const userTokenSecret = "client-test-user-token-secret-0123456789abcdef"

// userToken signs an HS256 user token for user, valid for an hour.
func userToken(t *testing.T, user string) string {
	t.Helper()
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	claims, err := json.Marshal(map[string]any{"sub": user, "exp": time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	signing := header + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, []byte(userTokenSecret))
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

// TestUserTokens runs a server that checks user tokens (on a Redis of its
// own): a client with a user token claims and reads for that user only; an
// admin client reads for anyone; a client with neither is refused.
func TestUserTokens(t *testing.T) {
	t.Parallel()
	cfg := serverConfig(redistest.Fresh(t, redisserver.Options{AppendFsync: "off"}).Addr(), t.TempDir())
	cfg.Edge.UserTokens = edge.UserTokenConfig{Algorithm: edge.AlgHS256, Secret: userTokenSecret}
	url := startServer(t, cfg)
	ctx := t.Context()
	admin := newClientAt(t, url, client.WithAdminToken(adminToken))
	if _, err := admin.CreatePromotion(ctx, client.NewPromotion{ID: "ut", Stock: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreatePromotion(ctx, client.NewPromotion{ID: "ut-room", Stock: 5,
		WaitingRoom: &client.WaitingRoomSettings{Enabled: true}}); err != nil {
		t.Fatal(err)
	}
	anon := newClientAt(t, url)
	_, err := anon.Claim(ctx, "ut", "u1")
	wantProblem(t, err, client.CodeUnauthorized, http.StatusUnauthorized)

	// Both tokens set: the user endpoints get the user's.
	u1 := newClientAt(t, url, client.WithUserToken(userToken(t, "u1")), client.WithAdminToken(adminToken))
	got, err := u1.Claim(ctx, "ut", "")
	if err != nil || got.Rank != 1 {
		t.Fatalf("claim with the user token: %+v, %v", got, err)
	}
	_, err = u1.Claim(ctx, "ut", "u2")
	if p := wantProblem(t, err, client.CodeInvalidRequest, http.StatusBadRequest); p.Field != "user_id" {
		t.Errorf("field %q, want user_id", p.Field)
	}
	st, err := u1.ClaimStatus(ctx, "ut", "u1")
	if err != nil || len(st.Claims) != 1 {
		t.Fatalf("own status: %+v, %v", st, err)
	}
	_, err = u1.ClaimStatus(ctx, "ut", "u2")
	wantProblem(t, err, client.CodeInvalidRequest, http.StatusBadRequest)
	if _, err := u1.Balance(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if q, err := u1.JoinQueue(ctx, "ut-room", ""); err != nil || q.Status == "" {
		t.Fatalf("join: %+v, %v", q, err)
	}
	if _, err := u1.QueueStatus(ctx, "ut-room", "u1"); err != nil {
		t.Fatal(err)
	}
	// The admin token stands in for any user's.
	st, err = admin.ClaimStatus(ctx, "ut", "u1")
	if err != nil || len(st.Claims) != 1 {
		t.Fatalf("status with the admin token: %+v, %v", st, err)
	}
	// The user token opens no admin endpoint.
	userOnly := newClientAt(t, url, client.WithUserToken(userToken(t, "u1")))
	_, err = userOnly.ListWinners(ctx, "ut", client.PageOptions{})
	wantProblem(t, err, client.CodeUnauthorized, http.StatusUnauthorized)
}

// TestHeaders: what the client sends besides the body.
func TestHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	url := serveHandler(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"pending","claim_id":"p#1","rank":1}`))
	})
	c := newClientAt(t, url+"/", client.WithUserAgent("shop/1"), client.WithAdminToken("a"))
	if c.BaseURL() != url {
		t.Errorf("BaseURL %q", c.BaseURL())
	}
	if _, err := c.Claim(t.Context(), "p", "u", client.IdempotencyKey("k"), client.EntryToken("e")); err != nil {
		t.Fatal(err)
	}
	h := <-got
	for name, want := range map[string]string{"User-Agent": "shop/1", "Authorization": "Bearer a",
		"Idempotency-Key": "k", "X-Entry-Token": "e", "Content-Type": "application/json", "Accept": "application/json"} {
		if h.Get(name) != want {
			t.Errorf("%s: %q, want %q", name, h.Get(name), want)
		}
	}
}

// serveHandler serves h on a free loopback port until the test ends and
// returns its URL.
func serveHandler(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}
