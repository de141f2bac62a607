package startstop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// loop is a loop that returns once stopping is closed, after holding on for
// linger (to play a part whose in-flight work takes time to finish).
func loop(linger time.Duration, ran chan<- struct{}) func(<-chan struct{}) {
	return func(stopping <-chan struct{}) {
		if ran != nil {
			close(ran)
		}
		<-stopping
		time.Sleep(linger)
	}
}

func TestStartStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b Base
		ran := make(chan struct{})
		if err := b.Start(loop(0, ran)); err != nil {
			t.Fatal(err)
		}
		<-ran
		select {
		case <-b.Stopping():
			t.Fatal("Stopping closed before Stop")
		case <-b.Done():
			t.Fatal("Done closed before Stop")
		default:
		}
		if err := b.Stop(context.Background()); err != nil {
			t.Fatalf("Stop = %v", err)
		}
		<-b.Done()
		<-b.Stopping()
	})
}

func TestStartTwice(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b Base
		if err := b.Start(loop(0, nil)); err != nil {
			t.Fatal(err)
		}
		if err := b.Start(loop(0, nil)); !errors.Is(err, ErrStarted) {
			t.Fatalf("second Start = %v, want ErrStarted", err)
		}
		if err := b.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	var b Base
	if err := b.Stop(context.Background()); err != nil {
		t.Fatalf("Stop before Start = %v", err)
	}
	<-b.Done()
	<-b.Stopping()
	ran := false
	if err := b.Start(func(<-chan struct{}) { ran = true }); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop = %v, want ErrStopped", err)
	}
	if ran {
		t.Fatal("the loop ran after Stop")
	}
	if err := b.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop = %v", err)
	}
}

func TestStartAfterStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b Base
		if err := b.Start(loop(0, nil)); err != nil {
			t.Fatal(err)
		}
		if err := b.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := b.Start(loop(0, nil)); !errors.Is(err, ErrStopped) {
			t.Fatalf("Start after Stop = %v, want ErrStopped", err)
		}
	})
}

// A loop that returns by itself ends the Base: Stopping and Done close, Stop
// returns nil at once, Start is refused.
func TestLoopReturnsByItself(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b Base
		if err := b.Start(func(<-chan struct{}) { time.Sleep(time.Second) }); err != nil {
			t.Fatal(err)
		}
		<-b.Done()
		<-b.Stopping()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := b.Stop(ctx); err != nil {
			t.Fatalf("Stop after the loop returned = %v, want nil even with a done ctx", err)
		}
		if err := b.Start(loop(0, nil)); !errors.Is(err, ErrStopped) {
			t.Fatalf("Start after the loop returned = %v, want ErrStopped", err)
		}
	})
}

// Stop waits for the loop until ctx's deadline, returns ctx.Err() then, and
// the loop goes on to return in the background.
func TestStopDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b Base
		if err := b.Start(loop(time.Minute, nil)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want the deadline", err)
		}
		if d := time.Since(start); d != 10*time.Second {
			t.Fatalf("Stop returned after %s, want at its deadline (10s)", d)
		}
		select {
		case <-b.Done():
			t.Fatal("Done closed while the loop still runs")
		default:
		}
		<-b.Done()
		if d := time.Since(start); d != time.Minute {
			t.Fatalf("the loop returned after %s, want 1m", d)
		}
		if err := b.Stop(context.Background()); err != nil {
			t.Fatalf("Stop after the loop returned = %v", err)
		}
	})
}

// Every concurrent Stop waits for the same end.
func TestConcurrentStops(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b Base
		if err := b.Start(loop(time.Second, nil)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if err := b.Stop(context.Background()); err != nil {
					t.Error(err)
				}
				if d := time.Since(start); d != time.Second {
					t.Errorf("Stop returned after %s, want when the loop did (1s)", d)
				}
			})
		}
		wg.Wait()
	})
}

// Start, Stop, Stopping and Done from many goroutines at once: no race, one
// loop at most, and every caller sees the same end (run with -race).
func TestRaces(t *testing.T) {
	t.Parallel()
	for range 100 {
		var b Base
		var runs sync.WaitGroup
		var mu sync.Mutex
		loops := 0
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				switch i % 4 {
				case 3:
					_ = b.StartContext(context.Background(), func(ctx context.Context) {
						runs.Add(1)
						defer runs.Done()
						mu.Lock()
						loops++
						mu.Unlock()
						<-ctx.Done()
					})
				case 0:
					_ = b.Start(func(stopping <-chan struct{}) {
						runs.Add(1)
						defer runs.Done()
						mu.Lock()
						loops++
						mu.Unlock()
						<-stopping
					})
				case 1:
					if err := b.Stop(context.Background()); err != nil {
						t.Error(err)
					}
				default:
					<-b.Stopping()
					<-b.Done()
					_ = b.Started()
				}
			})
		}
		wg.Wait()
		<-b.Done()
		runs.Wait()
		if loops > 1 {
			t.Fatalf("%d loops ran", loops)
		}
	}
}

