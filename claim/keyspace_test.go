package claim

import (
	"strings"
	"testing"

	"github.com/dibsio/dibs/keyspace"
)

// luaList is names as Lua spells them in a command's arguments: 'a', 'b'.
func luaList(names ...string) string { return "'" + strings.Join(names, "', '") + "'" }

// TestScriptsSpellKeyspaceFields checks that the claim scripts read and
// write the meta fields under the names package keyspace gives them (the
// names the waiting room's scripts and the gate's Go code use), and that
// the roomed claim script carries the room pass Lua of keyspace.
func TestScriptsSpellKeyspaceFields(t *testing.T) {
	t.Parallel()
	head := "redis.call('HMGET', KEYS[1], " + luaList(keyspace.FieldStock, keyspace.FieldLimit,
		keyspace.FieldStartsMs, keyspace.FieldEndsMs, keyspace.FieldClosed, keyspace.FieldVoided,
		keyspace.FieldMode, keyspace.FieldRebuilding, keyspace.FieldPaused) + ")"
	for name, src := range map[string]string{"claim": claimScriptSource, "claim_room": claimRoomScriptSource} {
		if !strings.Contains(src, head) {
			t.Errorf("%s script does not read %s", name, head)
		}
	}
	if !strings.Contains(claimRoomScriptSource, keyspace.RoomPassLua) {
		t.Error("claim_room script does not carry keyspace.RoomPassLua")
	}
	spend := "redis.call('HINCRBY', meta, " + luaList(keyspace.FieldRoomSpent) + ", 1)"
	if !strings.Contains(keyspace.RoomPassLua, spend) {
		t.Errorf("RoomPassLua does not count spent passes as %s", spend)
	}
	open := sourceNamed(t, "-- dibs:open v3\n")
	for _, f := range []string{keyspace.FieldStock, keyspace.FieldLimit, keyspace.FieldStartsMs, keyspace.FieldEndsMs,
		keyspace.FieldClosed, keyspace.FieldMode, keyspace.FieldVoided, keyspace.FieldRebuilding, keyspace.FieldPaused} {
		if !strings.Contains(open, "'"+f+"', ") {
			t.Errorf("open script does not write field %q", f)
		}
	}
}

// sourceNamed is the source of the script whose first line is head.
func sourceNamed(t *testing.T, head string) string {
	t.Helper()
	for _, s := range scriptSources {
		if strings.HasPrefix(s, head) {
			return s
		}
	}
	t.Fatalf("no script starts with %q", head)
	return ""
}
