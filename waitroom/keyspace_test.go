package waitroom

import (
	"os"
	"strings"
	"testing"

	"github.com/dibsio/dibs/keyspace"
)

// luaList is names as Lua spells them in a command's arguments: 'a', 'b'.
func luaList(names ...string) string { return "'" + strings.Join(names, "', '") + "'" }

// TestScriptsSpellKeyspaceFields checks that the room's scripts read the
// claim meta's fields under the names package keyspace gives them (the
// names the claim package writes), and that PassLua is keyspace's.
func TestScriptsSpellKeyspaceFields(t *testing.T) {
	t.Parallel()
	state := "redis.call('HMGET', KEYS[9], " + luaList(keyspace.FieldStock, keyspace.FieldVoided,
		keyspace.FieldClosed, keyspace.FieldEndsMs, keyspace.FieldRebuilding, keyspace.FieldPaused) + ")"
	if !strings.Contains(prelude, state) {
		t.Errorf("the scripts' prelude does not read %s", state)
	}
	// The join and open scripts are written inline, so their text is read
	// from the file that holds them.
	b, err := os.ReadFile("scripts.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"redis.call('HMGET', KEYS[9], " + luaList(keyspace.FieldLimit, keyspace.FieldMode) + ")",
		"redis.call('HGET', KEYS[2], " + luaList(keyspace.FieldStartsMs) + ")",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("scripts.go has no %s", want)
		}
	}
	if PassLua != keyspace.RoomPassLua {
		t.Error("PassLua is not keyspace.RoomPassLua")
	}
}
