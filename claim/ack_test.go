package claim_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// claimAndRead claims n units of promotion id for users u0..u(n-1) and
// reads their entries as one consumer, returning them as ack entries.
func (f fixture) claimAndRead(t *testing.T, id string, n int) []claim.Entry {
	t.Helper()
	ctx := context.Background()
	f.open(t, claim.Promotion{ID: id, Stock: int64(n)})
	for i := range n {
		if _, err := f.gate.Claim(ctx, id, "u"+strconv.Itoa(i), ""); err != nil {
			t.Fatal(err)
		}
	}
	k := f.gate.Keys(id)
	read, err := f.client.Do(ctx, f.client.B().Xreadgroup().Group(claim.Group, "c1").Count(int64(n)).
		Streams().Key(k.Stream()).Id(">").Build()).AsXRead()
	if err != nil || len(read[k.Stream()]) != n {
		t.Fatalf("read %d of %d entries: %v", len(read[k.Stream()]), n, err)
	}
	entries := make([]claim.Entry, n)
	for i, e := range read[k.Stream()] {
		entries[i] = claim.Entry{ID: e.ID, Rank: e.FieldValues["rank"]}
	}
	return entries
}

// pending is the promotion's count of entries delivered and not acked.
func (f fixture) pending(t *testing.T, id string) int64 {
	t.Helper()
	k := f.gate.Keys(id)
	res, err := f.client.Do(context.Background(), f.client.B().Xpending().Key(k.Stream()).Group(claim.Group).Build()).ToArray()
	if err != nil || len(res) == 0 {
		t.Fatalf("XPENDING: %v", err)
	}
	n, _ := res[0].AsInt64()
	return n
}

// TestAckBigBatch: one Ack of a batch bigger than one script call takes
// (several calls, sent together) acknowledges every entry and marks every
// claim issued, also on a server that has not loaded the script yet.
func TestAckBigBatch(t *testing.T) {
	t.Parallel()
	srv := redistest.Fresh(t, redisserver.Options{AppendFsync: "off"})
	fresh := redistest.Topology{Name: "fresh", Addrs: []string{srv.Addr()}}
	tops := []topo{{Topology: fresh, layout: claim.LayoutCompact}, {Topology: fresh, layout: claim.LayoutClassic}}
	for _, tp := range redistest.Topologies(t) {
		tops = append(tops, topo{Topology: tp, layout: claim.LayoutCompact}, topo{Topology: tp, layout: claim.LayoutClassic})
	}
	for _, tp := range tops {
		t.Run(tp.Name+"/"+tp.layout.String(), func(t *testing.T) {
			t.Parallel()
			f := setup(t, tp)
			entries := f.claimAndRead(t, "big", 250)
			n, err := f.gate.Ack(context.Background(), "big", entries)
			if err != nil || n != 250 {
				t.Fatalf("ack of 250: %d, %v", n, err)
			}
			if p := f.pending(t, "big"); p != 0 {
				t.Fatalf("%d entries still pending", p)
			}
			for _, rank := range []string{"1", "100", "101", "200", "201", "250"} {
				if st := f.status(t, "big", rank); !strings.HasPrefix(st, "i") {
					t.Errorf("status of rank %s: %q, want issued", rank, st)
				}
			}
		})
	}
}

// TestSightingsManyClaims reads a query of more claims than one HMGET
// carries: every claim's status and list membership comes back in order.
func TestSightingsManyClaims(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		entries := f.claimAndRead(t, "many", 250)
		if _, err := f.gate.Ack(ctx, "many", entries[:120]); err != nil {
			t.Fatal(err)
		}
		q := claim.Sighted{ID: "many"}
		for i := range 250 {
			q.Ranks = append(q.Ranks, int64(i+1))
			q.Users = append(q.Users, "u"+strconv.Itoa(i))
		}
		q.Users[249] = "nobody" // a rank not in its user's list
		got, errs := f.gate.Sightings(ctx, []claim.Sighted{q})
		if errs[0] != nil {
			t.Fatal(errs[0])
		}
		if len(got[0]) != 250 {
			t.Fatalf("%d sightings, want 250", len(got[0]))
		}
		for i, s := range got[0] {
			wantIssued := i < 120
			if strings.HasPrefix(s.Status, "i") != wantIssued || (!wantIssued && s.Status != "p") {
				t.Errorf("rank %d: status %q, issued want %v", i+1, s.Status, wantIssued)
			}
			if s.Listed != (i != 249) {
				t.Errorf("rank %d: listed %v", i+1, s.Listed)
			}
		}
	})
}

// TestAckCallsBounded: an Ack of a big batch sends no script call with more
// than 100 entries (a call holds Redis for as long as its entries take).
func TestAckCallsBounded(t *testing.T) {
	t.Parallel()
	srv := redistest.Fresh(t, redisserver.Options{AppendFsync: "off"})
	f := setup(t, topo{Topology: redistest.Topology{Name: "fresh", Addrs: []string{srv.Addr()}}, layout: claim.LayoutCompact})
	entries := f.claimAndRead(t, "bounded", 450)
	redistest.LogEveryCommand(t, f.client, 10000)
	if n, err := f.gate.Ack(context.Background(), "bounded", entries); err != nil || n != 450 {
		t.Fatalf("ack of 450: %d, %v", n, err)
	}
	calls := 0
	for _, l := range redistest.LoggedCommands(t, f.client) {
		if l.Name() != "EVALSHA" && l.Name() != "EVAL" {
			continue
		}
		calls++
		// EVALSHA sha numkeys, 4 keys, the group, then (id, rank) pairs.
		if entries := (l.Argc - 8) / 2; entries > 100 {
			t.Errorf("a script call carried %d entries", entries)
		}
	}
	if calls < 5 {
		t.Fatalf("%d script calls for 450 entries, want at least 5", calls)
	}
}

// TestSightingsReadsBounded: a Sightings query of many claims reads no
// more than 100 fields with one HMGET.
func TestSightingsReadsBounded(t *testing.T) {
	t.Parallel()
	srv := redistest.Fresh(t, redisserver.Options{AppendFsync: "off"})
	f := setup(t, topo{Topology: redistest.Topology{Name: "fresh", Addrs: []string{srv.Addr()}}, layout: claim.LayoutClassic})
	f.claimAndRead(t, "wide", 450)
	q := claim.Sighted{ID: "wide"}
	for i := range 450 {
		q.Ranks = append(q.Ranks, int64(i+1))
		q.Users = append(q.Users, "u"+strconv.Itoa(i))
	}
	redistest.LogEveryCommand(t, f.client, 10000)
	if _, errs := f.gate.Sightings(context.Background(), []claim.Sighted{q}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	reads := 0
	for _, l := range redistest.LoggedCommands(t, f.client) {
		if l.Name() != "HMGET" {
			continue
		}
		reads++
		if fields := l.Argc - 2; fields > 100 {
			t.Errorf("an HMGET of %s read %d fields", l.Args[1], fields)
		}
	}
	if reads < 10 {
		t.Fatalf("%d HMGETs for 450 ranks and 450 users, want at least 10", reads)
	}
}
