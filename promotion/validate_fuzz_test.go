package promotion_test

import (
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
)

// idPattern is the rule ValidID implements, as a regular expression.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$`)

// FuzzValidID checks ValidID against its rule: 1 to 64 bytes of
// A-Z a-z 0-9 _ - . : @, the first a letter or a digit.
func FuzzValidID(f *testing.F) {
	for _, s := range []string{"u-123", "spring-drop", "a", "0", "_a", "-", "a b", "", "é", "a\x00",
		"user@example.com", "a:b.c_d-e", "1234567890123456789012345678901234567890123456789012345678901234",
		"12345678901234567890123456789012345678901234567890123456789012345"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := promotion.ValidID(s), idPattern.MatchString(s); got != want {
			t.Fatalf("ValidID(%q) = %v, want %v", s, got, want)
		}
	})
}

// FuzzNormalize feeds arbitrary promotion definitions to Normalize. It never
// panics; a definition it accepts satisfies every limit; and normalizing an
// accepted definition again changes nothing.
func FuzzNormalize(f *testing.F) {
	f.Add("spring-drop", "Spring drop", "", "", int64(1000), 1, int64(0), int64(0), int64(0), false, 0, 0)
	f.Add("g", "", "grant", "point", int64(0), 0, int64(50), int64(1763683200000), int64(1763769600000), false, 0, 0)
	f.Add("w", "", "first_come", "voucher", int64(10), 5, int64(1), int64(0), int64(0), false, 10, 60)
	f.Add("w", "", "first_come", "coupon", int64(10), 1, int64(0), int64(0), int64(0), true, 0, 0)
	f.Add("", "", "other", "coupon", int64(-1), -1, int64(-1), int64(5), int64(4), false, -1, -1)
	f.Fuzz(func(t *testing.T, id, name, mode, kind string, stock int64, perUser int, value, startsMS, endsMS int64,
		wrEnabled bool, admit, ttl int) {
		now := time.UnixMilli(1763683200000)
		p := promotion.Promotion{ID: id, Name: name, Mode: mode, Kind: kind, Stock: stock, PerUserLimit: perUser, Value: value,
			WaitingRoom: promotion.WaitingRoom{Enabled: wrEnabled, AdmitPerSecond: admit, EntryTTLSeconds: ttl}}
		if startsMS != 0 {
			p.StartsAt = time.UnixMilli(startsMS)
		}
		if endsMS != 0 {
			p.EndsAt = time.UnixMilli(endsMS)
		}
		if err := promotion.Normalize(&p, now); err != nil {
			return
		}
		switch {
		case p.ID != "" && !promotion.ValidID(p.ID),
			len(p.Name) > 200,
			p.Mode != store.ModeFirstCome && p.Mode != promotion.ModeGrant,
			p.Kind != store.KindCoupon && p.Kind != store.KindVoucher && p.Kind != store.KindPoint,
			p.Stock < 0 || p.Stock > promotion.MaxStock || (p.Mode == store.ModeFirstCome && p.Stock < 1),
			p.PerUserLimit < 1 || p.PerUserLimit > promotion.MaxPerUserLimit,
			p.Mode == promotion.ModeGrant && p.PerUserLimit != 1,
			p.Value < 0,
			!p.EndsAt.After(p.StartsAt),
			p.StartsAt.Location() != time.UTC || p.EndsAt.Location() != time.UTC,
			p.WaitingRoom.Enabled && p.Mode == promotion.ModeGrant,
			p.WaitingRoom.Enabled && (p.WaitingRoom.AdmitPerSecond < 1 || p.WaitingRoom.EntryTTLSeconds < 1):
			t.Fatalf("Normalize accepted %+v", p)
		}
		again := p
		if err := promotion.Normalize(&again, now.Add(time.Hour)); err != nil {
			t.Fatalf("Normalize accepted %+v, then refused it: %v", p, err)
		}
		if !again.StartsAt.Equal(p.StartsAt) || !again.EndsAt.Equal(p.EndsAt) {
			t.Fatalf("normalizing twice moved the window: %+v, then %+v", p, again)
		}
		again.StartsAt, again.EndsAt = p.StartsAt, p.EndsAt
		if !reflect.DeepEqual(again, p) {
			t.Fatalf("normalizing twice changed the definition: %+v, then %+v", p, again)
		}
	})
}
