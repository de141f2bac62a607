package waitroom

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

func TestKeysShareTheClaimSlot(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"", "x:"} {
		ck := claim.KeysFor(prefix, "spring-drop")
		k := KeysFor(prefix, "spring-drop")
		if k.ClaimMeta() != ck.Meta() || k.ClaimSeq() != ck.Seq() || k.ClaimByUser() != ck.ByUser() || k.ClaimUsers() != ck.Users() {
			t.Fatalf("claim keys %q %q %q %q, want %q %q %q %q", k.ClaimMeta(), k.ClaimSeq(), k.ClaimByUser(), k.ClaimUsers(),
				ck.Meta(), ck.Seq(), ck.ByUser(), ck.Users())
		}
	}
	c := redistest.ClusterClient(t)
	ctx := context.Background()
	k := KeysFor("", "spring-drop")
	want, err := c.Do(ctx, c.B().ClusterKeyslot().Key(claim.KeysFor("", "spring-drop").Meta()).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range append(k.join(), k.Lease()) {
		got, err := c.Do(ctx, c.B().ClusterKeyslot().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("slot of %s = %d, want %d (the claim meta's)", key, got, want)
		}
	}
}

func TestJoinOrder(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 1000)
		f.open(t, Settings{AdmitPerSecond: 10, OpensAt: time.Now().Add(time.Hour)})
		ctx := context.Background()
		t.Run("300 users get positions 1..300 in order", func(t *testing.T) {
			for i := 1; i <= 300; i++ {
				st, err := f.rooms.Join(ctx, f.id, "u"+strconv.Itoa(i))
				if err != nil {
					t.Fatal(err)
				}
				if st.Status != StatusWaiting || st.Place != int64(i) || st.Position != int64(i) {
					t.Fatalf("join %d: %+v", i, st)
				}
				if !st.StockExpectedToLast {
					t.Fatalf("join %d: stock of 1000 not expected to last", i)
				}
			}
		})
		t.Run("re-join keeps the place", func(t *testing.T) {
			for _, i := range []int{1, 150, 300} {
				for range 3 {
					st, err := f.rooms.Join(ctx, f.id, "u"+strconv.Itoa(i))
					if err != nil {
						t.Fatal(err)
					}
					if st.Position != int64(i) {
						t.Fatalf("re-join of u%d: position %d", i, st.Position)
					}
				}
			}
			st, err := f.rooms.Status(ctx, f.id, "u150", true)
			if err != nil || st.Position != 150 || st.Status != StatusWaiting {
				t.Fatalf("status of u150: %+v, %v", st, err)
			}
			if st.Wait.Low > st.Wait.Wait || st.Wait.Wait > st.Wait.High || st.Wait.High != 15*time.Second {
				t.Fatalf("estimate at 10/s for position 150: %+v", st.Wait)
			}
		})
		t.Run("unknown user", func(t *testing.T) {
			if _, err := f.rooms.Status(ctx, f.id, "nobody", false); !errors.Is(err, ErrNotJoined) {
				t.Fatalf("status of a stranger: %v", err)
			}
			if _, err := f.rooms.Join(ctx, "missing", "u1"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("join of a missing room: %v", err)
			}
		})
	})
}

// checkRule asserts the admission rule on a tick's answer: admitted equals
// min(⌊rate × (now − open)⌋, bound, users).
func checkRule(t *testing.T, res TickResult, rate, open, bound, users int64) {
	t.Helper()
	want := min(Allowed(rate, open, res.Now), bound, users)
	if res.Admitted != want {
		t.Errorf("at Redis time %d (%d ms after opening): admitted %d, want min(%d, %d, %d) = %d",
			res.Now, res.Now-open, res.Admitted, Allowed(rate, open, res.Now), bound, users, want)
	}
}

