package edge

import (
	"testing"

	"github.com/dibsio/dibs/keyspace"
)

// TestDefaultKeyPrefixIsTheKeyspaces checks that the limiters' default
// prefix is the promotions' (keyspace.DefaultPrefix), which the edge
// restates because it imports nothing of dibs but ident: a promotion's
// buckets then share its hash tag's slot.
func TestDefaultKeyPrefixIsTheKeyspaces(t *testing.T) {
	t.Parallel()
	if DefaultKeyPrefix != keyspace.DefaultPrefix {
		t.Fatalf("DefaultKeyPrefix = %q, keyspace.DefaultPrefix = %q", DefaultKeyPrefix, keyspace.DefaultPrefix)
	}
}
