package keyspace_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/keyspace"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// tagged is a client that runs every script (EVAL, EVALSHA, their _RO
// forms and FCALL) as a Redis ACL user allowed only the keys and channels
// under the hash tag of the script's first key, <prefix>{<tag>}*, and
// every other command as the default user. A script that touches a key
// outside its promotion's (or segment's) tag fails with NOPERM. The tag
// must be the promotion's id or one of its segments' (id#…): a script
// whose first key is not is reported.
type tagged struct {
	rueidis.Client // the default user's
	t              testing.TB
	addr, prefix   string
	id             string

	mu   sync.Mutex
	as   map[string]rueidis.Client // tag → its user's client
	tags map[string]bool           // tags scripts ran under
}

func newTagged(t testing.TB, id string) *tagged {
	t.Helper()
	addr := redistest.Single(t).Addr()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	tc := &tagged{Client: c, t: t, addr: addr, prefix: redistest.Prefix(t), id: id,
		as: map[string]rueidis.Client{}, tags: map[string]bool{}}
	t.Cleanup(func() {
		tc.mu.Lock()
		defer tc.mu.Unlock()
		if len(tc.tags) == 0 {
			t.Error("no script ran as a user of its hash tag")
		}
		for tag, uc := range tc.as {
			uc.Close()
			if err := c.Do(context.Background(), c.B().AclDeluser().Username(tc.user(tag)).Build()).Error(); err != nil {
				t.Error(err)
			}
		}
		c.Close()
	})
	return tc
}

// user is the ACL user name of tag.
func (c *tagged) user(tag string) string { return "ks-" + c.prefix + tag }

// client returns the client of tag's ACL user, creating the user first.
func (c *tagged) client(ctx context.Context, tag string) (rueidis.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if uc, ok := c.as[tag]; ok {
		return uc, nil
	}
	pattern := c.prefix + keyspace.HashTag(tag) + "*"
	pass := "pw-" + strconv.Itoa(len(c.as))
	rules := []string{"reset", "on", ">" + pass, "~" + pattern, "resetchannels", "&" + pattern, "+@all"}
	if err := c.Client.Do(ctx, c.Client.B().AclSetuser().Username(c.user(tag)).Rule(rules...).Build()).Error(); err != nil {
		return nil, err
	}
	uc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{c.addr}, Username: c.user(tag),
		Password: pass, DisableCache: true})
	if err != nil {
		return nil, err
	}
	c.as[tag] = uc
	return uc, nil
}

// route returns the client that runs cmd: its tag's user's for a script.
func (c *tagged) route(ctx context.Context, cmd []string) (rueidis.Client, error) {
	switch strings.ToUpper(cmd[0]) {
	case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO":
	default:
		return c.Client, nil
	}
	n, err := strconv.Atoi(cmd[2])
	if err != nil || n < 1 {
		c.t.Errorf("a script takes no key: %q", cmd[:3])
		return c.Client, nil
	}
	key := cmd[3]
	rest, ok := strings.CutPrefix(key, c.prefix+"{")
	tag, _, closed := strings.Cut(rest, "}")
	if !ok || !closed || (tag != c.id && !strings.HasPrefix(tag, c.id+"#")) {
		c.t.Errorf("a script's first key %q is not under promotion %q's hash tag", key, c.id)
		return c.Client, nil
	}
	c.mu.Lock()
	c.tags[tag] = true
	c.mu.Unlock()
	return c.client(ctx, tag)
}

// Do runs cmd, a script as its tag's user.
func (c *tagged) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	to, err := c.route(ctx, cmd.Commands())
	if err != nil {
		c.t.Error(err)
	}
	return to.Do(ctx, cmd)
}

// DoMulti runs cmds in order, each a script as its tag's user; a batch
// with MULTI runs whole as the default user (no script runs in one).
func (c *tagged) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	for _, cmd := range cmds {
		if strings.EqualFold(cmd.Commands()[0], "MULTI") {
			return c.Client.DoMulti(ctx, cmds...)
		}
	}
	res := make([]rueidis.RedisResult, len(cmds))
	for i, cmd := range cmds {
		res[i] = c.Do(ctx, cmd)
	}
	return res
}
