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
		for i := range 6 {
			wg.Go(func() {
				switch i % 3 {
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
