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
	nodes, err := startClusterNodes(ctx)
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

// startClusterNodes starts one cluster-enabled server per slot range, in
// parallel; each started one is stopped by Main whatever happens next.
func startClusterNodes(ctx context.Context) ([]*redisserver.Server, error) {
	nodes := make([]*redisserver.Server, len(clusterSlots))
	errs := make([]error, len(clusterSlots))
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			nodes[i], errs[i] = redisserver.Start(ctx, redisserver.Options{
				AppendFsync: "off",
				Cluster:     true,
				Log:         logWriter(),
			})
		})
	}
	wg.Wait()
	for _, n := range nodes {
		if n != nil {
			stopOnCleanup(n)
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
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress:       []string{n.Addr()},
			DisableCache:      true,
			ForceSingleClient: true,
		})
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
			host, port, err := net.SplitHostPort(peer.Addr())
			if err != nil {
				return err
			}
			p, err := strconv.ParseInt(port, 10, 64)
			if err != nil {
				return err
			}
			cmds = append(cmds, c.B().ClusterMeet().Ip(host).Port(p).
				ClusterBusPort(int64(peer.ClusterPort())).Build())
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return fmt.Errorf("set up node %s: %w", nodes[i].Addr(), err)
			}
		}
	}

	tick := time.NewTicker(clusterPollInterval)
	defer tick.Stop()
	for {
		err := clusterReady(ctx, clients, len(nodes))
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
