package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestParseStallDB(t *testing.T) {
	for _, c := range []struct{ in, kind, dsn string }{
		{"sqlite:///tmp/x/dibs.db", "sqlite", "/tmp/x/dibs.db?_pragma=busy_timeout(60000)"},
		{"sqlite://dibs.db?synchronous=full", "sqlite", "dibs.db?_pragma=busy_timeout(60000)"},
		{"postgres://u:p@127.0.0.1:5432/dibs?sslmode=disable", "postgres", "postgres://u:p@127.0.0.1:5432/dibs?sslmode=disable"},
		{"postgresql://h/db", "postgres", "postgresql://h/db"},
	} {
		got, err := parseStallDB(c.in)
		if err != nil || got.kind != c.kind || got.dsn != c.dsn {
			t.Errorf("parseStallDB(%q) = %+v, %v; want %s %s", c.in, got, err, c.kind, c.dsn)
		}
	}
	for _, bad := range []string{"mysql://h/db", "sqlite://", "/tmp/dibs.db", "::"} {
		if _, err := parseStallDB(bad); err == nil {
			t.Errorf("parseStallDB(%q) took it", bad)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP dibs_journal_claims Claims answered 202 ...
# TYPE dibs_journal_claims gauge
dibs_journal_claims 412345
dibs_journal_bytes 2.4869e+07
dibs_journal_dropped_total 3
dibs_pending_claims{promotion="a"} 100
dibs_pending_claims{promotion="b {x}"} 23
dibs_pending_claims_other 999
dibs_claims_total{outcome="accepted"} 5e+06
`
	s, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if s.journalClaims != 412345 || s.journalBytes != 24869000 || s.dropped != 3 || s.pending != 123 {
		t.Errorf("parseMetrics = %+v", s)
	}
	if !s.seenJournal || !s.seenDropped || !s.seenPending {
		t.Errorf("parseMetrics did not see every series: %+v", s)
	}
	if _, err := parseMetrics(strings.NewReader("dibs_journal_claims many\n")); err == nil {
		t.Error("parseMetrics took a value that is no number")
	}
}

// TestSummarize: the peaks over every sample, the backlog's level before
// the stall, and the first sample after the stall back at that level.
func TestSummarize(t *testing.T) {
	s := func(sec float64, claims, pending, dropped int64) metricsSample {
		return metricsSample{at: time.Duration(sec * float64(time.Second)), journalClaims: claims,
			journalBytes: claims * 60, pending: pending, dropped: dropped}
	}
	samples := []metricsSample{
		s(1, 500, 40, 0), s(2, 600, 90, 0), s(3, 550, 60, 0), // before: level 90
		s(4, 5000, 4000, 0), s(5, 9000, 8000, 0), // held from 3.5 to 5.5
		s(6, 7000, 5000, 0), s(7, 2000, 300, 0), s(8, 700, 80, 0), s(9, 600, 70, 0),
	}
	got := summarize(samples, 3500*time.Millisecond, 5500*time.Millisecond)
	want := stallFigures{Samples: 9, JournalClaimsPeak: 9000, JournalBytesPeak: 540000, PendingBefore: 90,
		PendingPeak: 8000, CaughtUpAfterMs: 2500}
	if got != want {
		t.Errorf("summarize = %+v, want %+v", got, want)
	}
	// Never back to the level within the samples; the drops counted.
	got = summarize(append(samples[:6:6], s(7, 7000, 4000, 12)), 3500*time.Millisecond, 5500*time.Millisecond)
	if got.CaughtUpAfterMs != -1 || got.JournalDropped != 12 {
		t.Errorf("summarize without catching up = %+v, want caught up -1 and 12 dropped", got)
	}
	// No stall: peaks only.
	if got := summarize(samples[:3], 0, 0); got.CaughtUpAfterMs != 0 || got.PendingBefore != 0 || got.PendingPeak != 90 {
		t.Errorf("summarize without a stall = %+v", got)
	}
}

func TestCheckStall(t *testing.T) {
	ok := loadConfig{stallDB: "sqlite:///x.db", token: "t", stallAt: 25 * time.Second, stallFor: 10 * time.Second, duration: time.Minute}
	if err := checkStall(&ok); err != nil || ok.watch != time.Second {
		t.Errorf("checkStall(%+v) = %v, watch %v; want nil, 1s", ok, err, ok.watch)
	}
	for _, bad := range []loadConfig{
		{stallDB: "sqlite:///x.db", stallAt: time.Second, stallFor: time.Second},                                                   // no token
		{stallDB: "sqlite:///x.db", token: "t", soldOut: true, stallFor: time.Second},                                              // sold out
		{stallDB: "sqlite:///x.db", token: "t", stallAt: time.Second},                                                              // no hold
		{stallDB: "sqlite:///x.db", token: "t", stallAt: 25 * time.Second, stallFor: 10 * time.Second, duration: 30 * time.Second}, // past the run
	} {
		if err := checkStall(&bad); err == nil {
			t.Errorf("checkStall(%+v) took it", bad)
		}
	}
}

func TestWriteStalls(t *testing.T) {
	rows := []loadResult{
		{Label: "max", ClaimsPerSecond: 9000},
		{Label: "stall", ClaimsPerSecond: 8000, IssuedAfterMs: 1500, Issued: 10, Accepted: 10,
			Stall: &stallFigures{DB: "sqlite", AtS: 25, HeldS: 10, JournalClaimsPeak: 90000, JournalBytesPeak: 5400000,
				PendingBefore: 90, PendingPeak: 80000, CaughtUpAfterMs: 4200}},
		{Label: "small", ClaimsPerSecond: 8000, Stall: &stallFigures{DB: "sqlite", AtS: 25, HeldS: 10, JournalDropped: 7, CaughtUpAfterMs: -1}},
	}
	var out bytes.Buffer
	writeStalls(&out, rows)
	for _, want := range []string{
		"| stall | sqlite, 10.0 s from 25.0 s | 8000 | 0 | 90000 | 5400000 | 90 → 80000 | 4.2 s | 1.5 s |",
		"| small | sqlite, 10.0 s from 25.0 s | 8000 | 7 | 0 | 0 | 0 → 0 | not within the run |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("writeStalls lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "| max |") {
		t.Errorf("writeStalls printed a run that sampled nothing:\n%s", out.String())
	}
	out.Reset()
	writeStalls(&out, rows[:1])
	if out.Len() != 0 {
		t.Errorf("writeStalls without a sampled run printed %q", out.String())
	}
}
