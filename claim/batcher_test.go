package claim_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// newBatcher returns a Batcher on f's gate, stopped at cleanup.
func newBatcher(t *testing.T, f fixture, cfg claim.BatcherConfig) *claim.Batcher {
	t.Helper()
	b, err := claim.NewBatcher(f.gate, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Stop(ctx); err != nil {
			t.Errorf("stop batcher: %v", err)
		}
	})
	return b
}

// TestBatcherUnderLoad: claims of many goroutines through one Batcher, two
// per user, never oversell, give ranks 1..stock without a gap and no user
// a second unit; every other claim is answered sold out or already
// claimed. On both topologies.
func TestBatcherUnderLoad(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		const id, stock, users = "load", 100, 150
		f.open(t, claim.Promotion{ID: id, Stock: stock})
		b := newBatcher(t, f, claim.BatcherConfig{})
		var mu sync.Mutex
		ranks := map[int64]string{}
		var wg sync.WaitGroup
		for i := range 2 * users {
			wg.Go(func() {
				user := "u" + strconv.Itoa(i%users)
				res, err := b.Claim(context.Background(), id, user, "", 0)
				switch {
				case err == nil:
					mu.Lock()
					defer mu.Unlock()
					if other, ok := ranks[res.Rank]; ok {
						t.Errorf("rank %d given to %s and %s", res.Rank, other, user)
					}
					ranks[res.Rank] = user
				case !errors.Is(err, claim.ErrSoldOut) && !errors.Is(err, claim.ErrAlreadyClaimed):
					t.Errorf("claim of %s: %v", user, err)
				}
			})
		}
		wg.Wait()
		if len(ranks) != stock {
			t.Fatalf("%d claims accepted, want %d", len(ranks), stock)
		}
		held := map[string]bool{}
		for r := int64(1); r <= stock; r++ {
			u, ok := ranks[r]
			if !ok {
				t.Fatalf("rank %d missing", r)
			}
			if held[u] {
				t.Fatalf("%s holds two units", u)
			}
			held[u] = true
		}
		st := b.Stats()
		t.Logf("stats %+v", st)
		if st.Batched+st.Alone != 2*users {
			t.Fatalf("stats %+v: want %d claims batched or alone", st, 2*users)
		}
	})
}

// pausable is a promotion on a Redis server of the test's own, whose
// writes (the claim scripts among them) the test can hold back with
// CLIENT PAUSE to see what queues up behind a call in flight.
type pausable struct {
	fixture
	admin rueidis.Client
}

func newPausable(t *testing.T, id string, stock int64) pausable {
	t.Helper()
	s := redistest.Fresh(t, redisserver.Options{})
	client := func() rueidis.Client {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr()}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	c, p := client(), redistest.Prefix(t)
	f := fixture{gate: newGate(t, c, p), client: c, prefix: p, layout: claim.LayoutCompact}
	f.open(t, claim.Promotion{ID: id, Stock: stock})
	return pausable{fixture: f, admin: client()}
}

