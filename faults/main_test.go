package faults

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/testmain"
)

var (
	seedFlag = flag.Uint64("faults.seed", 0, "seed of every random choice (0: $FAULTS_SEED, else the clock)")
	longFlag = flag.Bool("faults.long", false, "run the long form: full-length outages and more rounds (also FAULTS_LONG=1)")
)

// Settings of the run, fixed by TestMain before any test starts.
var (
	// seed is the seed of the run; each test derives its own generator
	// from it and the test's name (see rng).
	seed uint64
	// long selects the long form of every test.
	long bool
	// dibsBin is the dibs binary the tests run.
	dibsBin string
)

func TestMain(m *testing.M) {
	flag.Parse()
	seed = *seedFlag
	if seed == 0 {
		if s := os.Getenv("FAULTS_SEED"); s != "" {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				fmt.Fprintf(os.Stderr, "faults: FAULTS_SEED=%q: %v\n", s, err)
				os.Exit(2)
			}
			seed = v
		}
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	long = *longFlag || os.Getenv("FAULTS_LONG") == "1"
	form := "short"
	if long {
		form = "long"
	}
	fmt.Printf("faults: seed %d, %s form (repeat with -faults.seed=%d or FAULTS_SEED=%d)\n", seed, form, seed, seed)

	dir, err := os.MkdirTemp("", "dibs-faults-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "faults: %v\n", err)
		os.Exit(1)
	}
	dibsBin = filepath.Join(dir, "dibs")
	if out, err := exec.Command("go", "build", "-o", dibsBin, "github.com/dibsio/dibs/cmd/dibs").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "faults: go build: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	testmain.RegisterCleanup(func() { _ = os.RemoveAll(dir) })
	testmain.RegisterCleanup(httpClient.CloseIdleConnections)
	redistest.Main(m, toxiproxyLeaks...)
}

// toxiproxyLeaks are goroutines Toxiproxy leaves behind when a proxy stops
// while a toxic still holds data it can no longer deliver; they belong to
// the proxy library, not to dibs.
var toxiproxyLeaks = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
}

// rng returns the test's random generator: the run's seed mixed with the
// test's name, so a test makes the same choices whatever runs beside it.
func rng(t *testing.T) *rand.Rand {
	t.Helper()
	h := fnv.New64a()
	_, _ = h.Write([]byte(t.Name()))
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// pick returns short in the short form and long in the long form.
func pick[T any](short, long_ T) T {
	if long {
		return long_
	}
	return short
}