func TestAdmissionIsExact(t *testing.T) {
	t.Parallel()
	for _, tickers := range []int{1, 3} {
		eachTopology(t, func(t *testing.T, tp redistest.Topology) {
			t.Run(strconv.Itoa(tickers)+" tickers", func(t *testing.T) {
				f := setup(t, tp, 1000)
				const rate, target = 200, 150
				f.open(t, Settings{AdmitPerSecond: rate, OpensAt: later})
				users := f.join(t, 300)
				open := f.startAdmission(t)
				var mu sync.Mutex
				admittedBy := map[string]int64{}
				var wg sync.WaitGroup
				for range tickers {
					rooms, err := New(tp.Client(t), Config{Prefix: f.prefix, Keys: testKeys})
					if err != nil {
						t.Fatal(err)
					}
					wg.Go(func() {
						tick := time.NewTicker(3 * time.Millisecond)
						defer tick.Stop()
						last := int64(-1)
						for range tick.C {
							res, err := rooms.Tick(context.Background(), f.id)
							if err != nil {
								t.Error(err)
								return
							}
							checkRule(t, res, rate, open, 1000, int64(len(users)))
							if res.Admitted < last {
								t.Errorf("admitted fell from %d to %d", last, res.Admitted)
							}
							last = res.Admitted
							mu.Lock()
							for _, a := range res.New {
								if _, dup := admittedBy[a.Pass.User]; dup {
									t.Errorf("%s admitted twice", a.Pass.User)
								}
								admittedBy[a.Pass.User] = a.Pass.ID
							}
							mu.Unlock()
							if res.Admitted >= target || t.Failed() {
								return
							}
						}
					})
				}
				wg.Wait()
				// Admission follows the order of places: passes 1..n went to
				// u1..un.
				mu.Lock()
				defer mu.Unlock()
				n := int64(len(admittedBy))
				for i, u := range users {
					id, ok := admittedBy[u]
					if int64(i) < n && (!ok || id != int64(i+1)) {
						t.Fatalf("%s (place %d): pass %d, admitted %v; want pass %d", u, i+1, id, ok, i+1)
					}
					if int64(i) >= n && ok {
						t.Fatalf("%s (place %d) admitted beyond the %d admitted", u, i+1, n)
					}
				}
				cn, err := f.rooms.Counts(context.Background(), f.id)
				if err != nil || cn.Admitted != n || cn.Joined != 300 {
					t.Fatalf("counts %+v, %v; want %d admitted", cn, err, n)
				}
			})
		})
	}
}

func TestAdmissionStopsAtTheStock(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 40)
		ctx := context.Background()
		f.open(t, Settings{AdmitPerSecond: 1000, OpensAt: later})
		f.join(t, 50)
		open := f.startAdmission(t)
		var res TickResult
		wait.For(t, 5*time.Second, "admission to reach the stock", func() bool {
			var err error
			if res, err = f.rooms.Tick(ctx, f.id); err != nil {
				t.Fatal(err)
			}
			checkRule(t, res, 1000, open, 40, 50)
			return Allowed(1000, open, res.Now) >= 50
		})
		if res.Admitted != 40 || res.Live != 40 || res.State != "open" {
			t.Fatalf("with 50 waiting for 40 units: %+v", res)
		}
		st, err := f.rooms.Status(ctx, f.id, "u41", true)
		if err != nil || st.Status != StatusWaiting || st.Position != 1 || st.StockExpectedToLast {
			t.Fatalf("u41: %+v, %v; want waiting first, stock not expected to last", st, err)
		}
		// A void gives two units back: admission resumes for two more.
		if err := f.c.Do(ctx, f.c.B().Hincrby().Key(f.rooms.Keys(f.id).ClaimMeta()).Field("voided").Increment(2).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if res, err = f.rooms.Tick(ctx, f.id); err != nil || res.Admitted != 42 {
			t.Fatalf("after 2 units came back: %+v, %v", res, err)
		}
	})
}

// claimWith takes a unit for user after spending the user's pass, as the
// claim script will do in one step.
func (f fixture) claimWith(t *testing.T, user, token string) {
	t.Helper()
	ctx := context.Background()
	if _, err := f.rooms.Spend(ctx, f.id, user, token); err != nil {
		t.Fatalf("spend pass of %s: %v", user, err)
	}
	if _, err := f.gate.Claim(ctx, f.id, user, ""); err != nil {
		t.Fatalf("claim for %s: %v", user, err)
	}
}

