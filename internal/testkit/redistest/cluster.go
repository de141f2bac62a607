package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/redisserver"
)

// clusterSlots are the slot ranges of the three masters, as redis-cli
// --cluster create would assign them.
var clusterSlots = [][2]int64{{0, 5460}, {5461, 10922}, {10923, 16383}}

// clusterPollInterval is how often formCluster checks whether the nodes agree.
const clusterPollInterval = 50 * time.Millisecond

var cluster = sync.OnceValues(func() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	nodes, err := startClusterNodes(ctx, redisserver.Options{AppendFsync: "off", Log: logWriter()}, stopOnCleanup)
	if err != nil {
		return nil, fmt.Errorf("redistest: start cluster nodes: %w", err)
	}
	if err := formCluster(ctx, nodes); err != nil {
		return nil, fmt.Errorf("redistest: form cluster: %w", err)
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	return addrs, nil
})

// startClusterNodes starts one cluster-enabled server with options o per
// slot range, in parallel; each started one is handed to stopLater, which
// arranges its stop whatever happens next.
func startClusterNodes(ctx context.Context, o redisserver.Options, stopLater func(*redisserver.Server)) ([]*redisserver.Server, error) {
	o.Cluster = true
	nodes := make([]*redisserver.Server, len(clusterSlots))
	errs := make([]error, len(clusterSlots))
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			nodes[i], errs[i] = redisserver.Start(ctx, o)
		})
	}
	wg.Wait()
	for _, n := range nodes {
		if n != nil {
			stopLater(n)
		}
	}
	return nodes, errors.Join(errs...)
}

// formCluster gives each node its slots and a distinct config epoch, makes
// them meet, and waits until every node sees a healthy three-master Cluster.
func formCluster(ctx context.Context, nodes []*redisserver.Server) error {
	clients := make([]rueidis.Client, len(nodes))
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i, n := range nodes {
		c, err := nodeClient(n)
		if err != nil {
			return fmt.Errorf("connect %s: %w", n.Addr(), err)
		}
		clients[i] = c
	}
	for i, c := range clients {
		// Distinct epochs spare the nodes the collision resolution they
		// would otherwise go through after claiming slots at epoch 0.
		cmds := rueidis.Commands{
			c.B().ClusterSetConfigEpoch().ConfigEpoch(int64(i + 1)).Build(),
			c.B().ClusterAddslotsrange().StartSlotEndSlot().
				StartSlotEndSlot(clusterSlots[i][0], clusterSlots[i][1]).Build(),
		}
		// Meeting every earlier node, not just the first, saves gossip rounds.
		for _, peer := range nodes[:i] {
			meet, err := meetCmd(c, peer)
			if err != nil {
				return err
			}
			cmds = append(cmds, meet)
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return fmt.Errorf("set up node %s: %w", nodes[i].Addr(), err)
			}
		}
	}

	return pollCluster(ctx, func() error { return clusterReady(ctx, clients, len(nodes)) })
}

// clusterReady checks that every node reports cluster_state:ok and knows
// all masters as connected, slot-owning, non-failing nodes.
func clusterReady(ctx context.Context, clients []rueidis.Client, masters int) error {
	for _, c := range clients {
		info, err := c.Do(ctx, c.B().ClusterInfo().Build()).ToString()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return errors.New("cluster_state is not ok")
		}
		nodes, err := c.Do(ctx, c.B().ClusterNodes().Build()).ToString()
		if err != nil {
			return err
		}
		if got := healthyMasters(nodes); got != masters {
			return fmt.Errorf("a node knows %d healthy masters, want %d:\n%s", got, masters, nodes)
		}
	}
	return nil
}

// healthyMasters counts the lines of CLUSTER NODES that describe a
// connected master with slots and no failure or handshake flag.
func healthyMasters(nodes string) int {
	n := 0
	for line := range strings.Lines(nodes) {
		// id addr flags master ping pong epoch link slot...
		f := strings.Fields(line)
		if len(f) < 9 || f[7] != "connected" {
			continue
		}
		flags := strings.Split(f[2], ",")
		healthy := slices.Contains(flags, "master")
		for _, bad := range []string{"fail", "fail?", "handshake", "noaddr"} {
			healthy = healthy && !slices.Contains(flags, bad)
		}
		if healthy {
			n++
		}
	}
	return n
}

// OwnCluster is a three-master Redis Cluster started for one test alone, for
// tests that stop, kill or fail over its nodes. Every node, replicas
// included, is stopped when the test ends.
type OwnCluster struct {
	t testing.TB
	// Masters are the nodes that own the slot ranges at the start, in slot
	// order: Masters[0] serves slots 0-5460.
	Masters []*redisserver.Server
}

// FreshCluster starts and forms a three-master Cluster for this test alone,
// with persistence as o.AppendFsync says (none if empty). o.Dir is ignored:
// each node gets a temporary directory of its own.
func FreshCluster(t testing.TB, o redisserver.Options) *OwnCluster {
	t.Helper()
	if o.AppendFsync == "" {
		o.AppendFsync = "off"
	}
	if o.Log == nil {
		o.Log = logWriter()
	}
	o.Dir = ""
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	nodes, err := startClusterNodes(ctx, o, func(s *redisserver.Server) { stopWhenDone(t, s) })
	if err != nil {
		t.Fatalf("redistest: start cluster nodes: %v", err)
	}
	if err := formCluster(ctx, nodes); err != nil {
		t.Fatalf("redistest: form cluster: %v", err)
	}
	return &OwnCluster{t: t, Masters: nodes}
}

