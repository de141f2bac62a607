package claim_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/waitroom"
)

// TestClaimScriptBesideThePreviousRelease runs the previous release's claim
// scripts (testdata/claim_v4.lua and testdata/claim_room_v3.lua) and this
// release's on one Redis, as during a rolling upgrade: the same random
// sequence of claims (users, Idempotency-Keys, passes, voids, and at the
// end a fence above the rank counter) is run on three copies of a
// promotion, one claimed by the previous script alone, one by this
// release's alone and one by both in turn. Every answer, and afterwards
// every key of the promotion (its stream entries but for the times they
// carry), must be the same in all three. It runs for both layouts, per-user
// limits of 1 (this release's compact promotions take another path for
// it) and 2, with and without a waiting room.
func TestClaimScriptBesideThePreviousRelease(t *testing.T) {
	t.Parallel()
	tp := redistest.Topologies(t)[0]
	for _, room := range []bool{false, true} {
		for _, l := range []claim.Layout{claim.LayoutCompact, claim.LayoutClassic} {
			for _, limit := range []int{1, 2} {
				t.Run(fmt.Sprintf("room=%t/%s/limit=%d", room, l, limit), func(t *testing.T) {
					t.Parallel()
					besideThePreviousRelease(t, topo{Topology: tp, layout: l}, room, limit)
				})
			}
		}
	}
}

// claimCopy is one copy of the promotion of besideThePreviousRelease.
type claimCopy struct {
	fixture
	run func(n int) *rueidis.Lua // the script of the n-th claim
}

func besideThePreviousRelease(t *testing.T, tp topo, room bool, limit int) {
	prevFile, cur := "testdata/claim_v4.lua", claim.ClaimScriptSource()
	if room {
		prevFile, cur = "testdata/claim_room_v3.lua", claim.ClaimRoomScriptSource
	}
	src, err := os.ReadFile(prevFile)
	if err != nil {
		t.Fatal(err)
	}
	prev, next := rueidis.NewLuaScript(string(src)), rueidis.NewLuaScript(cur)
	copies := []claimCopy{
		{fixture: setup(t, tp), run: func(int) *rueidis.Lua { return prev }},
		{fixture: setup(t, tp), run: func(int) *rueidis.Lua { return next }},
		{fixture: setup(t, tp), run: func(n int) *rueidis.Lua { return []*rueidis.Lua{prev, next}[n%2] }},
	}
	ctx := context.Background()
	const id, users = "up", 6
	now := time.Now().Truncate(time.Millisecond)
	exp := now.Add(time.Hour).UnixMilli()
	for _, c := range copies {
		c.open(t, claim.Promotion{ID: id, Stock: 5, PerUserLimit: limit, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)})
		if room { // passes 1..users are live, pass i is user i's
			for i := 1; i <= users; i++ {
				addPass(t, c.fixture, id, strconv.Itoa(i), fmt.Sprintf("u:%d:u%d", exp, i))
			}
		}
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	const claims = 120
	answers := map[string]int{}
	for n := 0; n <= claims; n++ {
		u := 1 + r.IntN(users)
		user, idem, pass, fence := "u"+strconv.Itoa(u), "", "", "0"
		if r.IntN(3) == 0 {
			idem = "k" + strconv.Itoa(r.IntN(2))
		}
		switch r.IntN(4) {
		case 0: // none
		case 1:
			pass = strconv.Itoa(1 + r.IntN(users+1)) // maybe another's, maybe unknown
		case 2:
			pass = strconv.Itoa(u)
		default: // a new pass of the user's
			pass = strconv.Itoa(100 + n)
		}
		if n == claims { // Redis lost writes below the caller's fence
			fence = "1000"
		}
		var void int64 // a rank to void first, 0 for none
		if r.IntN(8) == 0 {
			void = 1 + int64(r.IntN(8))
		}
		var want string
		for i, c := range copies {
			if p, _ := strconv.Atoi(pass); room && p >= 100 {
				addPass(t, c.fixture, id, pass, fmt.Sprintf("u:%d:%s", exp, user))
			}
			if void > 0 {
				if _, _, err := c.gate.Void(ctx, id, void); err != nil {
					t.Fatal(err)
				}
			}
			k := c.gate.Keys(id)
			keys, args := claim.ClaimScriptKeys(c.prefix, id), []string{user, idem, id, fence}
			if room {
				keys, args = append(keys, waitroom.KeysFor(c.prefix, id).SpendKeys()...), append(args, pass)
			}
			msg, err := c.run(n).Exec(ctx, c.client, keys, args).ToMessage()
			if err != nil {
				t.Fatalf("claim %d on copy %d (%s): %v", n, i, k.Meta(), err)
			}
			got := claimAnswer(t, &msg)
			if i == 0 {
				want = got
				answers[strings.Fields(got)[0]]++
			} else if got != want {
				t.Fatalf("claim %d (%s, key %q, pass %q, fence %s): copy %d answered %q, the previous release's %q",
					n, user, idem, pass, fence, i, got, want)
			}
		}
	}
	t.Logf("answers %v", answers)
	if answers["ok"] == 0 || answers["already_claimed"] == 0 || answers["lost"] != 1 {
		t.Errorf("answers %v: want some accepted, some already claimed and one lost", answers)
	}
	want := copies[0].dump(t, id, room)
	for i, c := range copies[1:] {
		if got := c.dump(t, id, room); got != want {
			t.Errorf("copy %d holds\n%s\nthe previous release's copy\n%s", i+1, got, want)
		}
	}
}