// pause holds back every write until resume.
func (p pausable) pause(t *testing.T) {
	t.Helper()
	if err := p.admin.Do(context.Background(), p.admin.B().ClientPause().Timeout(60_000).Write().Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

func (p pausable) resume(t *testing.T) {
	t.Helper()
	if err := p.admin.Do(context.Background(), p.admin.B().ClientUnpause().Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

// answer is what one claim of a test got.
type answer struct {
	user string
	res  claim.Result
	err  error
}

// claimAsync runs b.Claim in a goroutine and sends its answer on out.
func claimAsync(ctx context.Context, wg *sync.WaitGroup, b *claim.Batcher, id, user string, out chan<- answer) {
	wg.Go(func() {
		res, err := b.Claim(ctx, id, user, "", 0)
		out <- answer{user, res, err}
	})
}

// TestBatcherSendsQueuedClaimsTogether: a claim is sent at once when no
// call of its promotion is in flight; the claims that arrive while one is
// are sent together in one call when it returns, ranked in the order they
// arrived. A queued claim whose context ends is answered its error and
// never sent.
func TestBatcherSendsQueuedClaimsTogether(t *testing.T) {
	t.Parallel()
	const id = "together"
	p := newPausable(t, id, 100)
	b := newBatcher(t, p.fixture, claim.BatcherConfig{InFlight: 1})
	out := make(chan answer, 16)
	var wg sync.WaitGroup
	defer wg.Wait()
	p.pause(t)
	claimAsync(context.Background(), &wg, b, id, "first", out)
	wait.For(t, 10*time.Second, "the first call in flight", func() bool { return b.Stats().InFlight == 1 })
	cancelled, cancel := context.WithCancel(context.Background())
	const queued = 6
	for i := range queued {
		ctx := context.Background()
		if i == 2 {
			ctx = cancelled
		}
		claimAsync(ctx, &wg, b, id, "q"+strconv.Itoa(i), out)
		wait.For(t, 10*time.Second, fmt.Sprintf("%d claims queued", i+1), func() bool { return b.Stats().Queued == int64(i+1) })
	}
	cancel()
	got := <-out
	if got.user != "q2" || !errors.Is(got.err, context.Canceled) {
		t.Fatalf("first answer %+v, want q2's context.Canceled", got)
	}
	p.resume(t)
	ranks := map[string]int64{}
	for range queued {
		a := <-out
		if a.err != nil {
			t.Fatalf("claim of %s: %v", a.user, a.err)
		}
		ranks[a.user] = a.res.Rank
	}
	want := map[string]int64{"first": 1, "q0": 2, "q1": 3, "q3": 4, "q4": 5, "q5": 6}
	if fmt.Sprint(ranks) != fmt.Sprint(want) {
		t.Fatalf("ranks %v, want %v", ranks, want)
	}
	if st := b.Stats(); st.Calls != 2 || st.Batched != 6 || st.Alone != 0 {
		t.Fatalf("stats %+v: want 2 calls of 6 claims", st)
	}
	if cs, err := p.gate.UserClaims(context.Background(), id, "q2"); err != nil || len(cs) != 0 {
		t.Fatalf("claims of q2, whose context ended while queued: %+v, %v", cs, err)
	}
}

// TestBatcherQueueFullRunsAlone: a claim that finds its promotion's queue
// full runs alone, and is accepted like the others.
func TestBatcherQueueFullRunsAlone(t *testing.T) {
	t.Parallel()
	const id = "full"
	p := newPausable(t, id, 100)
	b := newBatcher(t, p.fixture, claim.BatcherConfig{InFlight: 1, Queue: 2})
	out := make(chan answer, 8)
	var wg sync.WaitGroup
	defer wg.Wait()
	p.pause(t)
	claimAsync(context.Background(), &wg, b, id, "first", out)
	wait.For(t, 10*time.Second, "the first call in flight", func() bool { return b.Stats().InFlight == 1 })
	for i := range 2 {
		claimAsync(context.Background(), &wg, b, id, "q"+strconv.Itoa(i), out)
	}
	wait.For(t, 10*time.Second, "2 claims queued", func() bool { return b.Stats().Queued == 2 })
	claimAsync(context.Background(), &wg, b, id, "alone", out)
	wait.For(t, 10*time.Second, "a claim run alone", func() bool { return b.Stats().Alone == 1 })
	p.resume(t)
	var ranks []int
	for range 4 {
		a := <-out
		if a.err != nil {
			t.Fatalf("claim of %s: %v", a.user, a.err)
		}
		ranks = append(ranks, int(a.res.Rank))
	}
	sort.Ints(ranks)
	if fmt.Sprint(ranks) != "[1 2 3 4]" {
		t.Fatalf("ranks %v, want 1..4", ranks)
	}
}

// TestBatcherStop: Stop answers the claims queued and not yet sent
// ErrBatcherStopped (nothing taken), waits for the call in flight, whose
// claim is answered as Redis gives it, and claims after Stop run alone.
func TestBatcherStop(t *testing.T) {
	t.Parallel()
	const id = "stop"
	p := newPausable(t, id, 100)
	b := newBatcher(t, p.fixture, claim.BatcherConfig{InFlight: 1})
	out := make(chan answer, 8)
	var wg sync.WaitGroup
	defer wg.Wait()
	p.pause(t)
	claimAsync(context.Background(), &wg, b, id, "first", out)
	wait.For(t, 10*time.Second, "the first call in flight", func() bool { return b.Stats().InFlight == 1 })
	for i := range 3 {
		claimAsync(context.Background(), &wg, b, id, "q"+strconv.Itoa(i), out)
	}
	wait.For(t, 10*time.Second, "3 claims queued", func() bool { return b.Stats().Queued == 3 })
	stopped := make(chan error, 1)
	go func() { stopped <- b.Stop(context.Background()) }()
	for range 3 {
		if a := <-out; !errors.Is(a.err, claim.ErrBatcherStopped) {
			t.Fatalf("queued claim of %s at Stop: %+v, want ErrBatcherStopped", a.user, a)
		}
	}
	p.resume(t)
	if a := <-out; a.user != "first" || a.err != nil || a.res.Rank != 1 {
		t.Fatalf("claim in flight at Stop: %+v, want rank 1", a)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	res, err := b.Claim(context.Background(), id, "after", "", 0)
	if err != nil || res.Rank != 2 {
		t.Fatalf("claim after Stop: %+v, %v; want rank 2", res, err)
	}
	if st := b.Stats(); st.Alone != 1 || st.Calls != 1 {
		t.Fatalf("stats %+v: want one call and one claim alone", st)
	}
}

// TestBatcherAnswersEachClaimItsOwn: goroutines make claims one after
// another through one Batcher, some with contexts that end while the claim
// waits (cancelled by another goroutine) or before it starts, so the
// Batcher's waiters are reused beside claims it abandoned. Every accepted
// claim's answer is its user's own rank, as Redis holds it.
func TestBatcherAnswersEachClaimItsOwn(t *testing.T) {
	t.Parallel()
	f := setup(t, topo{Topology: redistest.Topologies(t)[0], layout: claim.LayoutCompact})
	const id, goroutines, each = "own", 8, 40
	f.open(t, claim.Promotion{ID: id, Stock: goroutines * each})
	b := newBatcher(t, f, claim.BatcherConfig{})
	var mu sync.Mutex
	ranks := map[string]int64{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				user := fmt.Sprintf("u%d-%d", g, i)
				ctx, cancel := context.WithCancel(context.Background())
				switch i % 3 {
				case 1:
					go cancel()
				case 2:
					cancel()
				}
				res, err := b.Claim(ctx, id, user, "", 0)
				cancel()
				switch {
				case err == nil:
					mu.Lock()
					ranks[user] = res.Rank
					mu.Unlock()
				case !errors.Is(err, context.Canceled):
					t.Errorf("claim of %s: %v", user, err)
				}
			}
		})
	}
	wg.Wait()
	if len(ranks) < goroutines*each/3 {
		t.Fatalf("%d claims accepted, want at least %d", len(ranks), goroutines*each/3)
	}
	for user, rank := range ranks {
		cs, err := f.gate.UserClaims(context.Background(), id, user)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Rank != rank {
			t.Fatalf("%s was answered rank %d; Redis holds %+v", user, rank, cs)
		}
	}
}

// TestBatcherConfig: a BatcherConfig field that cannot work is named.
func TestBatcherConfig(t *testing.T) {
	t.Parallel()
	f := fixture{gate: newGate(t, redistest.Client(t), redistest.Prefix(t))}
	for _, c := range []claim.BatcherConfig{{MaxBatch: claim.MaxBatch + 1}, {InFlight: -1}, {Queue: -1}, {CallTimeout: -time.Second}} {
		if _, err := claim.NewBatcher(f.gate, c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if _, err := claim.NewBatcher(nil, claim.BatcherConfig{}); err == nil {
		t.Error("no gate: no error")
	}
}