type ctxKey struct{}

// StartContext's loop runs on a context with the caller's values, which the
// caller's cancellation does not end and Stop does.
func TestStartContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b Base
		parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
		got := make(chan context.Context, 1)
		err := b.StartContext(parent, func(ctx context.Context) {
			got <- ctx
			<-ctx.Done()
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := <-got
		if v := ctx.Value(ctxKey{}); v != "v" {
			t.Fatalf("the loop's context lost the caller's value: %v", v)
		}
		cancelParent()
		synctest.Wait()
		if ctx.Err() != nil {
			t.Fatal("the caller's cancellation ended the loop's context")
		}
		select {
		case <-b.Done():
			t.Fatal("Done closed before Stop")
		default:
		}
		if err := b.Stop(context.Background()); err != nil {
			t.Fatalf("Stop = %v", err)
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("the loop's context after Stop: %v, want cancelled", ctx.Err())
		}
		<-b.Done()
	})
}

// A deadline on Start's ctx does not reach the loop.
func TestStartContextDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b Base
		parent, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		got := make(chan context.Context, 1)
		if err := b.StartContext(parent, func(ctx context.Context) { got <- ctx; <-ctx.Done() }); err != nil {
			t.Fatal(err)
		}
		ctx := <-got
		if _, ok := ctx.Deadline(); ok {
			t.Fatal("the loop's context has the caller's deadline")
		}
		time.Sleep(time.Minute)
		if ctx.Err() != nil {
			t.Fatalf("the loop's context ended with the caller's deadline: %v", ctx.Err())
		}
		if err := b.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// StartContext answers as Start does: ErrStarted the second time,
// ErrStopped after Stop, and the refused loop never runs.
func TestStartContextRefused(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b Base
		ctx := context.Background()
		if err := b.StartContext(ctx, func(ctx context.Context) { <-ctx.Done() }); err != nil {
			t.Fatal(err)
		}
		ran := false
		refused := func(context.Context) { ran = true }
		if err := b.StartContext(ctx, refused); !errors.Is(err, ErrStarted) {
			t.Fatalf("second StartContext = %v, want ErrStarted", err)
		}
		if err := b.Start(loop(0, nil)); !errors.Is(err, ErrStarted) {
			t.Fatalf("Start after StartContext = %v, want ErrStarted", err)
		}
		if err := b.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.StartContext(ctx, refused); !errors.Is(err, ErrStopped) {
			t.Fatalf("StartContext after Stop = %v, want ErrStopped", err)
		}
		var early Base
		if err := early.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := early.StartContext(ctx, refused); !errors.Is(err, ErrStopped) {
			t.Fatalf("StartContext after an early Stop = %v, want ErrStopped", err)
		}
		synctest.Wait()
		if ran {
			t.Fatal("a refused loop ran")
		}
	})
}

// A loop that returns by itself ends the Base and its context is
// cancelled, so the goroutines it handed the context to end too.
func TestStartContextReturnsByItself(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b Base
		got := make(chan context.Context, 1)
		if err := b.StartContext(context.Background(), func(ctx context.Context) {
			got <- ctx
			time.Sleep(time.Second)
		}); err != nil {
			t.Fatal(err)
		}
		ctx := <-got
		<-b.Done()
		<-b.Stopping()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("the loop's context after it returned: %v, want cancelled", ctx.Err())
		}
	})
}

// Stop cancels the loop's context at once, waits for the loop until its own
// deadline, and the loop, still finishing, returns in the background.
func TestStartContextStopDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b Base
		if err := b.StartContext(context.Background(), func(ctx context.Context) {
			<-ctx.Done()
			time.Sleep(time.Minute) // in-flight work, finishing
		}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want the deadline", err)
		}
		<-b.Done()
		if d := time.Since(start); d != time.Minute {
			t.Fatalf("the loop returned after %s, want 1m", d)
		}
	})
}

// Started closes with Start and stays closed; a Base stopped before Start
// never closes it.
func TestStarted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var b Base
		closed := func(c <-chan struct{}) bool {
			select {
			case <-c:
				return true
			default:
				return false
			}
		}
		if closed(b.Started()) {
			t.Fatal("Started closed before Start")
		}
		if err := b.StartContext(context.Background(), func(ctx context.Context) { <-ctx.Done() }); err != nil {
			t.Fatal(err)
		}
		if !closed(b.Started()) {
			t.Fatal("Started open after Start")
		}
		if err := b.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !closed(b.Started()) || !closed(b.Done()) {
			t.Fatal("Started or Done open after Stop")
		}
		var early Base
		if err := early.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if closed(early.Started()) {
			t.Fatal("Started closed by Stop before Start")
		}
	})
}