func TestSoldOutAndEndedEndTheWait(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 3)
		ctx := context.Background()
		f.open(t, Settings{AdmitPerSecond: 1000, OpensAt: later})
		users := f.join(t, 10)
		f.startAdmission(t)
		f.admitUntil(t, 3)
		for _, u := range users[:3] {
			st, err := f.rooms.Status(ctx, f.id, u, true)
			if err != nil || st.Status != StatusAdmitted || st.Token == "" {
				t.Fatalf("%s: %+v, %v", u, st, err)
			}
			f.claimWith(t, u, st.Token)
		}
		for _, u := range users[3:] {
			st, err := f.rooms.Status(ctx, f.id, u, true)
			if err != nil || st.Status != StatusSoldOut {
				t.Fatalf("%s after the stock ran out: %+v, %v", u, st, err)
			}
		}
		if st, err := f.rooms.Status(ctx, f.id, users[0], false); err != nil || st.Status != StatusUsed {
			t.Fatalf("%s who claimed: %+v, %v", users[0], st, err)
		}
		if _, err := f.rooms.Join(ctx, f.id, "late"); !errors.Is(err, ErrSoldOut) {
			t.Fatalf("join after sold out: %v", err)
		}
		if res, err := f.rooms.Tick(ctx, f.id); err != nil || res.State != "sold_out" || res.Admitted != 3 {
			t.Fatalf("tick after sold out: %+v, %v", res, err)
		}
		if err := f.gate.Close(ctx, f.id); err != nil {
			t.Fatal(err)
		}
		for _, u := range users[3:] {
			if st, err := f.rooms.Status(ctx, f.id, u, true); err != nil || st.Status != StatusEnded {
				t.Fatalf("%s after the close: %+v, %v", u, st, err)
			}
		}
		if _, err := f.rooms.Join(ctx, f.id, "late"); !errors.Is(err, ErrEnded) {
			t.Fatalf("join after the close: %v", err)
		}
	})
}

func TestAbandonedHeadIsSkipped(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 100)
		ctx := context.Background()
		f.open(t, Settings{AdmitPerSecond: 1, OpensAt: later})
		users := f.join(t, 5)
		f.startAdmission(t)
		// u1 last checked in long ago: past any abandonment time.
		f.setSeen(t, users[0], 1)
		if st, err := f.rooms.Status(ctx, f.id, users[0], true); err != nil || st.Status != StatusAbandoned {
			t.Fatalf("u1 before admission reached it: %+v, %v", st, err)
		}
		res, _ := f.admitUntil(t, 1)
		if len(res.New) != 1 || res.New[0].Pass.User != "u2" || res.Skipped != 1 {
			t.Fatalf("first admission: %+v; want u2 with u1 skipped", res)
		}
		if st, err := f.rooms.Status(ctx, f.id, "u3", true); err != nil || st.Position != 1 {
			t.Fatalf("u3: %+v, %v; want position 1", st, err)
		}
		st, err := f.rooms.Join(ctx, f.id, users[0])
		if err != nil || st.Status != StatusWaiting || st.Place != 6 || st.Position != 4 {
			t.Fatalf("u1 joining again: %+v, %v; want place 6, position 4", st, err)
		}
		if cn, err := f.rooms.Counts(ctx, f.id); err != nil || cn.Abandoned != 1 || cn.Waiting != 4 {
			t.Fatalf("counts %+v, %v", cn, err)
		}
	})
}

