package sqlstore

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"go.uber.org/goleak"

	"github.com/dibsio/dibs/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		fields map[string]string
		stored string
	}{
		{name: "nil", fields: nil, stored: "{}"},
		{name: "empty", fields: map[string]string{}, stored: "{}"},
		{name: "some", fields: map[string]string{"user": "u1", "rank": "7"}, stored: `{"rank":"7","user":"u1"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := EncodeFields(tt.fields)
			if err != nil || s != tt.stored {
				t.Fatalf("EncodeFields = %q, %v; want %q", s, err, tt.stored)
			}
			back, err := DecodeFields(s)
			if err != nil {
				t.Fatal(err)
			}
			if len(tt.fields) == 0 {
				if back != nil {
					t.Fatalf("DecodeFields(%q) = %v, want nil", s, back)
				}
				return
			}
			if !maps.Equal(back, tt.fields) {
				t.Fatalf("DecodeFields(%q) = %v, want %v", s, back, tt.fields)
			}
		})
	}
	if _, err := DecodeFields("not json"); err == nil {
		t.Fatal("DecodeFields of bad JSON: no error")
	}
}

func TestCheckTransitionTarget(t *testing.T) {
	t.Parallel()
	for state, ok := range map[string]bool{
		store.DeadReplayed: true, store.DeadVoided: true, store.DeadFailed: false, "": false,
	} {
		if err := CheckTransitionTarget(state); (err == nil) != ok {
			t.Errorf("CheckTransitionTarget(%q) = %v, want ok %t", state, err, ok)
		}
	}
}

func TestSortByClaimID(t *testing.T) {
	t.Parallel()
	ds := []store.DeadLetter{{ClaimID: "p#3"}, {ClaimID: "p#1"}, {ClaimID: "p#2"}}
	SortByClaimID(ds)
	var got []string
	for _, d := range ds {
		got = append(got, d.ClaimID)
	}
	if want := []string{"p#1", "p#2", "p#3"}; !slices.Equal(got, want) {
		t.Fatalf("sorted %v, want %v", got, want)
	}
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	t.Run("ordered by version", func(t *testing.T) {
		t.Parallel()
		fsys := fstest.MapFS{
			"migrations/0010_later.sql":      {Data: []byte("later")},
			"migrations/0002_second_one.sql": {Data: []byte("second")},
			"migrations/0001_init.sql":       {Data: []byte("init")},
			"migrations/README.md":           {Data: []byte("not a migration")},
			"elsewhere/0003_not_counted.sql": {Data: []byte("no")},
		}
		ms, err := Migrations(fsys, math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		want := []Migration{
			{Version: 1, Name: "init", SQL: "init"},
			{Version: 2, Name: "second_one", SQL: "second"},
			{Version: 10, Name: "later", SQL: "later"},
		}
		if !slices.Equal(ms, want) {
			t.Fatalf("Migrations = %+v, want %+v", ms, want)
		}
		if s := ms[1].String(); s != "0002_second_one" {
			t.Fatalf("String = %q, want 0002_second_one", s)
		}
		// Up to a version: a database as an earlier release left it.
		if ms, err := Migrations(fsys, 9); err != nil || !slices.Equal(ms, want[:2]) {
			t.Fatalf("Migrations up to 9 = %+v, %v, want %+v", ms, err, want[:2])
		}
	})
	for name, file := range map[string]string{
		"no underscore": "migrations/0001.sql",
		"not a version": "migrations/first_init.sql",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if ms, err := Migrations(fstest.MapFS{file: {Data: []byte("x")}}, math.MaxInt); err == nil {
				t.Fatalf("Migrations = %+v, want an error", ms)
			}
		})
	}
}

func TestApplyPending(t *testing.T) {
	t.Parallel()
	ms := []Migration{{Version: 1, Name: "a"}, {Version: 2, Name: "b"}, {Version: 3, Name: "c"}}
	var ran, recorded []int
	exec := func(m Migration) error { ran = append(ran, m.Version); return nil }
	record := func(m Migration) error { recorded = append(recorded, m.Version); return nil }
	if err := ApplyPending(ms, map[int]bool{2: true}, exec, record); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ran, []int{1, 3}) || !slices.Equal(recorded, []int{1, 3}) {
		t.Fatalf("ran %v, recorded %v; want [1 3] for both", ran, recorded)
	}

	boom := errors.New("boom")
	fail := func(Migration) error { return boom }
	err := ApplyPending(ms, nil, fail, record)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "migration 0001_a:") {
		t.Fatalf("failed exec: %v, want boom naming 0001_a", err)
	}
	err = ApplyPending(ms, nil, exec, fail)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "migration 0001_a: record:") {
		t.Fatalf("failed record: %v, want boom naming 0001_a and record", err)
	}
}

func issue(rank int64, user string, slot int) store.Issue {
	return store.Issue{ClaimID: fmt.Sprintf("p#%d", rank), PromotionID: "p", UserID: user, Rank: rank, Slot: slot}
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	a, b, c := issue(1, "a", 1), issue(2, "b", 1), issue(3, "c", 1)
	otherC := c
	otherC.UserID = "someone else"
	tests := []struct {
		name     string
		issues   []store.Issue
		inserted []store.Issue          // rows the insert returned
		stored   map[string]store.Issue // rows found under the rest's claim ids
		wantRest []string
		want     []store.Outcome
	}{
		{
			name:     "all inserted",
			issues:   []store.Issue{a, b},
			inserted: []store.Issue{b, a},
			want:     []store.Outcome{store.Inserted, store.Inserted},
		},
		{
			name:     "same claim twice in the batch",
			issues:   []store.Issue{a, b, a},
			inserted: []store.Issue{a, b},
			stored:   map[string]store.Issue{a.ClaimID: a},
			wantRest: []string{a.ClaimID},
			want:     []store.Outcome{store.Inserted, store.Inserted, store.Duplicate},
		},
		{
			name:     "redelivered and conflicting",
			issues:   []store.Issue{a, b, c},
			inserted: []store.Issue{b},
			stored:   map[string]store.Issue{a.ClaimID: a, c.ClaimID: otherC},
			wantRest: []string{a.ClaimID, c.ClaimID},
			want:     []store.Outcome{store.Duplicate, store.Inserted, store.Conflict},
		},
		{
			name:     "held by another claim id",
			issues:   []store.Issue{c},
			wantRest: []string{c.ClaimID},
			want:     []store.Outcome{store.Conflict},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := NewOutcomes(tt.issues)
			for _, is := range tt.inserted {
				if err := o.Inserted(KeyOf(is)); err != nil {
					t.Fatal(err)
				}
			}
			if rest := o.Rest(); !slices.Equal(rest, tt.wantRest) {
				t.Fatalf("Rest = %v, want %v", rest, tt.wantRest)
			}
			stored := make(map[string]IssueKey)
			for id, is := range tt.stored {
				stored[id] = KeyOf(is)
			}
			if got := o.Settle(stored); !slices.Equal(got, tt.want) {
				t.Fatalf("Settle = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("row not in the batch", func(t *testing.T) {
		t.Parallel()
		o := NewOutcomes([]store.Issue{a})
		if err := o.Inserted(KeyOf(b)); err == nil {
			t.Fatal("Inserted of a claim not in the batch: no error")
		}
		if err := o.Inserted(KeyOf(a)); err != nil {
			t.Fatal(err)
		}
		if err := o.Inserted(KeyOf(a)); err == nil {
			t.Fatal("Inserted twice for a claim the batch holds once: no error")
		}
	})
}

func TestOnePerRank(t *testing.T) {
	t.Parallel()
	claims := []store.KnownClaim{
		{ClaimID: "1", Rank: 1}, {ClaimID: "2a", Rank: 2}, {ClaimID: "2b", Rank: 2}, {ClaimID: "3", Rank: 3},
	}
	var got []string
	for _, c := range OnePerRank(claims) {
		got = append(got, c.ClaimID)
	}
	if want := []string{"1", "2a", "3"}; !slices.Equal(got, want) {
		t.Fatalf("OnePerRank = %v, want %v", got, want)
	}
	if got := OnePerRank(nil); len(got) != 0 {
		t.Fatalf("OnePerRank(nil) = %v, want none", got)
	}
}

// row is one result row held in memory, scanned the way database/sql
// assigns plain values.
type row []any

func (r row) Scan(dest ...any) error {
	if len(dest) != len(r) {
		return errors.New("column count mismatch")
	}
	for i, v := range r {
		switch d := dest[i].(type) {
		case *string:
			*d = v.(string)
		case *int64:
			*d = v.(int64)
		case *int:
			*d = v.(int)
		case *bool:
			*d = v.(bool)
		case **string:
			*d = v.(*string)
		case *[]byte:
			*d = v.([]byte)
		default:
			return errors.New("unexpected destination type")
		}
	}
	return nil
}

// textTimes stores times as RFC 3339 text, nullable ones as *string.
var textTimes = Times[string, *string]{
	Encode: func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	EncodeNull: func(t time.Time) *string {
		if t.IsZero() {
			return nil
		}
		s := t.UTC().Format(time.RFC3339Nano)
		return &s
	},
	Decode: func(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) },
	DecodeNull: func(s *string) (time.Time, error) {
		if s == nil {
			return time.Time{}, nil
		}
		return time.Parse(time.RFC3339Nano, *s)
	},
}

// TestPromotionRoundTrip writes a promotion's values and reads them back
// as a row: PromotionArgs and ScanPromotion must agree on the columns.
func TestPromotionRoundTrip(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	for _, closed := range []time.Time{{}, start.Add(time.Hour)} {
		p := store.Promotion{
			ID: "p1", Name: "Promotion", Mode: store.ModeGrant, Kind: store.KindVoucher,
			Stock: 100, PerUserLimit: 2, Value: 5000,
			StartsAt: start, EndsAt: start.Add(24 * time.Hour), ClosedAt: closed, CreatedAt: start.Add(-time.Hour),
			WaitingRoom: store.WaitingRoom{Enabled: true, AdmitPerSecond: 50, EntryTTLSeconds: 60,
				AbandonAfterSeconds: 90, PrequeueSeconds: 30, PrequeueSeed: []byte("0123456789abcdef0123456789abcdef")},
			Drained: true, DrainedAt: start.Add(25 * time.Hour), RetiredAt: closed,
			ExpectedClaimsPerSecond: 5000, Segments: 3, WebhookURL: "https://partner.example/claims",
			Paused: true, RevokeReturnsStock: true, ArchivedAt: closed,
		}
		args := PromotionArgs(p, textTimes)
		if n := strings.Count(PromotionCols, ",") + 1; len(args) != n {
			t.Fatalf("PromotionArgs gives %d values for %d columns", len(args), n)
		}
		// created_at goes out nullable (a zero one is the database's to
		// fill in) and comes back NOT NULL.
		args[10] = *args[10].(*string)
		got, err := ScanPromotion(row(args), textTimes)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, p)
		}
	}
}

// TestScanKnownClaimTimes: a claim whose time cannot be read is still
// returned, with a zero At; its fields still have to be readable.
func TestScanKnownClaimTimes(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	tests := []struct {
		name    string
		at      *string
		fields  string
		want    time.Time
		wantErr bool
	}{
		{name: "good", at: str("2026-11-21T00:00:00Z"), fields: `{"k":"v"}`, want: time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)},
		{name: "not a time", at: str("not a time"), fields: `{"k":"v"}`},
		{name: "null", at: nil, fields: `{"k":"v"}`},
		{name: "bad fields", at: str("2026-11-21T00:00:00Z"), fields: "not json", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := ScanKnownClaim(row{"c", int64(1), "u", 1, store.DeadFailed, tt.at, tt.fields}, textTimes)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ScanKnownClaim = %+v, want an error", c)
				}
				return
			}
			if err != nil || c.Fields["k"] != "v" || !c.At.Equal(tt.want) || c.ClaimID != "c" {
				t.Fatalf("ScanKnownClaim = %+v, %v; want At %v", c, err, tt.want)
			}
		})
	}
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 21, 9, 30, 15, 0, time.UTC)
	ms := base.Add(123 * time.Millisecond)
	us := base.Add(123456 * time.Microsecond)
	ns := base.Add(123456789)
	tests := []struct {
		in   string
		want time.Time
	}{
		{"2026-11-21T09:30:15Z", base},
		{"2026-11-21T09:30:15.123456Z", us},
		{"2026-11-21T09:30:15.123456789Z", ns},
		{"2026-11-21T18:30:15.123+09:00", ms},
		{"2026-11-21T04:30:15-05:00", base},
		{"2026-11-21t09:30:15.123z", ms},
		{"2026-11-21T18:30:15+0900", base},
		{"2026-11-21T18:30:15+09", base},
		{"2026-11-21 09:30:15", base},
		{"2026-11-21 09:30:15.123", ms},
		{"2026-11-21 18:30:15.123+09:00", ms},
		{"2026-11-21 09:30:15Z", base},
		{"2026-11-21T09:30:15", base},
		{"2026-11-21 09:30", base.Truncate(time.Minute)},
		{"2026-11-21T09:30Z", base.Truncate(time.Minute)},
		{"2026-11-21", time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)},
		{"  2026-11-21T09:30:15Z\n", base},
		{"2026-11-21 18:30:15.123456789 +0900 KST", ns},
		{"2026-11-21 09:30:15.123456789 +0000 UTC m=+0.001", ns},
		{fmt.Sprint(base.Unix()), base},
		{fmt.Sprint(ms.UnixMilli()), ms},
		{fmt.Sprint(us.UnixMicro()), us},
		{fmt.Sprint(ns.UnixNano()), ns},
		{fmt.Sprintf("%d.5", base.Unix()), base.Add(500 * time.Millisecond)},
		{"2461000.896006944", time.Date(2025, 11, 21, 9, 30, 15, 0, time.UTC)}, // julianday()
		{"2440587.5", time.Unix(0, 0).UTC()},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in)
		if err != nil || !got.Equal(tt.want) || got.Location() != time.UTC {
			t.Errorf("ParseTime(%q) = %v, %v; want %v in UTC", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "not a time", "2026-13-01T00:00:00Z", "2026-11-21T25:00:00Z", "-5", "0", "NaN", "Inf", "11/21/2026"} {
		if got, err := ParseTime(bad); err == nil {
			t.Errorf("ParseTime(%q) = %v, want an error", bad, got)
		}
	}
}
