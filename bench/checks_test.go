package bench

import (
	"strings"
	"testing"
)

func TestCheckRankSet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		ranks  []int64
		ok     bool
		detail []string // substrings the detail must contain
	}{
		{"empty", nil, true, []string{"no ranks"}},
		{"one", []int64{1}, true, []string{"1 distinct ranks 1..1"}},
		{"in order", []int64{1, 2, 3, 4}, true, []string{"4 distinct"}},
		{"any order", []int64{3, 1, 4, 2}, true, []string{"no gaps or repeats"}},
		{"starts at zero", []int64{0, 1, 2}, false, []string{"1 missing (3)", "1 outside 1..3 (0)"}},
		{"gap", []int64{1, 2, 4}, false, []string{"1 missing (3)", "1 outside 1..3 (4)"}},
		{"repeat", []int64{1, 2, 2}, false, []string{"1 repeated (2)", "1 missing (3)"}},
		{"repeat thrice", []int64{2, 2, 2}, false, []string{"2 repeated (2)", "2 missing (1, 3)"}},
		{"negative", []int64{-1}, false, []string{"outside 1..1 (-1)"}},
		{"many missing", []int64{10, 11, 12, 13, 14, 15, 16}, false, []string{"7 missing (1, 2, 3, 4, 5, ...)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := append([]int64(nil), tt.ranks...)
			ok, detail := CheckRankSet(tt.ranks)
			if ok != tt.ok {
				t.Fatalf("CheckRankSet(%v) ok = %v, want %v (detail %q)", tt.ranks, ok, tt.ok, detail)
			}
			for _, want := range tt.detail {
				if !strings.Contains(detail, want) {
					t.Errorf("detail %q does not contain %q", detail, want)
				}
			}
			for i := range before {
				if before[i] != tt.ranks[i] {
					t.Fatalf("CheckRankSet reordered its input: %v, was %v", tt.ranks, before)
				}
			}
		})
	}
}

func TestCheckRankSetLarge(t *testing.T) {
	t.Parallel()
	ranks := make([]int64, 100000)
	for i := range ranks {
		ranks[len(ranks)-1-i] = int64(i + 1)
	}
	if ok, detail := CheckRankSet(ranks); !ok {
		t.Fatalf("reversed 1..100000: %s", detail)
	}
	ranks[500] = ranks[501]
	if ok, _ := CheckRankSet(ranks); ok {
		t.Fatal("a repeated rank passed")
	}
}

func TestCheckAnswered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		outcomes map[string]int
		first    map[string]string
		want     Status
		detail   string
	}{
		{"all definite", map[string]int{"accepted": 10, "sold_out": 5, "already_claimed": 2}, nil, Pass, "17 of 17"},
		{"nothing sent", map[string]int{}, nil, Pass, "0 of 0"},
		{"transport errors", map[string]int{"accepted": 10, OutcomeTransportError: 2}, map[string]string{OutcomeTransportError: "connection refused"}, Fail,
			"2 of 12 did not: 2 transport_error (first: connection refused)"},
		{"other codes", map[string]int{"overloaded": 1, "http_500": 3}, nil, Fail, "4 of 4 did not: 3 http_500, 1 overloaded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := checkAnswered(tt.outcomes, tt.first)
			if c.Status != tt.want || c.Detail != tt.detail {
				t.Fatalf("got %s %q, want %s %q", c.Status, c.Detail, tt.want, tt.detail)
			}
		})
	}
}

func TestExpectedAccepted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stock, users, limit, repeat int
		want                        int64
	}{
		{1000, 2000, 1, 1, 1000}, // the seed scenario
		{1000, 500, 1, 1, 500},   // fewer users than stock
		{1000, 500, 3, 1, 500},   // a limit of 3 does not help users who claim once
		{1000, 500, 3, 2, 1000},  // 500 users x 2 claims
		{1000, 500, 3, 5, 1000},  // capped by stock
		{100, 30, 3, 5, 90},      // capped by the limit
		{1_000_000_000, 1_000_000, 1000, 1000, 1_000_000_000},
	}
	for _, tt := range tests {
		if got := expectedAccepted(tt.stock, tt.users, tt.limit, tt.repeat); got != tt.want {
			t.Errorf("expectedAccepted(%d, %d, %d, %d) = %d, want %d", tt.stock, tt.users, tt.limit, tt.repeat, got, tt.want)
		}
	}
}

