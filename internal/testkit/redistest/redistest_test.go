package redistest_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestSingle(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	key := redistest.Prefix(t) + "k"
	if err := c.Do(t.Context(), c.B().Set().Key(key).Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	got, err := c.Do(t.Context(), c.B().Get().Key(key).Build()).ToString()
	if err != nil || got != "v" {
		t.Fatalf("GET = %q, %v", got, err)
	}
	if a, b := redistest.Single(t), redistest.Single(t); a != b {
		t.Errorf("Single started two servers: %s, %s", a.Addr(), b.Addr())
	}
}

// TestSharedOnce starts the shared servers from many tests at once: each
// must come up exactly once.
func TestSharedOnce(t *testing.T) {
	t.Parallel()
	const n = 8
	singles := make([]*redisserver.Server, n)
	clusters := make([][]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			singles[i] = redistest.Single(t)
			clusters[i] = redistest.Cluster(t)
		})
	}
	wg.Wait()
	for i := range n {
		if singles[i] != singles[0] || strings.Join(clusters[i], ",") != strings.Join(clusters[0], ",") {
			t.Fatalf("call %d got another server: %v %v vs %v %v", i, singles[i].Addr(), clusters[i], singles[0].Addr(), clusters[0])
		}
	}
	if len(clusters[0]) != 3 {
		t.Fatalf("Cluster = %v, want 3 nodes", clusters[0])
	}
}

// TestClusterKeyPlacement writes keys through the Cluster client and checks
// with each node that a key lives on the master that owns its slot.
func TestClusterKeyPlacement(t *testing.T) {
	t.Parallel()
	cc := redistest.ClusterClient(t)
	prefix := redistest.Prefix(t)
	owners := slotOwners(t, cc)

	nodes := map[string]rueidis.Client{}
	for _, addr := range redistest.Cluster(t) {
		nodes[addr] = redistest.Topology{Name: addr, Addrs: []string{addr}}.Client(t)
	}
	seen := map[string]bool{}
	for i := range 30 {
		key := prefix + "{p" + strconv.Itoa(i) + "}:meta"
		if err := cc.Do(t.Context(), cc.B().Set().Key(key).Value("x").Build()).Error(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		slot, err := cc.Do(t.Context(), cc.B().ClusterKeyslot().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		owner := owners[slot]
		if owner == "" {
			t.Fatalf("slot %d of %s has no owner", slot, key)
		}
		seen[owner] = true
		for addr, nc := range nodes {
			n, err := nc.Do(t.Context(), nc.B().Exists().Key(key).Build()).AsInt64()
			if addr != owner {
				// A node that does not own the slot redirects, or holds nothing.
				if err == nil && n != 0 {
					t.Errorf("%s (slot %d) also on %s, owner %s", key, slot, addr, owner)
				}
				continue
			}
			if err != nil || n != 1 {
				t.Errorf("%s (slot %d) not on its owner %s: %d, %v", key, slot, owner, n, err)
			}
		}
	}
	if len(seen) != 3 {
		t.Errorf("30 keys spread over %d masters, want 3", len(seen))
	}
}

// slotOwners maps each slot to the address of its master, from CLUSTER
// NODES of the node the client asks.
func slotOwners(t *testing.T, c rueidis.Client) map[int64]string {
	t.Helper()
	text, err := c.Do(t.Context(), c.B().ClusterNodes().Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	owners := map[int64]string{}
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		for _, r := range f[8:] {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.ParseInt(lo, 10, 64)
			b, err2 := strconv.ParseInt(hi, 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("bad slot range %q in %q", r, line)
			}
			for s := a; s <= b; s++ {
				owners[s] = addr
			}
		}
	}
	if len(owners) != 16384 {
		t.Fatalf("CLUSTER NODES covers %d slots, want 16384:\n%s", len(owners), text)
	}
	return owners
}

func TestTopologies(t *testing.T) {
	t.Parallel()
	tps := redistest.Topologies(t)
	if len(tps) != 2 || tps[0].Name != "single" || tps[1].Name != "cluster" || tps[0].Cluster || !tps[1].Cluster {
		t.Fatalf("Topologies = %+v", tps)
	}
	for _, tp := range tps {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			c := tp.Client(t)
			key := redistest.Prefix(t) + "{x}:n"
			n, err := c.Do(t.Context(), c.B().Incr().Key(key).Build()).AsInt64()
			if err != nil || n != 1 {
				t.Fatalf("INCR = %d, %v", n, err)
			}
			_, knowsSeed := c.Nodes()[tp.Addrs[0]]
			if got := len(c.Nodes()); tp.Cluster && got != 3 || !tp.Cluster && got != 1 || !knowsSeed {
				t.Errorf("client knows nodes %v", c.Nodes())
			}
		})
	}
}

func TestPrefixUnique(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	var mu sync.Mutex
	for i := range 20 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			p := redistest.Prefix(t)
			if strings.ContainsAny(p, "{} ") || !strings.HasSuffix(p, ":") {
				t.Errorf("Prefix = %q", p)
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[p] {
				t.Errorf("Prefix %q handed out twice", p)
			}
			seen[p] = true
		})
	}
}

func TestFresh(t *testing.T) {
	t.Parallel()
	s := redistest.Fresh(t, redisserver.Options{AppendFsync: "always"})
	if s.Addr() == redistest.Single(t).Addr() {
		t.Fatal("Fresh returned the shared server")
	}
	c := redistest.Topology{Name: "fresh", Addrs: []string{s.Addr()}}.Client(t)
	if err := c.Do(t.Context(), c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	c = redistest.Topology{Name: "fresh", Addrs: []string{s.Addr()}}.Client(t)
	got, err := c.Do(t.Context(), c.B().Get().Key("k").Build()).ToString()
	if err != nil || got != "v" {
		t.Fatalf("GET after crash = %q, %v", got, err)
	}
}

// TestFreshClusterReplica starts a Cluster of the test's own, gives the
// master of a key's slot a replica, and reads the key back from the replica.
func TestFreshClusterReplica(t *testing.T) {
	t.Parallel()
	c := redistest.FreshCluster(t, redisserver.Options{})
	cc := redistest.Topology{Name: "cluster", Addrs: c.Addrs(), Cluster: true}.Client(t)
	key := redistest.Prefix(t) + "{k}"
	slot, err := cc.Do(t.Context(), cc.B().ClusterKeyslot().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	master := c.MasterOf(slot)
	replica := c.AddReplica(master)
	mc := redistest.Topology{Name: "master", Addrs: []string{master.Addr()}}.Client(t)
	rc := redistest.Topology{Name: "replica", Addrs: []string{replica.Addr()}}.Client(t)
	if err := cc.Do(t.Context(), cc.B().Set().Key(key).Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if n, err := mc.Do(t.Context(), mc.B().Wait().Numreplicas(1).Timeout(10000).Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}
	res := rc.DoMulti(t.Context(), rc.B().Readonly().Build(), rc.B().Get().Key(key).Build())
	if got, err := res[1].ToString(); err != nil || got != "v" {
		t.Fatalf("GET on the replica = %q, %v", got, err)
	}
}