func TestPasses(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 100)
		ctx := context.Background()
		f.open(t, Settings{AdmitPerSecond: 1000, OpensAt: later})
		users := f.join(t, 3)
		f.startAdmission(t)
		_, tokens := f.admitUntil(t, 3)
		st, err := f.rooms.Join(ctx, f.id, users[0])
		if err != nil || st.Status != StatusAdmitted || st.Token != tokens[users[0]] {
			t.Fatalf("u1 joining again once admitted: %+v, %v; want the same token", st, err)
		}
		t.Run("forged", func(t *testing.T) {
			tok := tokens[users[0]]
			for _, bad := range []string{"", "!!!", "AAAA", tok[:len(tok)-2] + "AA", "B" + tok[1:]} {
				if _, err := f.rooms.Spend(ctx, f.id, users[0], bad); !errors.Is(err, ErrForged) {
					t.Errorf("token %q: %v, want ErrForged", bad, err)
				}
			}
			other, err := NewSigner(Key{ID: "k1", Secret: []byte(strings.Repeat("z", MinSecretLen))})
			if err != nil {
				t.Fatal(err)
			}
			p, _ := f.rooms.Verify(f.id, users[0], tok)
			if _, err := f.rooms.Spend(ctx, f.id, users[0], other.Sign(p)); !errors.Is(err, ErrForged) {
				t.Errorf("token signed with another secret: %v, want ErrForged", err)
			}
		})
		t.Run("swapped", func(t *testing.T) {
			if _, err := f.rooms.Spend(ctx, f.id, users[1], tokens[users[0]]); !errors.Is(err, ErrNotYours) {
				t.Errorf("u1's token used by u2: %v, want ErrNotYours", err)
			}
			if _, err := f.rooms.Spend(ctx, "other", users[0], tokens[users[0]]); !errors.Is(err, ErrNotYours) {
				t.Errorf("u1's token in another promotion: %v, want ErrNotYours", err)
			}
		})
		t.Run("a pass spends once", func(t *testing.T) {
			var wg sync.WaitGroup
			var mu sync.Mutex
			var ok, spent int
			for range 8 {
				wg.Go(func() {
					_, err := f.rooms.Spend(ctx, f.id, users[1], tokens[users[1]])
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						ok++
					case errors.Is(err, ErrSpent):
						spent++
					default:
						t.Errorf("spend: %v", err)
					}
				})
			}
			wg.Wait()
			if ok != 1 || spent != 7 {
				t.Fatalf("8 concurrent spends: %d ok, %d spent; want 1 and 7", ok, spent)
			}
			if st, err := f.rooms.Status(ctx, f.id, users[1], false); err != nil || st.Status != StatusUsed {
				t.Fatalf("u2 after spending: %+v, %v", st, err)
			}
		})
		t.Run("expired", func(t *testing.T) {
			p, err := f.rooms.Verify(f.id, users[2], tokens[users[2]])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.rooms.Signer().Verify(f.id, users[2], tokens[users[2]], p.ExpiresAt); !errors.Is(err, ErrExpired) {
				t.Errorf("at its expiry: %v, want ErrExpired", err)
			}
			// Redis judges expiry by its own TIME: a pass whose expiry has
			// passed there is refused even if the token still verifies here.
			k := f.rooms.Keys(f.id)
			if err := f.c.Do(ctx, f.c.B().Hset().Key(k.Passes()).FieldValue().
				FieldValue(strconv.FormatInt(p.ID, 10), "u:1:"+users[2]).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			if _, err := f.rooms.Spend(ctx, f.id, users[2], tokens[users[2]]); !errors.Is(err, ErrExpired) {
				t.Errorf("expired in Redis: %v, want ErrExpired", err)
			}
		})
	})
}

func TestExpiredPassGivesItsUnitBack(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 1)
		ctx := context.Background()
		f.open(t, Settings{AdmitPerSecond: 1000, EntryTTL: 50 * time.Millisecond, OpensAt: later})
		f.join(t, 2)
		f.startAdmission(t)
		first, _ := f.admitUntil(t, 1)
		if first.Live != 1 {
			t.Fatalf("one unit, one live pass: %+v", first)
		}
		res, _ := f.admitUntil(t, 2)
		if len(res.New) != 1 || res.New[0].Pass.User != "u2" || res.Now < first.New[0].Pass.ExpiresAt.UnixMilli() {
			t.Fatalf("second admission %+v before u1's pass expired at %v", res, first.New[0].Pass.ExpiresAt)
		}
		if st, err := f.rooms.Status(ctx, f.id, "u1", false); err != nil || st.Status != StatusExpired {
			t.Fatalf("u1: %+v, %v", st, err)
		}
		if cn, err := f.rooms.Counts(ctx, f.id); err != nil || cn.PassesExpired != 1 {
			t.Fatalf("counts %+v, %v", cn, err)
		}
		st, err := f.rooms.Join(ctx, f.id, "u1")
		if err != nil || st.Status != StatusWaiting || st.Place != 3 {
			t.Fatalf("u1 joining after the pass expired: %+v, %v; want place 3", st, err)
		}
	})
}
