package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func sampleReport() Report {
	return Report{
		Target:       "http://127.0.0.1:41234",
		PromotionID:  "bench-1",
		Stock:        1000,
		Users:        2000,
		PerUserLimit: 1,
		Repeat:       1,
		Waves:        10,
		Concurrency:  200,
		Claims:       2000,
		Elapsed:      1250 * time.Millisecond,
		Latency: Latency{
			P50: 12300 * time.Microsecond, P99: 45600 * time.Microsecond, P999: 50100 * time.Microsecond,
			Max: 51 * time.Millisecond, Mean: 14 * time.Millisecond,
		},
		Accepted:    1000,
		Rejected:    map[string]int{"sold_out": 1000},
		AllIssued:   true,
		IssuedAfter: 85 * time.Millisecond,
		Server:      Counts{Accepted: 1000, Issued: 1000},
		Checks: []Check{
			{Name: CheckNoOversell, Title: "accepted <= stock", Status: Pass, Detail: "1000 accepted, stock 1000"},
			{Name: CheckRanks, Title: "ranks are exactly 1..accepted", Status: Pass, Detail: "1000 distinct ranks"},
			{Name: CheckSpot, Title: "per-user claim status matches", Status: Skip, Detail: "no users checked"},
		},
	}
}

func TestReportOK(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	if !r.OK() || len(r.Failed()) != 0 {
		t.Fatalf("passing report: OK %v, Failed %v", r.OK(), r.Failed())
	}
	r.Checks[1].Status = Fail
	if r.OK() {
		t.Fatal("a report with a failed check is OK")
	}
	if f := r.Failed(); len(f) != 1 || f[0] != CheckRanks {
		t.Fatalf("Failed() = %v, want [ranks]", f)
	}
	if got := (Report{}).Throughput(); got != 0 {
		t.Fatalf("Throughput of an empty report = %v", got)
	}
	if got := sampleReport().Throughput(); got != 1600 {
		t.Fatalf("Throughput = %v, want 1600", got)
	}
}

func TestReportText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		modify func(*Report)
		want   []string
		absent []string
	}{
		{
			name:   "passing waves",
			modify: func(*Report) {},
			want: []string{
				"promotion bench-1 at http://127.0.0.1:41234\n",
				"stock 1,000, 2,000 users, per-user limit 1, 10 waves of up to 200\n",
				"claims         2,000 in 1.25s (1,600 claims/s)\n",
				"latency        p50 12.3 ms, p99 45.6 ms, p99.9 50.1 ms, max 51.0 ms\n",
				"accepted       1,000\n",
				"rejected       sold_out 1,000\n",
				"all issued     85ms after the last answer\n",
				"server counts  accepted 1000, pending 0, issued 1000",
				"  PASS  accepted <= stock",
				"  SKIP  per-user claim status matches",
				"OK: 2 of 3 checks passed, 1 skipped\n",
			},
			absent: []string{"FAILED"},
		},
		{
			name: "failing steady",
			modify: func(r *Report) {
				r.Waves, r.Repeat = 0, 3
				r.AllIssued = false
				r.IssuedAfter = time.Minute
				r.Rejected = nil
				r.Checks[1].Status = Fail
				r.Checks[1].Detail = "1000 ranks: 1 repeated (7)"
			},
			want: []string{
				", 3 claims each, per-user limit 1, 200 workers\n",
				"rejected       none\n",
				"all issued     NO: gave up 1m0s after the last answer\n",
				"  FAIL  ranks are exactly 1..accepted  1000 ranks: 1 repeated (7)\n",
				"FAILED: ranks\n",
			},
			absent: []string{"OK:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := sampleReport()
			tt.modify(&r)
			var b bytes.Buffer
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("text report lacks %q:\n%s", w, out)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(out, a) {
					t.Errorf("text report has %q:\n%s", a, out)
				}
			}
		})
	}
}

func TestReportJSON(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	r.Checks[0].Status = Fail
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"title":"accepted <= stock"`) {
		t.Errorf("JSON report escapes the check titles: %s", b.String())
	}
	if n := strings.Count(b.String(), "\n"); n != 1 {
		t.Fatalf("JSON report has %d newlines, want one object on one line:\n%s", n, b.String())
	}
	var got struct {
		OK          bool   `json:"ok"`
		PromotionID string `json:"promotion_id"`
		Config      struct {
			Stock       int    `json:"stock"`
			Mode        string `json:"mode"`
			Concurrency int    `json:"concurrency"`
		} `json:"config"`
		Claims    int     `json:"claims"`
		ElapsedMS float64 `json:"elapsed_ms"`
		PerSecond float64 `json:"claims_per_second"`
		Latency   struct {
			P50  float64 `json:"p50"`
			P999 float64 `json:"p99_9"`
		} `json:"latency_ms"`
		Accepted    int64          `json:"accepted"`
		Rejected    map[string]int `json:"rejected"`
		AllIssued   bool           `json:"all_issued"`
		IssuedAfter float64        `json:"all_issued_after_ms"`
		Server      Counts         `json:"server_counts"`
		Checks      []Check        `json:"checks"`
	}
	dec := json.NewDecoder(&b)
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decode: %v", err)
	}
	switch {
	case got.OK:
		t.Error("ok is true with a failed check")
	case got.PromotionID != "bench-1", got.Config.Stock != 1000, got.Config.Mode != "waves", got.Config.Concurrency != 200:
		t.Errorf("identity/config wrong: %+v", got)
	case got.Claims != 2000, got.ElapsedMS != 1250, got.PerSecond != 1600:
		t.Errorf("throughput wrong: %+v", got)
	case got.Latency.P50 != 12.3, got.Latency.P999 != 50.1:
		t.Errorf("latency wrong: %+v", got.Latency)
	case got.Accepted != 1000, got.Rejected["sold_out"] != 1000, !got.AllIssued, got.IssuedAfter != 85:
		t.Errorf("outcomes wrong: %+v", got)
	case got.Server.Issued != 1000:
		t.Errorf("server counts wrong: %+v", got.Server)
	case len(got.Checks) != 3 || got.Checks[0].Status != Fail || got.Checks[0].Name != CheckNoOversell:
		t.Errorf("checks wrong: %+v", got.Checks)
	}

	// An empty report still has every member, with [] and {} rather than null.
	b.Reset()
	if err := (Report{Checks: []Check{}}).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"rejected":{}`, `"checks":[]`, `"ok":true`, `"mode":"steady"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("empty report JSON lacks %s: %s", want, b.String())
		}
	}
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 123456: "123,456", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
