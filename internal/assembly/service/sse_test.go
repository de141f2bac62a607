package service

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestEventStreamEndsOnStop: dibs serve streams a waiting user's standing
// as server-sent events, and stopping the service ends the stream at once
// rather than waiting out the drain.
func TestEventStreamEndsOnStop(t *testing.T) {
	t.Parallel()
	s := setup(t)
	base, client := serve(t, s)
	do := func(method, path, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer t")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	id := fmt.Sprintf("sse-%d", time.Now().UnixNano())
	start := time.Now().Add(time.Hour).UTC().Format(time.RFC3339) // nobody is let in
	if code := do("POST", "/v1/promotions", fmt.Sprintf(`{"id":%q,"stock":3,"starts_at":%q,"waiting_room":{"enabled":true}}`, id, start)); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if code := do("POST", "/v1/promotions/"+id+"/queue", `{"user_id":"u1"}`); code != http.StatusAccepted {
		t.Fatalf("join: %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/promotions/"+id+"/queue/u1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before its first event: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			if !strings.Contains(line, `"status":"waiting"`) {
				t.Fatalf("first event: %s", line)
			}
			break
		}
	}
	began := time.Now()
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took >= DrainTimeout {
		t.Fatalf("Stop took %s: the open stream held the drain", took)
	}
	if rest, err := io.ReadAll(r); err != nil || strings.Contains(string(rest), "data: ") {
		t.Fatalf("after Stop: %q %v", rest, err)
	}
}
