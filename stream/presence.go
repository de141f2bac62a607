package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Presence: the registries of all live processes announce themselves in
// one sorted set, each member scored with the Redis time until which it
// counts as live, so any of them can tell how many processes share the
// work (to size pools from a promotion's expected load, say). A process
// that dies drops out once its announcement expires.

// presenceScript announces a registry and counts the live ones, against
// Redis TIME, in one step.
//
// KEYS: the presence set. ARGV: instance, ttl in ms.
// Reply: the number of live instances, this one included.
var presenceScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
return redis.call('ZCARD', KEYS[1])
`)

// Instances announces this registry's process as live for ttl in the
// presence set key and returns how many processes are live there, this one
// included. Every process that shares the work calls it with the same key
// at intervals shorter than ttl; one that stops calling drops out ttl
// after its last call.
func (r *Registry) Instances(ctx context.Context, key string, ttl time.Duration) (int, error) {
	if key == "" {
		return 0, errors.New("stream: presence key is required")
	}
	if ttl < time.Millisecond {
		return 0, fmt.Errorf("stream: presence ttl must be at least 1ms, got %s", ttl)
	}
	n, err := presenceScript.Exec(ctx, r.client, []string{key},
		[]string{r.instance, strconv.FormatInt(ttl.Milliseconds(), 10)}).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("stream: count instances: %w", err)
	}
	return int(n), nil
}

// Leave takes this registry's process out of the presence set key at once
// (a graceful stop), rather than when its announcement expires.
func (r *Registry) Leave(ctx context.Context, key string) error {
	if err := r.client.Do(ctx, r.client.B().Zrem().Key(key).Member(r.instance).Build()).Error(); err != nil {
		return fmt.Errorf("stream: leave presence: %w", err)
	}
	return nil
}
