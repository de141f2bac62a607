package redistest

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/testmain"
)

// Timeouts of the helpers.
const (
	// StartTimeout bounds starting a shared server or forming the Cluster.
	StartTimeout = 60 * time.Second
	// StopTimeout bounds stopping a server before it is killed.
	StopTimeout = 10 * time.Second
)

// leakIgnores are goroutines of libraries that end by themselves shortly
// after their owner is closed, which goleak would otherwise report.
var leakIgnores = []goleak.Option{
	// A rueidis Cluster client closes connections it replaced during a
	// topology refresh after a fixed five-second delay.
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
}

// Main runs the tests through testmain.Main, which stops the shared servers
// after them and then fails the binary if goroutines leaked. opts are passed
// to goleak, for a test binary that needs to ignore some.
func Main(m *testing.M, opts ...goleak.Option) {
	testmain.Main(m, append(slices.Clone(leakIgnores), opts...)...)
}

// logWriter is where the servers' logs go: standard error with
// DIBS_REDIS_LOG=1, nowhere otherwise.
func logWriter() io.Writer {
	if os.Getenv("DIBS_REDIS_LOG") == "1" {
		return os.Stderr
	}
	return nil
}

// stopOnCleanup registers the stop of a shared server with Main.
func stopOnCleanup(s *redisserver.Server) {
	testmain.RegisterCleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "redistest: stop %s: %v\n", s.Addr(), err)
		}
	})
}

var single = sync.OnceValues(func() (*redisserver.Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	s, err := redisserver.Start(ctx, redisserver.Options{AppendFsync: "off", Log: logWriter()})
	if err != nil {
		return nil, fmt.Errorf("redistest: start single redis: %w", err)
	}
	stopOnCleanup(s)
	return s, nil
})

// Single returns the binary-wide single-node Redis, started on first use
// without persistence. Tests must not stop or kill it; use Fresh for that.
func Single(t testing.TB) *redisserver.Server {
	t.Helper()
	s, err := single()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Cluster returns the seed addresses of the binary-wide three-master Redis
// Cluster, formed on first use.
func Cluster(t testing.TB) []string {
	t.Helper()
	addrs, err := cluster()
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(addrs)
}

// Client returns a client of Single, closed when the test ends.
func Client(t testing.TB) rueidis.Client {
	t.Helper()
	return Topology{Name: "single", Addrs: []string{Single(t).Addr()}}.Client(t)
}

// ClusterClient returns a Cluster client of Cluster, closed when the test
// ends.
func ClusterClient(t testing.TB) rueidis.Client {
	t.Helper()
	return Topology{Name: "cluster", Addrs: Cluster(t), Cluster: true}.Client(t)
}

// Topology names a Redis deployment tests run against, so one suite runs on
// a single node and on a Cluster:
//
//	for _, tp := range redistest.Topologies(t) {
//		t.Run(tp.Name, func(t *testing.T) { c := tp.Client(t); … })
//	}
type Topology struct {
	// Name is "single" or "cluster", for subtest names.
	Name string
	// Addrs are the addresses to connect to (all nodes of a Cluster).
	Addrs []string
	// Cluster tells whether Addrs form a Redis Cluster.
	Cluster bool
}

// Topologies returns the single node and the Cluster, starting them if
// needed.
func Topologies(t testing.TB) []Topology {
	t.Helper()
	return []Topology{
		{Name: "single", Addrs: []string{Single(t).Addr()}},
		{Name: "cluster", Addrs: Cluster(t), Cluster: true},
	}
}

// ClientOption returns the rueidis options the helpers' clients use.
func (tp Topology) ClientOption() rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:       slices.Clone(tp.Addrs),
		DisableCache:      true,
		ForceSingleClient: !tp.Cluster,
	}
}

// Client returns a client of the topology, closed when the test ends.
func (tp Topology) Client(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(tp.ClientOption())
	if err != nil {
		t.Fatalf("redistest: connect to %s %v: %v", tp.Name, tp.Addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

var prefixSeq atomic.Uint64

// Prefix returns a key prefix unique to this test within the test binary,
// such as "t17:". It holds no hash tag, so keys built from it keep their own.
func Prefix(t testing.TB) string {
	t.Helper()
	return "t" + strconv.FormatUint(prefixSeq.Add(1), 10) + ":"
}

// Fresh starts a server for this test alone, for tests that kill, restart
// or reconfigure Redis; it is stopped when the test ends. Without o.Dir the
// data lives in a directory of the test, so it survives Stop and Restart.
func Fresh(t testing.TB, o redisserver.Options) *redisserver.Server {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Log == nil {
		o.Log = logWriter()
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	s, err := redisserver.Start(ctx, o)
	if err != nil {
		t.Fatalf("redistest: start redis: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("redistest: stop %s: %v", s.Addr(), err)
		}
	})
	return s
}
