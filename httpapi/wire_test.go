package httpapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/client"
	"github.com/dibsio/dibs/events"
	"github.com/dibsio/dibs/httpapi/ui"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/waitroom"
)

// wireZone is not UTC, so the answers' times show they are written in UTC.
var wireZone = time.FixedZone("UTC+9", 9*3600)

// wireTime is a time with nanoseconds in wireZone.
func wireTime(day, nsec int) time.Time {
	return time.Date(2026, 11, day, 9, 30, 15, nsec, wireZone)
}

// wireView is a promotion with every member of its answer set.
func wireView() promotion.View {
	remaining := int64(7)
	v := promotion.View{State: promotion.StateEnded, Counts: promotion.Counts{Accepted: 93, Pending: 2, Issued: 80,
		Revoked: 3, Failed: 1, Remaining: &remaining}, Room: promotion.RoomCounts{Waiting: 11, Admitted: 12, PassesSpent: 13, Abandoned: 14}}
	v.Promotion = promotion.Promotion{ID: "spring-drop", Name: "Spring drop", Mode: promotion.ModeFirstCome, Kind: promotion.KindVoucher,
		Stock: 100, PerUserLimit: 2, Value: 500, StartsAt: wireTime(21, 0), EndsAt: wireTime(22, 120_000_000),
		ClosedAt: wireTime(21, 123_456_789), CreatedAt: wireTime(20, 1_000), ArchivedAt: wireTime(23, 0), RetiredAt: wireTime(24, 5),
		WebhookURL: "https://partner.example/hook", Paused: true, RevokeReturnsStock: true, ExpectedClaimsPerSecond: 5000, Segments: 4}
	v.WaitingRoom = promotion.WaitingRoom{Enabled: true, AdmitPerSecond: 50, EntryTTLSeconds: 300, AbandonAfterSeconds: 120,
		PrequeueSeconds: 600, PrequeueSeed: []byte{1, 2, 3, 4}, MaxActive: 40, Message: "Hold on <tight> & \"wait\"", PowDifficulty: 8,
		Page: &promotion.RoomPage{Title: "Spring", Colors: promotion.RoomPageColors{Background: "#fff", Text: "#000", Accent: "#0a7f5a"},
			LogoURL: "https://shop.example/logo.png", Texts: map[string]string{"heading": "Wait here"}, ReturnURL: "https://shop.example/",
			Mode: promotion.PageModeReturn}}
	return v
}

