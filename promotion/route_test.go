package promotion

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// TestRoute: a claim takes the path its handle names, chosen once by
// pathOf from the definition; a claim of a promotion not published here
// takes the roomed path, whose script finds out from Redis whether the
// promotion has a room.
func TestRoute(t *testing.T) {
	t.Parallel()
	type method = func(*claimer, context.Context, claimArgs) (Claimed, error)
	name := func(f method) uintptr { return reflect.ValueOf(f).Pointer() }
	for _, tc := range []struct {
		name string
		p    Promotion
		want method
	}{
		{"plain", Promotion{ID: "p", Segments: 1}, (*claimer).claimPlain},
		{"waiting room", Promotion{ID: "p", Segments: 1, WaitingRoom: WaitingRoom{Enabled: true}}, (*claimer).claimRoomed},
		{"segments", Promotion{ID: "p", Segments: 4}, (*claimer).claimSegmented},
	} {
		c := claimArgs{h: &handle{claim: pathOf(tc.p)}}
		if name(route(c)) != name(tc.want) {
			t.Errorf("%s: the claim does not take its path", tc.name)
		}
	}
	if name(route(claimArgs{})) != name((*claimer).claimRoomed) {
		t.Error("a claim of a promotion not published here does not take the roomed path")
	}
}

// TestGateChange: what a change hands the gate: the stock capped by the
// code pool, the end as given, and a reopen only for a promotion neither
// closed nor drained.
func TestGateChange(t *testing.T) {
	t.Parallel()
	stock, end := int64(50), time.Now().Add(time.Hour)
	p := Promotion{ID: "p", Stock: 10, codes: 30}
	rc := gateChange(p, false, Change{Stock: &stock, EndsAt: &end})
	if rc.Stock == nil || *rc.Stock != 30 {
		t.Errorf("stock 50 over a pool of 30 codes: the gate gets %v, want 30", rc.Stock)
	}
	if rc.EndsAt != &end || !rc.Reopen {
		t.Errorf("end or reopen not handed on: %+v", rc)
	}
	if rc := gateChange(p, false, Change{}); rc.Stock != nil || rc.EndsAt != nil {
		t.Errorf("an empty change changes the gate: %+v", rc)
	}
	if gateChange(p, true, Change{}).Reopen {
		t.Error("a drained promotion is reopened")
	}
	closed := p
	closed.ClosedAt = time.Now()
	if gateChange(closed, false, Change{}).Reopen {
		t.Error("a promotion an admin closed is reopened")
	}
}
