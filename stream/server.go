package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// MinServerVersion is the oldest Redis version the runtime works with. It
// relies on XINFO GROUPS reporting a group's lag, new in Redis 7.0 (on an
// older server a pool reads its group as never drained), and on XPENDING's
// IDLE and exclusive ranges and XTRIM's MINID and LIMIT, new in 6.2. Valkey reports a
// Redis-compatible redis_version (7.2.4 for every Valkey release so far), so it
// passes too.
const MinServerVersion = "7.0"

const minServerMajor, minServerMinor = 7, 0

// ErrServerTooOld is returned by [CheckServer] when a node runs a Redis
// older than [MinServerVersion].
var ErrServerTooOld = errors.New("stream: Redis server too old")

// CheckServer reads the version (INFO server, redis_version) of every node
// client talks to — the one server of a standalone client, every node of a
// Cluster client — and returns an error wrapping [ErrServerTooOld], naming
// the node and its version, when any of them is older than
// [MinServerVersion]. It stops at the first node that fails the check or
// cannot be asked (unreachable, or a reply without a version), and names it.
// Call it once at start-up, before starting pools.
func CheckServer(ctx context.Context, client rueidis.Client) error {
	nodes := client.Nodes()
	if len(nodes) == 0 {
		// No node known yet (a Cluster client before its first slot
		// refresh): ask whichever node the client picks.
		info, err := client.Do(ctx, client.B().Info().Section("server").Build()).ToString()
		if err != nil {
			return fmt.Errorf("stream: INFO server: %w", err)
		}
		return checkNode("(the client's node)", info)
	}
	addrs := make([]string, 0, len(nodes))
	for addr := range nodes {
		addrs = append(addrs, addr)
	}
	slices.Sort(addrs)
	for _, addr := range addrs {
		n := nodes[addr]
		info, err := n.Do(ctx, n.B().Info().Section("server").Build()).ToString()
		if err != nil {
			return fmt.Errorf("stream: INFO server on %s: %w", addr, err)
		}
		if err := checkNode(addr, info); err != nil {
			return err
		}
	}
	return nil
}

// checkNode checks the INFO server reply of the node at addr.
func checkNode(addr, info string) error {
	v, err := serverVersion(info)
	if err != nil {
		return fmt.Errorf("stream: node %s: %w", addr, err)
	}
	ok, err := versionAtLeast(v, minServerMajor, minServerMinor)
	if err != nil {
		return fmt.Errorf("stream: node %s: %w", addr, err)
	}
	if !ok {
		return fmt.Errorf("%w: node %s runs %s, need %s or newer", ErrServerTooOld, addr, v, MinServerVersion)
	}
	return nil
}

// serverVersion returns the redis_version field of an INFO reply.
func serverVersion(info string) (string, error) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "", errors.New("INFO server has no redis_version")
}

// versionAtLeast reports whether version (major.minor[.patch…]) is at least
// major.minor.
func versionAtLeast(version string, major, minor int) (bool, error) {
	parts := strings.Split(version, ".")
	if len(parts) < 2 {
		return false, fmt.Errorf("unparsable Redis version %q", version)
	}
	maj, err1 := strconv.Atoi(parts[0])
	mnr, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || maj < 0 || mnr < 0 {
		return false, fmt.Errorf("unparsable Redis version %q", version)
	}
	if maj != major {
		return maj > major, nil
	}
	return mnr >= minor, nil
}
