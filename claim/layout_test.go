package claim_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// TestPreviousReleaseRefusesCompact runs the previous release's claim
// script (testdata/claim_v3.lua, "-- dibs:claim v3") on a compact
// promotion: it answers wrong_mode and writes nothing, so an instance of
// that release beside this one can neither oversell nor break the compact
// records. On a classic promotion it still claims.
func TestPreviousReleaseRefusesCompact(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("testdata/claim_v3.lua")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tp := redistest.Topologies(t)[0]
	for _, l := range []claim.Layout{claim.LayoutCompact, claim.LayoutClassic} {
		f := setup(t, topo{Topology: tp, layout: l})
		id := "prev-" + l.String()
		f.open(t, claim.Promotion{ID: id, Stock: 5})
		if _, err := f.gate.Claim(ctx, id, "u1", ""); err != nil {
			t.Fatal(err)
		}
		k := f.gate.Keys(id)
		keys := claim.ClaimScriptKeys(f.prefix, id)[:7] // the previous release's KEYS
		got, err := f.client.Do(ctx, f.client.B().Eval().Script(string(src)).Numkeys(7).Key(keys...).
			Arg("u2", "", id, "0").Build()).ToArray()
		if err != nil {
			t.Fatal(err)
		}
		outcome, _ := got[0].ToString()
		seq, _ := f.client.Do(ctx, f.client.B().Get().Key(k.Seq()).Build()).AsInt64()
		users, _ := f.client.Do(ctx, f.client.B().Exists().Key(k.Users(), k.Status()).Build()).AsInt64()
		switch l {
		case claim.LayoutCompact:
			if outcome != "wrong_mode" || seq != 1 || users != 0 {
				t.Fatalf("previous release on a compact promotion: %q, seq %d, %d classic keys; want wrong_mode, 1, 0", outcome, seq, users)
			}
		case claim.LayoutClassic:
			if outcome != "ok" || seq != 2 {
				t.Fatalf("previous release on a classic promotion: %q, seq %d; want ok, 2", outcome, seq)
			}
		}
		// This release goes on with the promotion in its own layout.
		if _, err := f.gate.Claim(ctx, id, "u3", ""); err != nil {
			t.Fatalf("%s: claim after the previous release's: %v", l, err)
		}
		if _, err := f.gate.Claim(ctx, id, "u1", ""); !errors.Is(err, claim.ErrAlreadyClaimed) {
			t.Fatalf("%s: second claim of u1: %v, want already claimed", l, err)
		}
	}
}

// TestClassicPromotionKeepsItsLayout: a promotion created classic (by an
// earlier release, or with LayoutClassic) stays classic when a gate that
// creates compact promotions opens it again, and when Redis lost its meta
// hash but not its statuses; a promotion whose keys are all gone is created
// in the gate's layout.
func TestClassicPromotionKeepsItsLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := topo{Topology: redistest.Topologies(t)[0], layout: claim.LayoutClassic}
	old := setup(t, tp)
	p := promo("keep", 5, 1)
	old.open(t, p)
	if _, err := old.gate.Claim(ctx, "keep", "u1", ""); err != nil {
		t.Fatal(err)
	}
	f := old
	f.gate, f.layout = newGate(t, old.client, old.prefix), claim.LayoutCompact
	k := f.gate.Keys("keep")
	mode := func() string { return f.hget(t, k.Meta(), "mode") }
	f.open(t, p)
	if _, err := f.gate.Claim(ctx, "keep", "u2", ""); err != nil || mode() != "first_come" || old.status(t, "keep", "2") != "p" {
		t.Fatalf("after a compact gate opened it: %v, mode %q, status %q; want first_come and p", err, mode(), old.status(t, "keep", "2"))
	}
	if err := f.client.Do(ctx, f.client.B().Del().Key(k.Meta()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.gate.OpenRebuilding(ctx, p); err != nil || mode() != "first_come" {
		t.Fatalf("meta re-created: %v, mode %q; want first_come (the statuses are classic)", err, mode())
	}
	f.forget(t, "keep")
	if _, err := f.gate.Open(ctx, p); err != nil || mode() != "first_come:2" {
		t.Fatalf("all keys gone: %v, mode %q; want first_come:2", err, mode())
	}
}

// TestSightings reads claims' statuses and list membership in either
// layout, with the status bytes read as one range and rank by rank (ranks
// spread far apart), and a rank Redis holds nothing of.
func TestSightings(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		f.open(t, claim.Promotion{ID: "s", Stock: 10})
		for _, u := range []string{"u1", "u2", "u3"} {
			if _, err := f.gate.Claim(ctx, "s", u, ""); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.gate.Ack(ctx, "s", []claim.Entry{{ID: "0-1", Rank: "1"}}); err != nil {
			t.Fatal(err)
		}
		if err := f.gate.MarkFailed(ctx, "s", 2); err != nil {
			t.Fatal(err)
		}
		issued := "i"
		if f.layout == claim.LayoutClassic {
			issued = f.status(t, "s", "1")
		}
		want := []claim.Sighting{{Status: issued, Listed: true}, {Status: "f", Listed: true}, {Status: "p"}, {}}
		for _, far := range []int64{4, 1 << 20} {
			got, errs := f.gate.Sightings(ctx, []claim.Sighted{{ID: "s", Ranks: []int64{1, 2, 3, far},
				Users: []string{"u1", "u2", "u1", "u4"}}})
			if errs[0] != nil {
				t.Fatal(errs[0])
			}
			if fmt.Sprint(got[0]) != fmt.Sprint(want) {
				t.Errorf("rank %d the farthest: %+v, want %+v", far, got[0], want)
			}
		}
	})
}

// TestAckSpreadRanks acknowledges a batch whose ranks are far apart (the
// compact ack then writes rank by rank instead of one range) beside a
// voided claim: each is marked issued, the voided one keeps its status.
func TestAckSpreadRanks(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		f.open(t, claim.Promotion{ID: "spread", Stock: 10})
		for _, u := range []string{"u1", "u2"} {
			if _, err := f.gate.Claim(ctx, "spread", u, ""); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := f.gate.Void(ctx, "spread", 2); err != nil {
			t.Fatal(err)
		}
		if _, err := f.gate.Ack(ctx, "spread", []claim.Entry{{ID: "0-1", Rank: "1"}, {ID: "0-2", Rank: "2"},
			{ID: "0-3", Rank: "9000"}, {ID: "0-4", Rank: ""}}); err != nil {
			t.Fatal(err)
		}
		for rank, want := range map[string]string{"1": "i", "2": "v", "9000": "i", "3": ""} {
			if got := f.status(t, "spread", rank); !strings.HasPrefix(got, want) || (want == "" && got != "") {
				t.Errorf("status of rank %s: %q, want %q", rank, got, want)
			}
		}
	})
}