func TestCountChecks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		check Check
		want  Status
	}{
		{"oversell ok", checkNoOversell(1000, 1000, true, 1000), Pass},
		{"oversell by clients", checkNoOversell(1001, 1000, true, 1000), Fail},
		{"oversell by server", checkNoOversell(1000, 1001, true, 1000), Fail},
		{"oversell server unknown", checkNoOversell(10, 0, false, 10), Pass},
		{"exact ok", checkExactCount(1000, 1000, true), Pass},
		{"exact short", checkExactCount(999, 1000, true), Fail},
		{"exact unknown", checkExactCount(999, 1000, false), Skip},
		{"server agrees", checkServerCounts(5, Counts{Accepted: 5}, true, true), Pass},
		{"server disagrees", checkServerCounts(5, Counts{Accepted: 6}, true, true), Fail},
		{"server more, answers unknown", checkServerCounts(5, Counts{Accepted: 6}, true, false), Pass},
		{"server less, answers unknown", checkServerCounts(5, Counts{Accepted: 4}, true, false), Fail},
		{"server unread", checkServerCounts(5, Counts{}, false, true), Fail},
		{"all issued", checkAllIssued(Counts{Accepted: 5, Issued: 5}, true, false, "1s"), Pass},
		{"some pending", checkAllIssued(Counts{Accepted: 5, Issued: 4, Pending: 1}, true, true, "1s"), Fail},
		{"some failed", checkAllIssued(Counts{Accepted: 5, Issued: 4, Failed: 1}, true, false, "1s"), Fail},
		{"issued unread", checkAllIssued(Counts{}, false, true, "1s"), Fail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.check.Status != tt.want {
				t.Fatalf("%s: got %s (%s), want %s", tt.check.Name, tt.check.Status, tt.check.Detail, tt.want)
			}
		})
	}
}

func TestCheckPerUserLimit(t *testing.T) {
	t.Parallel()
	id := func(u int) string { return "user-" + string(rune('a'+u)) }
	c := checkPerUserLimit(map[int]int{0: 1, 1: 2, 2: 2}, 2, id)
	if c.Status != Pass || c.Detail != "3 users accepted, at most 2 each" {
		t.Fatalf("within the limit: %s %q", c.Status, c.Detail)
	}
	c = checkPerUserLimit(map[int]int{0: 1, 1: 3, 2: 2, 3: 4}, 2, id)
	if c.Status != Fail || c.Detail != "2 users over the limit (user-b: 3, user-d: 4)" {
		t.Fatalf("over the limit: %s %q", c.Status, c.Detail)
	}
}

func TestCompareStatus(t *testing.T) {
	t.Parallel()
	type cl = struct {
		ClaimID string `json:"claim_id"`
		Rank    int64  `json:"rank"`
		Status  string `json:"status"`
	}
	want := []acceptance{{user: 1, rank: 7, claimID: "p#7"}, {user: 1, rank: 9, claimID: "p#9"}}
	tests := []struct {
		name string
		cs   claimStatus
		want []acceptance
		ok   bool
	}{
		{"none for rejected", claimStatus{Status: "none"}, nil, true},
		{"pending for rejected", claimStatus{Status: "pending", Claims: []cl{{"p#1", 1, "pending"}}}, nil, false},
		{"issued", claimStatus{Status: "issued", Claims: []cl{{"p#9", 9, "issued"}, {"p#7", 7, "issued"}}}, want, true},
		{"still pending", claimStatus{Status: "pending", Claims: []cl{{"p#7", 7, "issued"}, {"p#9", 9, "pending"}}}, want, false},
		{"one claim missing", claimStatus{Status: "issued", Claims: []cl{{"p#7", 7, "issued"}}}, want, false},
		{"other claim id", claimStatus{Status: "issued", Claims: []cl{{"p#7", 7, "issued"}, {"p#8", 9, "issued"}}}, want, false},
		{"none for accepted", claimStatus{Status: "none"}, want, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ok, problem := compareStatus(tt.cs, tt.want)
			if ok != tt.ok {
				t.Fatalf("compareStatus = %v (%q), want %v", ok, problem, tt.ok)
			}
			if !ok && problem == "" {
				t.Fatal("a mismatch without a reason")
			}
		})
	}
}

func TestSpread(t *testing.T) {
	t.Parallel()
	xs := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	tests := []struct {
		n    int
		want []int
	}{
		{0, nil},
		{1, []int{0}},
		{2, []int{0, 5}},
		{3, []int{0, 3, 6}},
		{10, xs},
		{20, xs},
	}
	for _, tt := range tests {
		got := spread(xs, tt.n)
		if len(got) != len(tt.want) {
			t.Fatalf("spread(xs, %d) = %v, want %v", tt.n, got, tt.want)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Fatalf("spread(xs, %d) = %v, want %v", tt.n, got, tt.want)
			}
		}
	}
}
