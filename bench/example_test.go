package bench_test

import (
	"context"
	"fmt"
	"os"

	"github.com/dibsio/dibs/bench"
)

// Run the seed scenario against a running server: 1,000 stock, 2,000 users
// in 10 waves of 200, then print the report and fail on a broken invariant.
func ExampleRun() {
	rep, err := bench.Run(context.Background(), bench.Config{
		Target:     "http://127.0.0.1:8080",
		AdminToken: os.Getenv("DIBS_ADMIN_TOKEN"),
		Stock:      1000,
		Users:      2000,
		Waves:      10,
		Progress:   os.Stderr,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = rep.WriteText(os.Stdout)
	if !rep.OK() {
		os.Exit(1)
	}
}
