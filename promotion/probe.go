package promotion

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/keyspace"
)

// The loss probe: one marker per Redis master tells, for every idle
// promotion at once, whether Redis lost writes.
//
// An idle promotion (see recheck.go) is not re-checked every second: its
// counters are not read, so a rank counter gone back would not be seen by
// them. Instead, the loop keeps one marker key per Redis master (on a
// Cluster, a key whose slot that master serves) and, at each probe, writes
// a new random value into it with SET … GET, which returns the value
// written before. Whatever loses Redis's writes — a restart that replays
// an append-only file short of its last second, a restore of an older
// snapshot, a failover to a replica that lagged or was empty, FLUSHALL, an
// eviction — loses a suffix of its history; if that suffix reaches back
// to the previous probe, the value returned is not the one this instance
// wrote, and every promotion is re-checked in full at once. A loss that
// does not reach back to the previous probe lost only writes made after
// it, and an idle promotion got none from this instance since: a
// promotion becomes idle only once a probe ran after the re-check that
// found it so. Its claims on other instances are those instances' to
// check, and a claim here still passes its fence.
//
// One command per master per probe; while every promotion is idle, a
// probe every probeIdleEvery re-checks.

const (
	// probeIdleEvery is how many re-checks apart the probes are while no
	// promotion waits for one.
	probeIdleEvery = 10
	// probeTopologyEvery is how many probes apart the Cluster's masters
	// are read again.
	probeTopologyEvery = 60
	// probeTTL lets the marker of an instance that stopped expire.
	probeTTL = time.Hour
)

// probe is the loss probe's state, held by the loop (its goroutine alone
// uses it).
type probe struct {
	client   rueidis.Client
	prefix   string // Config.Prefix
	instance string // Config.Instance, whose markers these are
	log      *slog.Logger

	keys  []string          // one marker key per master
	last  map[string]string // the value this instance last wrote to each key
	alt   map[string]string // a value written by a probe that failed: it may have landed
	seq   uint64            // probes done (the first one included)
	since int               // re-checks since the last probe
	reads int               // probes since the masters were read
}

// probeKey is the marker key of this instance whose hash tag is tag.
func (p *probe) probeKey(tag string) string {
	return keyspace.Of(p.prefix, tag).Key(keyspace.Alive + p.instance)
}

// probeKeys returns one marker key per Redis master: on a single server
// one, on a Cluster one per master, in a slot it serves.
func (p *probe) probeKeys(ctx context.Context) ([]string, error) {
	if p.client.Mode() != rueidis.ClientModeCluster {
		return []string{p.prefix + "alive:" + p.instance}, nil
	}
	ranges, err := p.client.Do(ctx, p.client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("read the Cluster's masters: %w", err)
	}
	type span struct{ lo, hi int64 }
	byMaster := map[string][]span{}
	for _, r := range ranges {
		parts, err := r.ToArray()
		if err != nil || len(parts) < 3 {
			continue
		}
		lo, _ := parts[0].AsInt64()
		hi, _ := parts[1].AsInt64()
		node, err := parts[2].ToArray()
		if err != nil || len(node) < 2 {
			continue
		}
		host, _ := node[0].ToString()
		port, _ := node[1].AsInt64()
		addr := host + ":" + strconv.FormatInt(port, 10)
		byMaster[addr] = append(byMaster[addr], span{lo, hi})
	}
	var keys []string
	for _, spans := range byMaster {
		for n := 0; n < 1<<20; n++ {
			k := p.probeKey("alive-" + strconv.Itoa(n))
			cmd := p.client.B().Get().Key(k).Build()
			slot := int64(cmd.Slot())
			hit := false
			for _, s := range spans {
				hit = hit || slot >= s.lo && slot <= s.hi
			}
			if hit {
				keys = append(keys, k)
				break
			}
		}
	}
	return keys, nil
}

// probeDue reports whether this re-check probes: a promotion of idleAt
// (the loop's idle promotions, each with the probes done when it was found
// idle) waits for a probe to become idle, or probeIdleEvery re-checks
// passed.
func (p *probe) probeDue(idleAt map[string]uint64) bool {
	p.since++
	if p.seq == 0 || p.since >= probeIdleEvery {
		return true
	}
	for _, at := range idleAt {
		if at == p.seq {
			return true
		}
	}
	return false
}

// probeLoss writes a new value into every master's marker and reports
// whether a master returned another value than this instance wrote last:
// Redis lost writes (or the probe could not tell). The first probe of a
// key only writes.
func (p *probe) probeLoss(ctx context.Context) bool {
	p.since = 0
	if p.keys == nil || p.reads >= probeTopologyEvery {
		keys, err := p.probeKeys(ctx)
		if err != nil {
			p.log.Warn("cannot read where to probe Redis for lost writes; every promotion is re-checked", "err", err)
			return true
		}
		p.keys, p.reads = keys, 0
		if p.last == nil {
			p.last, p.alt = map[string]string{}, map[string]string{}
		}
	}
	p.reads++
	vals := make([]string, len(p.keys))
	cmds := make(rueidis.Commands, len(p.keys))
	for i, k := range p.keys {
		vals[i] = randomID(8)
		cmds[i] = p.client.B().Set().Key(k).Value(vals[i]).Get().Px(probeTTL).Build()
	}
	lost := false
	for i, res := range p.client.DoMulti(ctx, cmds...) {
		k := p.keys[i]
		prev, err := res.ToString()
		switch {
		case err != nil && !rueidis.IsRedisNil(err):
			// The value may or may not have landed: either is fine next time.
			p.alt[k] = vals[i]
			lost = true
			p.log.Debug("cannot probe Redis for lost writes; every promotion is re-checked", "key", k, "err", err)
			continue
		case p.last[k] == "":
			// The first probe of the key: nothing to compare with.
		case prev != p.last[k] && (p.alt[k] == "" || prev != p.alt[k]):
			lost = true
			p.log.Warn("Redis lost writes: the marker this instance wrote at its previous probe is gone or older; re-checking every promotion now",
				"key", k, "found", prev != "")
		}
		p.last[k], p.alt[k] = vals[i], ""
	}
	p.seq++
	return lost
}