// wireJSON is v as writeJSON writes it, less the line end.
func wireJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWireBytes: the answers' JSON, byte for byte, from server values
// with every member set; times in another zone than UTC, with and without
// fractions of a second.
func TestWireBytes(t *testing.T) {
	t.Parallel()
	at := wireTime(21, 250_000_000)
	pos := int64(3)
	sum := promotion.ClaimSummary{Issued: 80, Revoked: 3, FirstAcceptedAt: wireTime(21, 0), LastAcceptedAt: wireTime(21, 900_000_000),
		LastIssuedAt: wireTime(21, 999_999_999), LagP50: 12 * time.Millisecond, LagP99: 40 * time.Millisecond, LagMax: 51 * time.Millisecond,
		DeadLetters: map[string]int64{"failed": 1}}
	buckets := []promotion.TimeBucket{{At: wireTime(21, 0), Accepted: 90, Issued: 80, MaxLag: 51 * time.Millisecond, DeadLettered: 1}}
	report := newReport(wireView(), sum, wireTotals(), wireTime(20, 0))
	report.ClaimsPerSecond = claimRates(buckets, time.Second, sum)
	live := wireView()
	live.RetiredAt, live.ClosedAt, *live.Counts.Remaining, live.Counts.Pending = time.Time{}, time.Time{}, 0, 0
	roomed := newReport(live, sum, ui.Totals{}, wireTime(20, 0))
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"promotion", toOut(wireView()), `{"id":"spring-drop","name":"Spring drop","mode":"first_come","kind":"voucher","stock":100,"per_user_limit":2,"value":500,"state":"ended","starts_at":"2026-11-21T00:30:15Z","ends_at":"2026-11-22T00:30:15.12Z","closed_at":"2026-11-21T00:30:15.123456789Z","created_at":"2026-11-20T00:30:15.000001Z","archived_at":"2026-11-23T00:30:15Z","paused":true,"revoke_returns_stock":true,"counts":{"accepted":93,"pending":2,"issued":80,"revoked":3,"failed":1,"remaining":7},"waiting_room":{"enabled":true,"admit_per_second":50,"entry_ttl_seconds":300,"abandon_after_seconds":120,"prequeue_seconds":600,"prequeue_seed_sha256":"9f64a747e1b97f131fabb6b447296c9b6f0201e79fb3c5356e6c77e89b6a806a","prequeue_seed":"01020304","max_active":40,"message":"Hold on \u003ctight\u003e \u0026 \"wait\"","pow_difficulty":8,"page":{"title":"Spring","colors":{"background":"#fff","text":"#000","accent":"#0a7f5a"},"logo_url":"https://shop.example/logo.png","texts":{"heading":"Wait here"},"return_url":"https://shop.example/","mode":"return"},"waiting":11,"admitted":12,"passes_spent":13,"abandoned":14},"webhook_url":"https://partner.example/hook","retired_at":"2026-11-24T00:30:15.000000005Z","expected_claims_per_second":5000,"segments":4}`},
		{"promotion without room", toOut(promotion.View{Promotion: promotion.Promotion{ID: "p", StartsAt: at, EndsAt: at, CreatedAt: at}, State: promotion.StateOpen}),
			`{"id":"p","name":"","mode":"","kind":"","stock":0,"per_user_limit":0,"value":0,"state":"open","starts_at":"2026-11-21T00:30:15.25Z","ends_at":"2026-11-21T00:30:15.25Z","closed_at":null,"created_at":"2026-11-21T00:30:15.25Z","archived_at":null,"paused":false,"revoke_returns_stock":false,"counts":{"accepted":0,"pending":0,"issued":0,"revoked":0,"failed":0,"remaining":null},"waiting_room":{"enabled":false,"waiting":0,"admitted":0,"passes_spent":0,"abandoned":0},"retired_at":null,"expected_claims_per_second":0,"segments":1}`},
		{"standing waiting", toQueueOut(waitroom.Standing{Status: waitroom.StatusWaiting, Position: pos, Wait: waitroom.Estimate{Wait: 90 * time.Second, Low: time.Minute, High: 2 * time.Minute},
			StockExpectedToLast: true, Paused: true, Message: "soon"}),
			`{"status":"waiting","position":3,"estimated_wait_seconds":90,"estimated_wait_range_seconds":[60,120],"stock_expected_to_last":true,"poll_after_ms":30000,"paused":true,"message":"soon"}`},
		{"standing admitted", toQueueOut(waitroom.Standing{Status: waitroom.StatusAdmitted, Token: "tok", Pass: waitroom.Pass{ExpiresAt: at}}),
			`{"status":"admitted","entry_token":"tok","expires_at":"2026-11-21T00:30:15.25Z","paused":false}`},
		{"standing used", toQueueOut(waitroom.Standing{Status: waitroom.StatusUsed}), `{"status":"used"}`},
		{"dead letter", toDeadLetterOut(promotion.DeadLetter{ClaimID: "spring-drop#4", UserID: "u4", Reason: "boom", Deliveries: 5, At: at}),
			`{"claim_id":"spring-drop#4","user_id":"u4","reason":"boom","deliveries":5,"at":"2026-11-21T00:30:15.25Z"}`},
		{"admin token", apiToken(promotion.AdminToken{Name: "ops", SHA256: "ab", CreatedAt: at, CreatedBy: "root"}),
			`{"name":"ops","source":"api","created_at":"2026-11-21T00:30:15.25Z","created_by":"root"}`},
		{"user claim", toUserClaim(promotion.UserClaim{ClaimID: "spring-drop#4", Rank: 4, Status: promotion.StatusIssued, IssuedAt: at, Grant: promotion.Grant{Code: "C-1", Value: 500, ExpiresAt: wireTime(30, 0)}}),
			`{"claim_id":"spring-drop#4","rank":4,"status":"issued","issued_at":"2026-11-21T00:30:15.25Z","code":"C-1","value":500,"expires_at":"2026-11-30T00:30:15Z"}`},
		{"user claim pending", toUserClaim(promotion.UserClaim{ClaimID: "spring-drop#5", Rank: 5, Status: promotion.StatusPending}),
			`{"claim_id":"spring-drop#5","rank":5,"status":"pending","issued_at":null}`},
		{"timeline buckets", bucketsOut(buckets), `[{"at":"2026-11-21T00:30:15Z","accepted":90,"issued":80,"max_lag_ms":51,"dead_lettered":1}]`},
		{"report", report, `{"promotion_id":"spring-drop","name":"Spring drop","mode":"first_come","kind":"voucher","state":"ended","stock":100,"starts_at":"2026-11-21T00:30:15Z","ends_at":"2026-11-22T00:30:15.12Z","closed_at":"2026-11-21T00:30:15.123456789Z","generated_at":"NOW","accepted":93,"issued":80,"revoked":3,"pending":2,"dead_letters":{"failed":1},"sold_out_at":null,"first_accepted_at":"2026-11-21T00:30:15Z","last_accepted_at":"2026-11-21T00:30:15.9Z","last_issued_at":"2026-11-21T00:30:15.999999999Z","issue_lag":{"p50_ms":12,"p99_ms":40,"max_ms":51},"claims_per_second":{"peak":90,"mean":80,"bucket_seconds":1,"buckets":[{"at":"2026-11-21T00:30:15Z","accepted":90,"issued":80,"max_lag_ms":51,"dead_lettered":1}]},"rejected":{"scope":"instance","since":"2026-11-20T00:30:15Z","total":5,"by_code":{"sold_out":5}},"waiting_room":null,"notes":["rejected counts the claims this instance refused since it started; other instances, and this one before a restart, are not in it","the waiting room's counts were kept in Redis, which no longer holds them: the promotion was retired","claims are still pending: the lag and timeline cover the issued ones only"]}`},
		{"report with room", roomed, `{"promotion_id":"spring-drop","name":"Spring drop","mode":"first_come","kind":"voucher","state":"ended","stock":100,"starts_at":"2026-11-21T00:30:15Z","ends_at":"2026-11-22T00:30:15.12Z","closed_at":null,"generated_at":"NOW","accepted":93,"issued":80,"revoked":3,"pending":0,"dead_letters":{"failed":1},"sold_out_at":"2026-11-21T00:30:15.9Z","first_accepted_at":"2026-11-21T00:30:15Z","last_accepted_at":"2026-11-21T00:30:15.9Z","last_issued_at":"2026-11-21T00:30:15.999999999Z","issue_lag":{"p50_ms":12,"p99_ms":40,"max_ms":51},"claims_per_second":{"peak":0,"mean":0,"bucket_seconds":1,"buckets":[]},"rejected":{"scope":"instance","since":"2026-11-20T00:30:15Z","total":0,"by_code":null},"waiting_room":{"joins":37,"admitted":12,"abandoned":14,"waiting":11,"passes_spent":13},"notes":["rejected counts the claims this instance refused since it started; other instances, and this one before a restart, are not in it"]}`},
	} {
		got := generatedAt.ReplaceAllString(wireJSON(t, tc.v), `"generated_at":"NOW"`)
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// generatedAt matches a report's generated_at, the one time made now.
var generatedAt = regexp.MustCompile(`"generated_at":"[^"]*"`)

// wireTotals are an instance's counts of a promotion's refusals.
func wireTotals() ui.Totals {
	return ui.Totals{Accepted: 93, Rejected: map[string]int64{"sold_out": 5}}
}

// TestWireClientReads: each answer the server makes from a value with
// every member set, encoded as it is sent, decodes into the Go client's
// type member by member: every member arrives, with its value, and none
// is left unset that the server sets.
func TestWireClientReads(t *testing.T) {
	t.Parallel()
	at := wireTime(21, 250_000_000).UTC()
	ptr := func(v int64) *int64 { return &v }
	yes, wait, poll := true, 90.0, int64(30000)
	seed := "9f64a747e1b97f131fabb6b447296c9b6f0201e79fb3c5356e6c77e89b6a806a"
	when := func(day, nsec int) *time.Time { u := wireTime(day, nsec).UTC(); return &u }
	shuffle := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	sum := promotion.ClaimSummary{Issued: 80, Revoked: 3, FirstAcceptedAt: wireTime(21, 0), LastAcceptedAt: wireTime(21, 900_000_000),
		LastIssuedAt: wireTime(21, 999_999_999), LagP50: 12 * time.Millisecond, LagP99: 40 * time.Millisecond, LagMax: 51 * time.Millisecond,
		DeadLetters: map[string]int64{"failed": 1}}
	bucket := promotion.TimeBucket{At: wireTime(21, 0), Accepted: 90, Issued: 80, MaxLag: 51 * time.Millisecond, DeadLettered: 1}
	clientBucket := client.TimeBucket{At: *when(21, 0), Accepted: 90, Issued: 80, MaxLagMS: 51, DeadLettered: 1}
	live := wireView()
	live.RetiredAt, *live.Counts.Remaining = time.Time{}, 0
	report := newReport(live, sum, wireTotals(), wireTime(20, 0))
	report.ClaimsPerSecond = claimRates([]promotion.TimeBucket{bucket}, time.Second, sum)
	wantReport := client.Report{PromotionID: "spring-drop", Name: "Spring drop", Mode: "first_come", Kind: "voucher", State: "ended",
		Stock: 100, StartsAt: *when(21, 0), EndsAt: *when(22, 120_000_000), ClosedAt: when(21, 123_456_789), GeneratedAt: report.GeneratedAt,
		Accepted: 93, Issued: 80, Revoked: 3, Pending: 2, DeadLetters: map[string]int64{"failed": 1}, SoldOutAt: when(21, 900_000_000),
		FirstAcceptedAt: when(21, 0), LastAcceptedAt: when(21, 900_000_000), LastIssuedAt: when(21, 999_999_999),
		Notes: report.Notes}
	wantReport.IssueLag.P50MS, wantReport.IssueLag.P99MS, wantReport.IssueLag.MaxMS = 12, 40, 51
	wantReport.ClaimsPerSecond.Peak, wantReport.ClaimsPerSecond.Mean, wantReport.ClaimsPerSecond.BucketSeconds = 90, 80, 1
	wantReport.ClaimsPerSecond.Buckets = []client.TimeBucket{clientBucket}
	wantReport.Rejected.Scope, wantReport.Rejected.Since, wantReport.Rejected.Total = "instance", *when(20, 0), 5
	wantReport.Rejected.ByCode = map[string]int64{"sold_out": 5}
	wantReport.WaitingRoom = &api.ReportRoom{Joins: 37, Admitted: 12, Abandoned: 14, Waiting: 11, Spent: 13}
	claimID := "spring-drop#4"
	for _, tc := range []struct {
		name   string
		server any
		client any // a pointer to the client's type, to decode into
		want   any
		unset  []string // members the server leaves out of this value
	}{
		{"promotion", toOut(wireView()), new(client.Promotion), client.Promotion{ID: "spring-drop", Name: "Spring drop", Mode: "first_come",
			Kind: "voucher", Stock: 100, PerUserLimit: 2, Value: 500, State: "ended", StartsAt: *when(21, 0), EndsAt: *when(22, 120_000_000),
			ClosedAt: when(21, 123_456_789), CreatedAt: *when(20, 1_000), ArchivedAt: when(23, 0), RetiredAt: when(24, 5),
			Paused: true, RevokeReturnsStock: true,
			Counts: client.Counts{Accepted: 93, Pending: 2, Issued: 80, Revoked: 3, Failed: 1, Remaining: ptr(7)},
			WaitingRoom: client.RoomView{Enabled: true, AdmitPerSecond: 50, EntryTTLSeconds: 300, AbandonAfterSeconds: 120, PrequeueSeconds: 600,
				PrequeueSeedSHA256: seed, PrequeueSeed: "01020304", MaxActive: 40, Message: "Hold on <tight> & \"wait\"", PowDifficulty: 8,
				Page: &client.QueuePage{Title: "Spring", Colors: client.QueuePageColors{Background: "#fff", Text: "#000", Accent: "#0a7f5a"},
					LogoURL: "https://shop.example/logo.png", Texts: map[string]string{"heading": "Wait here"}, ReturnURL: "https://shop.example/", Mode: "return"},
				Waiting: 11, Admitted: 12, PassesSpent: 13, Abandoned: 14},
			WebhookURL: "https://partner.example/hook", ExpectedClaimsPerSecond: 5000, Segments: 4}, nil},
		{"standing waiting", toQueueOut(waitroom.Standing{Status: waitroom.StatusWaiting, Position: 3, Wait: waitroom.Estimate{Wait: 90 * time.Second, Low: time.Minute, High: 2 * time.Minute},
			StockExpectedToLast: true, Paused: true, Message: "soon"}), new(client.QueueStanding),
			client.QueueStanding{Status: client.QueueWaiting, Position: ptr(3), EstimatedWaitSeconds: &wait, EstimatedWaitRangeSeconds: []float64{60, 120},
				StockExpectedToLast: &yes, PollAfterMS: &poll, Paused: &yes, Message: "soon"}, []string{"EntryToken", "ExpiresAt", "ShuffleAt"}},
		{"standing admitted", toQueueOut(waitroom.Standing{Status: waitroom.StatusAdmitted, Token: "tok", Pass: waitroom.Pass{ExpiresAt: at}, Paused: true}),
			new(client.QueueStanding), client.QueueStanding{Status: client.QueueAdmitted, EntryToken: "tok", ExpiresAt: &at, Paused: &yes},
			[]string{"Position", "EstimatedWaitSeconds", "EstimatedWaitRangeSeconds", "StockExpectedToLast", "PollAfterMS", "ShuffleAt", "Message"}},
		{"standing prequeue", toQueueOut(waitroom.Standing{Status: waitroom.StatusPrequeue, ShuffleAt: shuffle, Paused: true}),
			new(client.QueueStanding), client.QueueStanding{Status: client.QueuePrequeue, ShuffleAt: &shuffle, PollAfterMS: &poll, Paused: &yes},
			[]string{"Position", "EstimatedWaitSeconds", "EstimatedWaitRangeSeconds", "StockExpectedToLast", "EntryToken", "ExpiresAt", "Message"}},
		{"dead letter", toDeadLetterOut(promotion.DeadLetter{ClaimID: claimID, UserID: "u4", Reason: "boom", Deliveries: 5, At: wireTime(21, 250_000_000)}),
			new(client.DeadLetter), client.DeadLetter{ClaimID: claimID, UserID: "u4", Reason: "boom", Deliveries: 5, At: at}, nil},
		{"admin token", apiToken(promotion.AdminToken{Name: "ops", SHA256: "ab", CreatedAt: wireTime(21, 250_000_000), CreatedBy: "root"}),
			new(client.AdminToken), client.AdminToken{Name: "ops", Source: "api", CreatedAt: &at, CreatedBy: "root"}, []string{"Token"}},
		{"user claim", toUserClaim(promotion.UserClaim{ClaimID: claimID, Rank: 4, Status: promotion.StatusIssued, IssuedAt: wireTime(21, 250_000_000),
			Grant: promotion.Grant{Code: "C-1", Value: 500, ExpiresAt: wireTime(30, 0)}}), new(client.UserClaim),
			client.UserClaim{ClaimID: claimID, Rank: 4, Status: client.StatusIssued, IssuedAt: &at, Code: "C-1", Value: ptr(500), ExpiresAt: when(30, 0)}, nil},
		{"timeline buckets", bucketsOut([]promotion.TimeBucket{bucket}), new([]client.TimeBucket), []client.TimeBucket{clientBucket}, nil},
		{"report", report, new(client.Report), wantReport, nil},
		{"event", events.FromStore(store.Event{ID: "ev-1", Seq: 9, Type: "claim.issued", At: wireTime(21, 250_000_000), PromotionID: "spring-drop",
			ClaimID: claimID, Data: []byte(`{"rank":4}`)}), new(client.Event), client.Event{ID: "ev-1", Seq: 9, Type: "claim.issued", At: at,
			PromotionID: "spring-drop", ClaimID: &claimID, Data: json.RawMessage(`{"rank":4}`)}, nil},
	} {
		if err := json.Unmarshal([]byte(wireJSON(t, tc.server)), tc.client); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := reflect.ValueOf(tc.client).Elem()
		sameFields(t, tc.name, got, reflect.ValueOf(tc.want))
		unsetFields(t, tc.name, got, tc.unset)
	}
}

// sameFields reports each member of got that differs from want, by its
// path; times are compared as instants.
func sameFields(t *testing.T, path string, got, want reflect.Value) {
	t.Helper()
	if got.Type() == reflect.TypeFor[time.Time]() {
		if !got.Interface().(time.Time).Equal(want.Interface().(time.Time)) {
			t.Errorf("%s: got %v, want %v", path, got, want)
		}
		return
	}
	switch got.Kind() {
	case reflect.Struct:
		for i := range got.NumField() {
			sameFields(t, path+"."+got.Type().Field(i).Name, got.Field(i), want.Field(i))
		}
	case reflect.Pointer:
		if got.IsNil() || want.IsNil() {
			if got.IsNil() != want.IsNil() {
				t.Errorf("%s: got %v, want %v", path, got, want)
			}
			return
		}
		sameFields(t, path, got.Elem(), want.Elem())
	case reflect.Slice:
		if got.Len() != want.Len() {
			t.Errorf("%s: got %d items, want %d", path, got.Len(), want.Len())
			return
		}
		for i := range got.Len() {
			sameFields(t, fmt.Sprintf("%s[%d]", path, i), got.Index(i), want.Index(i))
		}
	default:
		if !reflect.DeepEqual(got.Interface(), want.Interface()) {
			t.Errorf("%s: got %v, want %v", path, got, want)
		}
	}
}

// unsetFields reports each member of v (a struct, or a slice of them), and
// of the structs it holds, left at its zero value, but those named in unset
// (by their path below v), which must be.
func unsetFields(t *testing.T, name string, v reflect.Value, unset []string) {
	t.Helper()
	if v.Kind() == reflect.Slice {
		for i := range v.Len() {
			unsetFields(t, fmt.Sprintf("%s[%d]", name, i), v.Index(i), unset)
		}
		return
	}
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		for i := range v.NumField() {
			p, f := strings.TrimPrefix(path+"."+v.Type().Field(i).Name, "."), v.Field(i)
			if f.IsZero() != slices.Contains(unset, p) {
				t.Errorf("%s: %s is zero: %t, want %t", name, p, f.IsZero(), slices.Contains(unset, p))
			}
			if f.Kind() == reflect.Pointer && !f.IsNil() {
				f = f.Elem()
			}
			if f.Kind() == reflect.Struct && f.Type() != reflect.TypeFor[time.Time]() {
				walk(p, f)
			}
		}
	}
	walk("", v)
}
