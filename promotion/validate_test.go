package promotion_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
)

// TestValidIDMatchesTheContract checks the id rule against the contract's
// wording, written as a regular expression, on crafted and generated ids.
func TestValidIDMatchesTheContract(t *testing.T) {
	t.Parallel()
	contract := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$`)
	ids := []string{"", "a", "Z9", "u-123", "spring-drop", "a:b@c.d_e-f", "-a", "_a", ".a", "@a", ":a",
		"a b", "a/b", "a#1", "é", "a\x00", strings.Repeat("a", 64), strings.Repeat("a", 65), "0"}
	alphabet := "aZ09_-.:@ /#\x00é"
	for i := 0; i < 5000; i++ {
		n := i%7 + 1
		var b strings.Builder
		for j := 0; j < n; j++ {
			b.WriteByte(alphabet[(i*31+j*17)%len(alphabet)])
		}
		ids = append(ids, b.String())
	}
	for _, id := range ids {
		if got, want := promotion.ValidID(id), contract.MatchString(id); got != want {
			t.Errorf("ValidID(%q) = %v, contract says %v", id, got, want)
		}
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		in    promotion.Promotion
		field string // "" when valid
	}{
		{"defaults", promotion.Promotion{Stock: 10}, ""},
		{"grant without stock", promotion.Promotion{Mode: promotion.ModeGrant}, ""},
		{"first come without stock", promotion.Promotion{}, "stock"},
		{"bad mode", promotion.Promotion{Stock: 1, Mode: "raffle"}, "mode"},
		{"bad kind", promotion.Promotion{Stock: 1, Kind: "gift"}, "kind"},
		{"limit too high", promotion.Promotion{Stock: 1, PerUserLimit: 1001}, "per_user_limit"},
		{"negative value", promotion.Promotion{Stock: 1, Value: -1}, "value"},
		{"end before start", promotion.Promotion{Stock: 1, StartsAt: now, EndsAt: now.Add(-time.Second)}, "ends_at"},
		{"bad id", promotion.Promotion{ID: "-x", Stock: 1}, "id"},
		{"waiting room on", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Enabled: true}}, ""},
		{"waiting room on a grant", promotion.Promotion{Mode: promotion.ModeGrant, WaitingRoom: promotion.WaitingRoom{Enabled: true}}, "waiting_room.enabled"},
		{"admit rate too high", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{AdmitPerSecond: 2_000_000}}, "waiting_room.admit_per_second"},
		{"abandonment too short", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Enabled: true, AbandonAfterSeconds: 9}}, "waiting_room.abandon_after_seconds"},
		{"abandonment too long", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Enabled: true, AbandonAfterSeconds: 3601}}, "waiting_room.abandon_after_seconds"},
		{"abandonment negative", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Enabled: true, AbandonAfterSeconds: -1}}, "waiting_room.abandon_after_seconds"},
		{"prequeue too long", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Enabled: true, PrequeueSeconds: 86_401}}, "waiting_room.prequeue_seconds"},
		{"prequeue negative", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Enabled: true, PrequeueSeconds: -1}}, "waiting_room.prequeue_seconds"},
		{"prequeue without the room", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{PrequeueSeconds: 60}}, "waiting_room.prequeue_seconds"},
		{"prequeue with a short seed", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Enabled: true, PrequeueSeconds: 60, PrequeueSeed: make([]byte, 31)}}, "waiting_room.prequeue_seed"},
		{"max_active negative", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Enabled: true, MaxActive: -1}}, "waiting_room.max_active"},
		{"max_active too high", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Enabled: true, MaxActive: promotion.MaxActivePasses + 1}}, "waiting_room.max_active"},
		{"max_active without the room", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{MaxActive: 5}}, "waiting_room.max_active"},
		{"message too long", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Enabled: true, Message: strings.Repeat("x", promotion.MaxRoomMessageLen+1)}}, "waiting_room.message"},
		{"message of two lines", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Enabled: true, Message: "a\nb"}}, "waiting_room.message"},
		{"message without the room", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Message: "hi"}}, "waiting_room.message"},
		{"pow too hard", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Enabled: true, PowDifficulty: promotion.MaxPowDifficulty + 1}}, "waiting_room.pow_difficulty"},
		{"pow negative", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Enabled: true, PowDifficulty: -1}}, "waiting_room.pow_difficulty"},
		{"pow without the room", promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{PowDifficulty: 8}}, "waiting_room.pow_difficulty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.in
			err := promotion.Normalize(&p, now)
			var ve *promotion.ValidationError
			switch {
			case c.field == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case c.field != "" && (!errors.As(err, &ve) || ve.Field != c.field):
				t.Fatalf("got %v, want an error naming %s", err, c.field)
			}
			if c.field == "" && c.in.Mode == "" {
				if p.Mode != store.ModeFirstCome || p.Kind != store.KindCoupon || p.PerUserLimit != 1 ||
					!p.StartsAt.Equal(now) || !p.EndsAt.Equal(now.Add(24*time.Hour)) {
					t.Fatalf("defaults not filled: %+v", p)
				}
			}
		})
	}
}