// stopWhenDone stops s when the test ends.
func stopWhenDone(t testing.TB, s *redisserver.Server) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("redistest: stop %s: %v", s.Addr(), err)
		}
	})
}

// Addrs returns the masters' addresses, the seeds to give a Cluster client.
func (c *OwnCluster) Addrs() []string {
	out := make([]string, len(c.Masters))
	for i, m := range c.Masters {
		out[i] = m.Addr()
	}
	return out
}

// MasterOf returns the master that owned slot when the Cluster was formed.
func (c *OwnCluster) MasterOf(slot int64) *redisserver.Server {
	for i, r := range clusterSlots {
		if slot >= r[0] && slot <= r[1] {
			return c.Masters[i]
		}
	}
	c.t.Fatalf("redistest: slot %d out of range", slot)
	return nil
}

// AddReplica starts a node that joins the Cluster as a replica of master,
// and returns once it has loaded master's data and every node of the
// Cluster sees it as master's replica.
func (c *OwnCluster) AddReplica(master *redisserver.Server) *redisserver.Server {
	t := c.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	r, err := redisserver.Start(ctx, redisserver.Options{AppendFsync: "off", Cluster: true, Log: logWriter()})
	if err != nil {
		t.Fatalf("redistest: start replica: %v", err)
	}
	stopWhenDone(t, r)
	if err := joinAsReplica(ctx, r, master, c.Masters); err != nil {
		t.Fatalf("redistest: replica %s of %s: %v", r.Addr(), master.Addr(), err)
	}
	return r
}

// joinAsReplica makes replica meet master, replicate it, and waits until
// the replica is in sync and every node in nodes lists it as master's
// replica.
func joinAsReplica(ctx context.Context, replica, master *redisserver.Server, nodes []*redisserver.Server) error {
	rc, err := nodeClient(replica)
	if err != nil {
		return err
	}
	defer rc.Close()
	mc, err := nodeClient(master)
	if err != nil {
		return err
	}
	defer mc.Close()
	masterID, err := mc.Do(ctx, mc.B().ClusterMyid().Build()).ToString()
	if err != nil {
		return fmt.Errorf("CLUSTER MYID: %w", err)
	}
	replicaID, err := rc.Do(ctx, rc.B().ClusterMyid().Build()).ToString()
	if err != nil {
		return fmt.Errorf("CLUSTER MYID: %w", err)
	}
	meet, err := meetCmd(rc, master)
	if err != nil {
		return err
	}
	if err := rc.Do(ctx, meet).Error(); err != nil {
		return fmt.Errorf("CLUSTER MEET: %w", err)
	}
	// CLUSTER REPLICATE needs the replica to know the master first.
	if err := pollCluster(ctx, func() error {
		return rc.Do(ctx, rc.B().ClusterReplicate().NodeId(masterID).Build()).Error()
	}); err != nil {
		return fmt.Errorf("CLUSTER REPLICATE: %w", err)
	}
	clients := make([]rueidis.Client, 0, len(nodes))
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for _, n := range nodes {
		c, err := nodeClient(n)
		if err != nil {
			return err
		}
		clients = append(clients, c)
	}
	return pollCluster(ctx, func() error {
		info, err := rc.Do(ctx, rc.B().Info().Section("replication").Build()).ToString()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") || !strings.Contains(info, "master_sync_in_progress:0") {
			return errors.New("replica not in sync yet")
		}
		for _, c := range clients {
			text, err := c.Do(ctx, c.B().ClusterNodes().Build()).ToString()
			if err != nil {
				return err
			}
			if !listsReplica(text, replicaID, masterID) {
				return fmt.Errorf("a node does not list %s as a replica of %s yet:\n%s", replicaID, masterID, text)
			}
		}
		return nil
	})
}

// meetCmd builds the CLUSTER MEET that makes c's node meet peer.
func meetCmd(c rueidis.Client, peer *redisserver.Server) (rueidis.Completed, error) {
	host, port, err := net.SplitHostPort(peer.Addr())
	if err != nil {
		return rueidis.Completed{}, err
	}
	p, err := strconv.ParseInt(port, 10, 64)
	if err != nil {
		return rueidis.Completed{}, err
	}
	return c.B().ClusterMeet().Ip(host).Port(p).ClusterBusPort(int64(peer.ClusterPort())).Build(), nil
}

// nodeClient connects to one node, not to the Cluster.
func nodeClient(s *redisserver.Server) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr()}, DisableCache: true, ForceSingleClient: true})
}

// listsReplica tells whether CLUSTER NODES output lists node id as a
// healthy replica of master.
func listsReplica(nodes, id, master string) bool {
	// Over RESP3 the text comes as a verbatim string, "txt:" first.
	for line := range strings.Lines(strings.TrimPrefix(nodes, "txt:")) {
		// id addr flags master ping pong epoch link
		f := strings.Fields(line)
		if len(f) < 8 || f[0] != id {
			continue
		}
		flags := strings.Split(f[2], ",")
		return slices.Contains(flags, "slave") && f[3] == master && f[7] == "connected" &&
			!slices.Contains(flags, "fail") && !slices.Contains(flags, "fail?")
	}
	return false
}

// pollCluster calls check every clusterPollInterval until it returns nil or
// ctx ends.
func pollCluster(ctx context.Context, check func() error) error {
	tick := time.NewTicker(clusterPollInterval)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last check: %w", ctx.Err(), err)
		case <-tick.C:
		}
	}
}