// addPass makes pass a live pass of promotion id's waiting room, with
// value v (u:<expiry ms>:<user>), as the room's tick does, and makes the
// room exist.
func addPass(t *testing.T, f fixture, id, pass, v string) {
	t.Helper()
	rk := waitroom.KeysFor(f.prefix, id)
	for _, r := range f.client.DoMulti(context.Background(),
		f.client.B().Hsetnx().Key(rk.Meta()).Field("spent").Value("0").Build(),
		f.client.B().Hset().Key(rk.Passes()).FieldValue().FieldValue(pass, v).Build(),
		f.client.B().Zadd().Key(rk.Live()).ScoreMember().ScoreMember(0, pass).Build()) {
		if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}
}

// claimAnswer writes a claim script's reply in one form for the previous
// release's and this one's: an accepted claim without its time, an
// outcome by its name (and a refused pass's reason).
func claimAnswer(t *testing.T, msg *rueidis.RedisMessage) string {
	t.Helper()
	if s, err := msg.ToString(); err == nil {
		return s
	}
	vals, err := msg.ToArray()
	if err != nil || len(vals) == 0 {
		t.Fatalf("reply %v: %v", msg, err)
	}
	head, _ := vals[0].ToString()
	switch head {
	case "ok":
		parts := []string{head}
		for _, v := range vals[1:5] {
			n, err := v.AsInt64()
			if err != nil {
				t.Fatalf("reply %v: %v", vals, err)
			}
			parts = append(parts, strconv.FormatInt(n, 10))
		}
		return strings.Join(parts, " ")
	case "not_admitted":
		reason, _ := vals[1].ToString()
		return head + " " + reason
	}
	return head
}

// dump writes every key of promotion id but its stream entries' ids and
// times, in an order that does not depend on Redis's.
func (f fixture) dump(t *testing.T, id string, room bool) string {
	t.Helper()
	ctx := context.Background()
	k := f.gate.Keys(id)
	var b strings.Builder
	hashes := []string{k.Meta(), k.Users(), k.Status(), k.ByUser(), k.Idem()}
	if room {
		rk := waitroom.KeysFor(f.prefix, id)
		hashes = append(hashes, rk.Passes(), rk.Meta())
	}
	for _, h := range hashes {
		m, err := f.client.Do(ctx, f.client.B().Hgetall().Key(h).Build()).AsStrMap()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s: %v\n", strings.TrimPrefix(h, f.prefix), m) // fmt sorts map keys
	}
	for _, s := range []string{k.Seq(), k.StatusBytes()} {
		v, err := f.client.Do(ctx, f.client.B().Get().Key(s).Build()).ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s: %q\n", strings.TrimPrefix(s, f.prefix), v)
	}
	entries, err := f.client.Do(ctx, f.client.B().Xrange().Key(k.Stream()).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		delete(e.FieldValues, "at")
		fmt.Fprintf(&b, "entry %v\n", e.FieldValues)
	}
	if room {
		live, err := f.client.Do(ctx, f.client.B().Zrange().Key(waitroom.KeysFor(f.prefix, id).Live()).Min("0").Max("-1").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "live: %v\n", live)
	}
	return b.String()
}
