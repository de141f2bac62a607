package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dibsio/dibs/client"
)

// The runner's requests: one keep-alive transport, one way to send a
// request and read its answer, and the errors a step reports.

// newTransport is keep-alive HTTP/1.1 with room for every claim in flight to
// keep its connection between claims, so the run measures the server rather
// than connection set-up.
func newTransport(inFlight int) *http.Transport {
	return &http.Transport{
		Proxy:               nil, // a load test talks to the target directly
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        inFlight + 16,
		MaxIdleConnsPerHost: inFlight + 16,
		MaxConnsPerHost:     inFlight + 16,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   false,
	}
}

func newPromotionID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "bench-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

func (r *runner) userID(u int) string { return r.cfg.UserPrefix + strconv.Itoa(u+1) }

// do sends one request and reads the whole answer (so the connection can be
// reused), at most maxBody of it. hdr are more headers, as name, value
// pairs.
func (r *runner) do(ctx context.Context, method, url string, body []byte, admin bool, hdr ...string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if admin {
		req.Header.Set("Authorization", "Bearer "+r.cfg.AdminToken)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: read answer: %w", method, url, err)
	}
	// Drain what is left past the limit so the connection stays reusable.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, data, nil
}

func apiError(op string, status int, body []byte) *APIError {
	e := &APIError{Op: op, Status: status}
	var p problem
	if json.Unmarshal(body, &p) == nil && p.Code != "" {
		e.Code, e.Detail = p.Code, p.Detail
		if e.Detail == "" {
			e.Detail = p.Title
		}
		return e
	}
	e.Detail = snippet(body)
	return e
}

func snippet(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func (r *runner) createPromotion(ctx context.Context) error {
	p := client.NewPromotion{
		ID:           r.cfg.PromotionID,
		Name:         "dibs bench " + r.cfg.PromotionID,
		Mode:         client.ModeFirstCome,
		Kind:         client.KindCoupon,
		Stock:        int64(r.cfg.Stock),
		PerUserLimit: r.cfg.PerUserLimit,
	}
	if r.cfg.WaitingRoom {
		p.WaitingRoom = &client.WaitingRoomSettings{Enabled: true, AdmitPerSecond: r.cfg.AdmitPerSecond,
			PowDifficulty: r.cfg.PowDifficulty}
	}
	_, err := r.api.CreatePromotion(ctx, p)
	return opError("create promotion", err)
}

// opError makes an *APIError of the client's *client.Problem, and names op
// in any other error.
func opError(op string, err error) error {
	var p *client.Problem
	switch {
	case err == nil:
		return nil
	case errors.As(err, &p):
		e := &APIError{Op: op, Status: p.Status, Code: p.Code, Detail: p.Detail}
		if e.Detail == "" {
			e.Detail = p.Title
		}
		return e
	}
	return fmt.Errorf("%s: %w", op, err)
}
