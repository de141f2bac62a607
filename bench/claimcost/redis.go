package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// redisCmd runs one command on one Redis node and prints its answer, so a
// script needs no redis-cli: `claimcost redis -addr HOST:PORT PING`.
// -wait retries until the node answers or the time is up.
func redisCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("redis", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:6379", "host:port of the node")
	wait := fs.Duration("wait", 0, "retry until the node answers, at most this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("redis needs a command")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *wait+10*time.Second)
	defer cancel()
	deadline := time.Now().Add(*wait)
	for {
		s, err := doOnce(ctx, *addr, fs.Args())
		if err == nil {
			fmt.Fprintln(stdout, s)
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// doOnce connects to addr, runs the command and formats its answer.
func doOnce(ctx context.Context, addr string, cmd []string) (string, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true,
		Dialer: net.Dialer{Timeout: 2 * time.Second}})
	if err != nil {
		return "", err
	}
	defer c.Close()
	v, err := c.Do(ctx, c.B().Arbitrary(cmd...).Build()).ToAny()
	if err != nil {
		return "", err
	}
	return format(v), nil
}

// format writes an answer as text: one element of an array per line.
func format(v any) string {
	switch v := v.(type) {
	case []any:
		lines := make([]string, len(v))
		for i, e := range v {
			lines[i] = format(e)
		}
		return strings.Join(lines, "\n")
	case map[string]any:
		var lines []string
		for k, e := range v {
			lines = append(lines, k+" "+format(e))
		}
		return strings.Join(lines, "\n")
	default:
		return fmt.Sprint(v)
	}
}

// clusterSlots splits the 16,384 slots over n masters as redis-cli
// --cluster create does: n even shares, each end rounded.
func clusterSlots(n int) [][2]int64 {
	out := make([][2]int64, n)
	per := 16384.0 / float64(n)
	first, cursor := int64(0), 0.0
	for i := range n {
		last := int64(math.Round(cursor + per - 1))
		if last > 16383 || i == n-1 {
			last = 16383
		}
		out[i] = [2]int64{first, last}
		first, cursor = last+1, cursor+per
	}
	return out
}

// clusterCmd forms a Redis Cluster of masters from nodes started with
// cluster-enabled yes and no data: `claimcost cluster -addrs A,B,C`. It
// gives each node an even share of the slots and a distinct config epoch,
// makes them meet and waits until every node says cluster_state:ok.
func clusterCmd(args []string) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	addrs := fs.String("addrs", "", "comma-separated host:port of the nodes")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for the Cluster to agree")
	if err := fs.Parse(args); err != nil {
		return err
	}
	nodes := strings.Split(*addrs, ",")
	if *addrs == "" || len(nodes) < 1 {
		return errors.New("cluster needs -addrs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *wait)
	defer cancel()
	clients := make([]rueidis.Client, len(nodes))
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	slots := clusterSlots(len(nodes))
	for i, a := range nodes {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}, DisableCache: true, ForceSingleClient: true})
		if err != nil {
			return fmt.Errorf("connect to %s: %w", a, err)
		}
		clients[i] = c
		cmds := rueidis.Commands{
			c.B().ClusterSetConfigEpoch().ConfigEpoch(int64(i + 1)).Build(),
			c.B().ClusterAddslotsrange().StartSlotEndSlot().StartSlotEndSlot(slots[i][0], slots[i][1]).Build(),
		}
		for _, peer := range nodes[:i] {
			host, port, err := net.SplitHostPort(peer)
			if err != nil {
				return err
			}
			p, _ := strconv.ParseInt(port, 10, 64)
			cmds = append(cmds, c.B().ClusterMeet().Ip(host).Port(p).Build())
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return fmt.Errorf("set up node %s: %w", a, err)
			}
		}
	}
	for {
		ok := 0
		for _, c := range clients {
			s, err := c.Do(ctx, c.B().ClusterInfo().Build()).ToString()
			if err == nil && strings.Contains(s, "cluster_state:ok") && strings.Contains(s, "cluster_known_nodes:"+strconv.Itoa(len(nodes))+"\r") {
				ok++
			}
		}
		if ok == len(clients) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the Cluster did not agree within %v", *wait)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
