package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// DefaultWinners is how many winners a report shows.
const DefaultWinners = 5

// Winner is one of the first issued claims of a run's promotion, in rank
// order, as the winners endpoint lists them.
type Winner struct {
	Rank    int64  `json:"rank"`
	ClaimID string `json:"claim_id"`
	UserID  string `json:"user_id"`
	// Code is the claim's code; empty for kinds that hand out none.
	Code string `json:"code,omitempty"`
}

// ReadWinners returns the first n issued claims of the promotion, by
// rank, read from target's winners endpoint (GET
// /v1/promotions/{id}/claims?status=issued&limit=n) with adminToken.
// client nil is http.DefaultClient.
func ReadWinners(ctx context.Context, client *http.Client, target, adminToken, promotionID string, n int) ([]Winner, error) {
	if client == nil {
		client = http.DefaultClient
	}
	u := target + "/v1/promotions/" + url.PathEscape(promotionID) + "/claims?status=issued&limit=" + strconv.Itoa(n)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("read winners: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read winners: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read winners: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, apiError("read winners", resp.StatusCode, body)
	}
	var page struct {
		Claims []Winner `json:"claims"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("read winners: %w", err)
	}
	if page.Claims == nil {
		page.Claims = []Winner{}
	}
	return page.Claims, nil
}
