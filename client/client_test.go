package client_test

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/client"
	"github.com/dibsio/dibs/internal/testkit/partnertest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// issueTimeout bounds the waits for the server's asynchronous work.
const issueTimeout = 30 * time.Second

func testHTTPClient(t *testing.T) *http.Client {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

// id returns an id unique to the test.
func id(t *testing.T, suffix string) string {
	t.Helper()
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return fmt.Sprintf("%s-%s-%d", name, suffix, time.Now().UnixNano()%1_000_000)
}

// wantProblem fails unless err is a *Problem with code and status.
func wantProblem(t *testing.T, err error, code string, status int) *client.Problem {
	t.Helper()
	var p *client.Problem
	if !errors.As(err, &p) {
		t.Fatalf("got %v (%T), want a %s problem", err, err, code)
	}
	if p.Code != code || p.Status != status {
		t.Fatalf("got problem %d %q (%v), want %d %q", p.Status, p.Code, p, status, code)
	}
	if !client.IsProblem(err, code) {
		t.Fatalf("IsProblem(%v, %q) = false", err, code)
	}
	return p
}

// waitIssued waits until every accepted claim of promotion is issued or
// failed.
func waitIssued(t *testing.T, c *client.Client, promotion string) *client.Promotion {
	t.Helper()
	var p *client.Promotion
	wait.NoError(t, issueTimeout, "every claim issued", func() error {
		var err error
		p, err = c.GetPromotion(t.Context(), promotion)
		if err != nil {
			return err
		}
		if p.Counts.Pending != 0 {
			return fmt.Errorf("%d pending", p.Counts.Pending)
		}
		return nil
	})
	return p
}

func TestPromotions(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx := t.Context()
	pid := id(t, "p")

	key := client.IdempotencyKey("create-" + pid)
	p, err := c.CreatePromotion(ctx, client.NewPromotion{ID: pid, Name: "Spring", Stock: 5, PerUserLimit: 2, Value: 500}, key)
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != pid || p.Name != "Spring" || p.Stock != 5 || p.PerUserLimit != 2 || p.Value != 500 ||
		p.State != client.StateOpen || p.Mode != client.ModeFirstCome || p.Kind != client.KindCoupon ||
		p.Counts.Remaining == nil || *p.Counts.Remaining != 5 || p.CreatedAt.IsZero() || !p.EndsAt.After(p.StartsAt) {
		t.Fatalf("created %+v", p)
	}
	again, err := c.CreatePromotion(ctx, client.NewPromotion{ID: pid, Name: "Spring", Stock: 5, PerUserLimit: 2, Value: 500}, key)
	if err != nil || again.ID != pid || !again.CreatedAt.Equal(p.CreatedAt) {
		t.Fatalf("retry with the key: %+v, %v; want the first answer", again, err)
	}
	_, err = c.CreatePromotion(ctx, client.NewPromotion{ID: pid, Stock: 5})
	wantProblem(t, err, client.CodeAlreadyExists, http.StatusConflict)
	_, err = c.CreatePromotion(ctx, client.NewPromotion{ID: pid + "-x", Stock: -1})
	if pr := wantProblem(t, err, client.CodeInvalidRequest, http.StatusBadRequest); pr.Field != "stock" {
		t.Errorf("field %q, want stock", pr.Field)
	}
	_, err = c.GetPromotion(ctx, pid+"-none")
	if pr := wantProblem(t, err, client.CodeNotFound, http.StatusNotFound); len(pr.RequestID) < 20 {
		t.Errorf("the problem names no request: %+v", pr)
	}
	// A request sent under the caller's id is answered under it.
	_, err = c.CreatePromotion(ctx, client.NewPromotion{ID: pid, Stock: 5}, client.RequestID("ops-check-7"))
	if pr := wantProblem(t, err, client.CodeAlreadyExists, http.StatusConflict); pr.RequestID != "ops-check-7" {
		t.Errorf("request id %q, want ops-check-7", pr.RequestID)
	}

	got, err := c.GetPromotion(ctx, pid)
	if err != nil || got.ID != pid || got.Stock != 5 {
		t.Fatalf("get: %+v, %v", got, err)
	}

	// A second one, to page through both.
	pid2 := pid + "-2"
	if _, err := c.CreatePromotion(ctx, client.NewPromotion{ID: pid2, Stock: 1}); err != nil {
		t.Fatal(err)
	}
	page, err := c.ListPromotions(ctx, client.PromotionFilter{State: client.StateOpen, Sort: "-created_at"}, client.PageOptions{Limit: 1})
	if err != nil || len(page.Promotions) != 1 || page.NextCursor == nil {
		t.Fatalf("first page of 1: %+v, %v", page, err)
	}
	var seen []string
	for p, err := range c.Promotions(ctx, client.PromotionFilter{State: client.StateOpen}) {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, p.ID)
	}
	if !slices.Contains(seen, pid) || !slices.Contains(seen, pid2) {
		t.Fatalf("iterator saw %v, want %s and %s among them", seen, pid, pid2)
	}
	_, err = c.ListPromotions(ctx, client.PromotionFilter{State: "bogus"}, client.PageOptions{})
	if pr := wantProblem(t, err, client.CodeInvalidRequest, http.StatusBadRequest); pr.Field != "state" {
		t.Errorf("field %q, want state", pr.Field)
	}

	// Pause: a claim is refused with Retry-After; resume: it goes through.
	paused, name := true, "Spring 2"
	p, err = c.PatchPromotion(ctx, pid, client.PromotionPatch{Paused: &paused, Name: &name})
	if err != nil || !p.Paused || p.Name != name {
		t.Fatalf("patch: %+v, %v", p, err)
	}
	_, err = c.Claim(ctx, pid, "u1")
	if pr := wantProblem(t, err, client.CodePaused, http.StatusConflict); pr.RetryAfter <= 0 {
		t.Errorf("paused without Retry-After: %+v", pr)
	}
	paused = false
	if _, err := c.PatchPromotion(ctx, pid, client.PromotionPatch{Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	low := int64(0)
	_, err = c.PatchPromotion(ctx, pid, client.PromotionPatch{Stock: &low})
	wantProblem(t, err, client.CodeInvalidRequest, http.StatusBadRequest)
	if _, err := c.Claim(ctx, pid, "u1"); err != nil {
		t.Fatal(err)
	}

	rb, err := c.RebuildPromotion(ctx, pid)
	if err != nil || rb.PromotionID != pid {
		t.Fatalf("rebuild: %+v, %v", rb, err)
	}

	_, err = c.ArchivePromotion(ctx, pid)
	wantProblem(t, err, client.CodeNotEnded, http.StatusConflict)
	p, err = c.ClosePromotion(ctx, pid)
	if err != nil || p.State != client.StateEnded || p.ClosedAt == nil {
		t.Fatalf("close: %+v, %v", p, err)
	}
	_, err = c.Claim(ctx, pid, "u2")
	wantProblem(t, err, client.CodeEnded, http.StatusForbidden)
	p, err = c.ArchivePromotion(ctx, pid)
	if err != nil || p.ArchivedAt == nil {
		t.Fatalf("archive: %+v, %v", p, err)
	}
	page, err = c.ListPromotions(ctx, client.PromotionFilter{State: client.StateArchived}, client.PageOptions{Limit: 1000})
	if err != nil || !slices.ContainsFunc(page.Promotions, func(p client.Promotion) bool { return p.ID == pid }) {
		t.Fatalf("archived list: %+v, %v; want %s in it", page, err, pid)
	}
}

func TestClaimsAndWinners(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx := t.Context()
	pid := id(t, "w")
	if _, err := c.CreatePromotion(ctx, client.NewPromotion{ID: pid, Stock: 3, RevokeReturnsStock: true}); err != nil {
		t.Fatal(err)
	}
	first, err := c.Claim(ctx, pid, "u1", client.IdempotencyKey("k1"))
	if err != nil || first.Rank != 1 || first.ClaimID == "" || first.Status != client.StatusPending {
		t.Fatalf("claim: %+v, %v", first, err)
	}
	retry, err := c.Claim(ctx, pid, "u1", client.IdempotencyKey("k1"))
	if err != nil || *retry != *first {
		t.Fatalf("retry with the key: %+v, %v; want %+v", retry, err, first)
	}
	_, err = c.Claim(ctx, pid, "u1")
	wantProblem(t, err, client.CodeAlreadyClaimed, http.StatusConflict)
	for _, u := range []string{"u2", "u3"} {
		if _, err := c.Claim(ctx, pid, u); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.Claim(ctx, pid, "u4")
	wantProblem(t, err, client.CodeSoldOut, http.StatusGone)
	_, err = c.Claim(ctx, pid, "not an id")
	wantProblem(t, err, client.CodeInvalidRequest, http.StatusBadRequest)

	p := waitIssued(t, c, pid)
	if p.Counts.Issued != 3 || p.State != client.StateSoldOut {
		t.Fatalf("after issuance: %+v", p)
	}
	st, err := c.ClaimStatus(ctx, pid, "u1")
	if err != nil || st.Status != client.StatusIssued || len(st.Claims) != 1 || st.Claims[0].Code == "" || st.Claims[0].IssuedAt == nil {
		t.Fatalf("status of u1: %+v, %v", st, err)
	}
	none, err := c.ClaimStatus(ctx, pid, "u4")
	if err != nil || none.Status != client.StatusNone || len(none.Claims) != 0 {
		t.Fatalf("status of u4: %+v, %v", none, err)
	}

	page, err := c.ListWinners(ctx, pid, client.PageOptions{Limit: 2})
	if err != nil || len(page.Claims) != 2 || page.NextCursor == nil || page.Claims[0].Rank != 1 {
		t.Fatalf("first winners page: %+v, %v", page, err)
	}
	var ranks []int64
	for w, err := range c.Winners(ctx, pid) {
		if err != nil {
			t.Fatal(err)
		}
		if w.UserID == "" || w.Code == "" || w.IssuedAt.IsZero() {
			t.Errorf("winner %+v", w)
		}
		ranks = append(ranks, w.Rank)
	}
	if !slices.Equal(ranks, []int64{1, 2, 3}) {
		t.Fatalf("winners' ranks %v", ranks)
	}
	rc, err := c.WinnersCSV(ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(rc).ReadAll()
	rc.Close()
	if err != nil || len(rows) != 4 || strings.Join(rows[0], ",") != "rank,claim_id,user_id,slot,accepted_at,issued_at,code" {
		t.Fatalf("CSV: %v, %v", rows, err)
	}

	rv, err := c.RevokeClaims(ctx, pid, []string{first.ClaimID, pid + "#99"})
	if err != nil || rv.Revoked != 1 || !slices.Equal(rv.Skipped, []string{pid + "#99"}) {
		t.Fatalf("revoke: %+v, %v", rv, err)
	}
	st, err = c.ClaimStatus(ctx, pid, "u1")
	if err != nil || st.Status != client.StatusRevoked {
		t.Fatalf("status after revoke: %+v, %v", st, err)
	}
	_, err = c.RevokeClaims(ctx, pid, nil)
	wantProblem(t, err, client.CodeInvalidRequest, http.StatusBadRequest)

	// Admin endpoints without a token.
	anon := newClientAt(t, baseURL(t))
	_, err = anon.ListWinners(ctx, pid, client.PageOptions{})
	wantProblem(t, err, client.CodeUnauthorized, http.StatusUnauthorized)
}

func TestGrants(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx := t.Context()
	pid := id(t, "g")
	if _, err := c.CreatePromotion(ctx, client.NewPromotion{ID: pid, Mode: client.ModeGrant, Kind: client.KindPoint, Value: 7}); err != nil {
		t.Fatal(err)
	}
	g, err := c.Grant(ctx, pid, []string{"a1", "a2"})
	if err != nil || g.Enqueued != 2 || g.Duplicates != 0 {
		t.Fatalf("grant: %+v, %v", g, err)
	}
	_, err = c.Grant(ctx, pid, []string{"a3", "bad id"})
	wantProblem(t, err, client.CodeInvalidRequest, http.StatusBadRequest)

	body := strings.NewReader("{\"user_id\":\"a2\"}\n{\"user_id\":\"a3\"}\nnot json\n{\"user_id\":\"a4\"}\n")
	g, err = c.GrantNDJSON(ctx, pid, body)
	if err != nil || g.Enqueued != 2 || g.Duplicates != 1 || g.Rejected != 1 || len(g.Errors) != 1 || g.Errors[0].Line != 3 {
		t.Fatalf("NDJSON grant: %+v, %v", g, err)
	}
	p := waitIssued(t, c, pid)
	if p.Counts.Issued != 4 || p.Counts.Remaining != nil {
		t.Fatalf("after issuance: %+v", p)
	}
	b, err := c.Balance(ctx, "a3")
	if err != nil || b.UserID != "a3" || b.Balance < 7 || b.Entries < 1 {
		t.Fatalf("balance: %+v, %v", b, err)
	}
	_, err = c.Balance(ctx, "bad id")
	wantProblem(t, err, client.CodeInvalidRequest, http.StatusBadRequest)
}

// TestCodesAndDeadLetters: a pool of codes caps the claims until more codes
// come; a claim the partner's webhook refuses is dead-lettered, and once the
// partner accepts it a replay issues it; another dead letter is voided.
func TestCodesAndDeadLetters(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx := t.Context()
	pid := id(t, "d")
	start := time.Now().Add(1500 * time.Millisecond)
	if _, err := c.CreatePromotion(ctx, client.NewPromotion{ID: pid, Stock: 4, StartsAt: &start}); err != nil {
		t.Fatal(err)
	}
	up, err := c.UploadCodes(ctx, pid, []string{"PX-1"})
	if err != nil || up.Added != 1 || up.Total != 1 || up.Free != 1 {
		t.Fatalf("codes: %+v, %v", up, err)
	}
	up, err = c.UploadCodesNDJSON(ctx, pid, strings.NewReader("{\"code\":\"PX-1\"}\n{\"code\":\"\"}\n"))
	if err != nil || up.Added != 0 || up.Duplicates != 1 || up.Rejected != 1 {
		t.Fatalf("NDJSON codes: %+v, %v", up, err)
	}
	_, err = c.UploadCodes(ctx, pid, nil)
	wantProblem(t, err, client.CodeInvalidRequest, http.StatusBadRequest)
	stock := int64(5)
	_, err = c.PatchPromotion(ctx, pid, client.PromotionPatch{Stock: &stock})
	wantProblem(t, err, client.CodeNotEnoughCodes, http.StatusConflict)

	_, err = c.Claim(ctx, pid, "early")
	wantProblem(t, err, client.CodeNotStarted, http.StatusForbidden)
	wait.NoError(t, issueTimeout, "the promotion opens", func() error {
		_, err := c.Claim(ctx, pid, "u1")
		return err
	})
	_, err = c.Claim(ctx, pid, "u2")
	wantProblem(t, err, client.CodeSoldOut, http.StatusGone)
	if _, err := c.UploadCodes(ctx, pid, []string{"PX-2"}); err != nil {
		t.Fatal(err)
	}
	wait.NoError(t, issueTimeout, "a claim once a code is added", func() error {
		_, err := c.Claim(ctx, pid, "u2")
		return err
	})
	if p := waitIssued(t, c, pid); p.Counts.Issued != 2 || p.Counts.Failed != 0 {
		t.Fatalf("counts %+v, want 2 issued and none failed", p.Counts)
	}

	// A partner that refuses two users' claims.
	partner := partnertest.New(t, "r1", "r2")
	hook := id(t, "h")
	if _, err := c.CreatePromotion(ctx, client.NewPromotion{ID: hook, Kind: client.KindWebhook, Stock: 4, Value: 10,
		WebhookURL: partner.URL()}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"ok", "r1", "r2"} {
		if _, err := c.Claim(ctx, hook, u); err != nil {
			t.Fatal(err)
		}
	}
	p := waitIssued(t, c, hook)
	if p.Counts.Issued != 1 || p.Counts.Failed != 2 {
		t.Fatalf("counts %+v, want 1 issued and 2 failed", p.Counts)
	}
	page, err := c.ListDeadLetters(ctx, hook, client.PageOptions{Limit: 1})
	if err != nil || len(page.DeadLetters) != 1 || page.NextCursor == nil {
		t.Fatalf("first dead-letter page: %+v, %v", page, err)
	}
	var dead []client.DeadLetter
	for d, err := range c.DeadLetters(ctx, hook) {
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(d.Reason, "400") || !strings.Contains(d.Reason, "not eligible") || d.At.IsZero() {
			t.Errorf("dead letter %+v", d)
		}
		dead = append(dead, d)
	}
	if len(dead) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dead))
	}
	partner.Accept(dead[0].UserID)
	n, err := c.ReplayDeadLetters(ctx, hook, []string{dead[0].ClaimID})
	if err != nil || n != 1 {
		t.Fatalf("replay: %d, %v", n, err)
	}
	n, err = c.VoidDeadLetters(ctx, hook, []string{dead[1].ClaimID})
	if err != nil || n != 1 {
		t.Fatalf("void: %d, %v", n, err)
	}
	wait.NoError(t, issueTimeout, "the replayed claim issued", func() error {
		st, err := c.ClaimStatus(ctx, hook, dead[0].UserID)
		if err != nil {
			return err
		}
		if st.Status != client.StatusIssued || st.Claims[0].Code != "P-"+dead[0].UserID {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	n, err = c.ReplayDeadLetters(ctx, hook, nil)
	if err != nil || n != 0 {
		t.Fatalf("replay all with none left: %d, %v", n, err)
	}
}

func TestQueue(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx := t.Context()
	pid := id(t, "q")
	if _, err := c.CreatePromotion(ctx, client.NewPromotion{ID: pid, Stock: 2,
		WaitingRoom: &client.WaitingRoomSettings{Enabled: true, AdmitPerSecond: 100}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Claim(ctx, pid, "u1")
	wantProblem(t, err, client.CodeNotAdmitted, http.StatusForbidden)
	st, err := c.JoinQueue(ctx, pid, "u1")
	if err != nil || (st.Status != client.QueueWaiting && st.Status != client.QueueAdmitted) {
		t.Fatalf("join: %+v, %v", st, err)
	}
	wait.NoError(t, issueTimeout, "u1 admitted", func() error {
		st, err = c.QueueStatus(ctx, pid, "u1")
		if err == nil && st.Status != client.QueueAdmitted {
			err = fmt.Errorf("status %q", st.Status)
		}
		return err
	})
	if st.EntryToken == "" || st.ExpiresAt == nil {
		t.Fatalf("admitted without a pass: %+v", st)
	}
	cl, err := c.Claim(ctx, pid, "u1", client.EntryToken(st.EntryToken))
	if err != nil || cl.Rank != 1 {
		t.Fatalf("claim with the pass: %+v, %v", cl, err)
	}
	_, err = c.QueueStatus(ctx, pid, "nobody")
	wantProblem(t, err, client.CodeNotFound, http.StatusNotFound)

	// The opening moment's record is secret before the start.
	pre := pid + "-pre"
	start := time.Now().Add(time.Hour)
	if _, err := c.CreatePromotion(ctx, client.NewPromotion{ID: pre, Stock: 2, StartsAt: &start,
		WaitingRoom: &client.WaitingRoomSettings{Enabled: true, PrequeueSeconds: 7200}}); err != nil {
		t.Fatal(err)
	}
	st, err = c.JoinQueue(ctx, pre, "u1")
	if err != nil || st.Status != client.QueuePrequeue || st.ShuffleAt == nil {
		t.Fatalf("prequeue join: %+v, %v", st, err)
	}
	_, err = c.Prequeue(ctx, pre, client.PageOptions{})
	wantProblem(t, err, client.CodeNotStarted, http.StatusForbidden)
}

func TestAdministration(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx := t.Context()
	name := id(t, "tok")
	tok, err := c.CreateAdminToken(ctx, name)
	if err != nil || tok.Name != name || tok.Token == "" || tok.Source != "api" || tok.CreatedBy != "default" {
		t.Fatalf("create token: %+v, %v", tok, err)
	}
	_, err = c.CreateAdminToken(ctx, name)
	wantProblem(t, err, client.CodeAlreadyExists, http.StatusConflict)
	other := newClientAt(t, baseURL(t), client.WithAdminToken(tok.Token))
	list, err := other.AdminTokens(ctx)
	if err != nil || !slices.ContainsFunc(list, func(a client.AdminToken) bool { return a.Name == name && a.Token == "" }) {
		t.Fatalf("tokens: %+v, %v", list, err)
	}
	if err := c.DeleteAdminToken(ctx, name); err != nil {
		t.Fatal(err)
	}
	_, err = other.AdminTokens(ctx)
	wantProblem(t, err, client.CodeUnauthorized, http.StatusUnauthorized)
	err = c.DeleteAdminToken(ctx, name)
	wantProblem(t, err, client.CodeNotFound, http.StatusNotFound)

	var actions []string
	for e, err := range c.Audit(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Actor == "default" && strings.Contains(string(e.Detail), name) {
			actions = append(actions, e.Action)
		}
	}
	if !slices.Contains(actions, "admin_token.create") || !slices.Contains(actions, "admin_token.delete") {
		t.Fatalf("audit actions naming the token: %v", actions)
	}
	ap, err := c.ListAudit(ctx, client.PageOptions{Limit: 1})
	if err != nil || len(ap.Entries) != 1 {
		t.Fatalf("audit page: %+v, %v", ap, err)
	}

	pid := id(t, "e")
	if _, err := c.CreatePromotion(ctx, client.NewPromotion{ID: pid, Stock: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(ctx, pid, "eraseme"); err != nil {
		t.Fatal(err)
	}
	waitIssued(t, c, pid)
	var issued []client.Event
	wait.NoError(t, issueTimeout, "the claim.issued event", func() error {
		issued = issued[:0]
		cursor := ""
		for {
			page, err := c.Events(ctx, client.EventsOptions{Cursor: cursor, Limit: 1000, Types: []string{"claim.issued"}})
			if err != nil {
				return err
			}
			for _, e := range page.Events {
				if e.Type != "claim.issued" {
					return fmt.Errorf("event of type %s through the filter", e.Type)
				}
				if e.PromotionID == pid {
					issued = append(issued, e)
				}
			}
			if len(page.Events) == 0 {
				break
			}
			cursor = page.NextCursor
		}
		if len(issued) != 1 {
			return fmt.Errorf("%d claim.issued events of %s", len(issued), pid)
		}
		return nil
	})
	if e := issued[0]; e.ID == "" || e.Seq < 1 || e.ClaimID == nil || len(e.Data) == 0 {
		t.Fatalf("event %+v", e)
	}
	_, err = c.Events(ctx, client.EventsOptions{Types: []string{"bogus"}})
	wantProblem(t, err, client.CodeInvalidRequest, http.StatusBadRequest)

	if err := c.EraseUser(ctx, "eraseme"); err != nil {
		t.Fatal(err)
	}
	if err := c.Healthz(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Readyz(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestTransportErrors(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://host", "http://", "http://h/?q=1", "http://u:p@h"} {
		if _, err := client.New(bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	// A port nothing listens on: a RequestError, not a Problem.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newClientAt(t, "http://"+addr)
	_, err = c.GetPromotion(t.Context(), "p")
	var re *client.RequestError
	var pr *client.Problem
	if !errors.As(err, &re) || errors.As(err, &pr) || re.Method != http.MethodGet ||
		!strings.HasPrefix(err.Error(), "GET http://"+addr+"/v1/promotions/p: dial tcp") {
		t.Fatalf("unreachable: %v (%T)", err, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = newClient(t).GetPromotion(ctx, "p")
	if !errors.Is(err, context.Canceled) || !errors.As(err, &re) {
		t.Fatalf("cancelled: %v", err)
	}

	// An answer that is not a problem document keeps its status.
	proxy := serveHandler(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	})
	_, err = newClientAt(t, proxy).GetPromotion(t.Context(), "p")
	if !errors.As(err, &pr) || pr.Status != http.StatusBadGateway || pr.Code != "" || pr.Detail != "bad gateway" ||
		pr.Error() != "HTTP 502: bad gateway" {
		t.Fatalf("a proxy's answer: %v", err)
	}
}

// TestQueueLevers: a room's proof of work is answered by the Go solver
// through the client (the challenge comes in the Problem), and PATCH
// changes the room's levers, the message reaching the standing.
func TestQueueLevers(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx := t.Context()
	pid := id(t, "lv")
	start := time.Now().Add(time.Hour) // nobody is let in: the standings stay waiting
	if _, err := c.CreatePromotion(ctx, client.NewPromotion{ID: pid, Stock: 5, StartsAt: &start,
		WaitingRoom: &client.WaitingRoomSettings{Enabled: true, PowDifficulty: 8, MaxActive: 2}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.JoinQueue(ctx, pid, "u1")
	p := wantProblem(t, err, client.CodeChallengeRequired, http.StatusForbidden)
	if p.Challenge == "" || p.Difficulty != 8 || p.ChallengeExpiresAt == nil {
		t.Fatalf("challenge_required without its challenge: %+v", p)
	}
	nonce, err := client.SolveChallenge(ctx, p.Challenge, p.Difficulty)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.JoinQueue(ctx, pid, "u1", client.Proof{Challenge: p.Challenge, Nonce: nonce})
	if err != nil || st.Status != client.QueueWaiting {
		t.Fatalf("join with the solution: %+v, %v", st, err)
	}
	if st, err := c.JoinQueueSolving(ctx, pid, "u2"); err != nil || st.Status != client.QueueWaiting || *st.Position != 2 {
		t.Fatalf("join solving: %+v, %v", st, err)
	}
	rate, msg, off := 300, "Ten left", 0
	pr, err := c.PatchPromotion(ctx, pid, client.PromotionPatch{WaitingRoom: &client.WaitingRoomPatch{
		AdmitPerSecond: &rate, Message: &msg, PowDifficulty: &off}})
	if err != nil || pr.WaitingRoom.AdmitPerSecond != 300 || pr.WaitingRoom.Message != msg ||
		pr.WaitingRoom.PowDifficulty != 0 || pr.WaitingRoom.MaxActive != 2 {
		t.Fatalf("patch: %+v, %v", pr, err)
	}
	if st, err := c.QueueStatus(ctx, pid, "u1"); err != nil || st.Message != msg {
		t.Fatalf("status after the message: %+v, %v", st, err)
	}
	if st, err := c.JoinQueue(ctx, pid, "u3"); err != nil || st.Message != msg {
		t.Fatalf("join with the proof of work off: %+v, %v", st, err)
	}
	bad := 25
	_, err = c.PatchPromotion(ctx, pid, client.PromotionPatch{WaitingRoom: &client.WaitingRoomPatch{PowDifficulty: &bad}})
	if p := wantProblem(t, err, client.CodeInvalidRequest, http.StatusBadRequest); p.Field != "waiting_room.pow_difficulty" {
		t.Fatalf("too hard a difficulty: %+v", p)
	}
}
