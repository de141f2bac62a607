package postgres

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
)

func TestClaimLocks(t *testing.T) {
	t.Parallel()
	sorted := func(t *testing.T, locks []advisoryLock) {
		t.Helper()
		if !slices.IsSortedFunc(locks, func(a, b advisoryLock) int { return cmp.Compare(a.key, b.key) }) {
			t.Fatalf("locks not ordered by key: %v", locks)
		}
		for i := 1; i < len(locks); i++ {
			if locks[i].key == locks[i-1].key {
				t.Fatalf("key %d locked twice", locks[i].key)
			}
		}
	}

	t.Run("a few claims", func(t *testing.T) {
		t.Parallel()
		locks := claimLocks([]string{"p", "q", "p"}, []string{"p#2", "p#1", "q#1", "p#2"})
		sorted(t, locks)
		want := map[int64]bool{
			lockKey("promotion", "p"): false, lockKey("promotion", "q"): false,
			lockKey("claim", "p#1"): true, lockKey("claim", "p#2"): true, lockKey("claim", "q#1"): true,
		}
		if len(locks) != len(want) {
			t.Fatalf("%d locks, want %d: %v", len(locks), len(want), locks)
		}
		for _, l := range locks {
			if excl, ok := want[l.key]; !ok || excl != l.exclusive {
				t.Errorf("lock %d exclusive %t; want it %t (known %t)", l.key, l.exclusive, excl, ok)
			}
		}
	})
	t.Run("many claims", func(t *testing.T) {
		t.Parallel()
		claims := make([]string, maxClaimLocks+1)
		for i := range claims {
			claims[i] = fmt.Sprintf("p#%d", i)
		}
		locks := claimLocks([]string{"p"}, claims)
		if len(locks) != 1 || locks[0] != (advisoryLock{key: lockKey("promotion", "p"), exclusive: true}) {
			t.Fatalf("locks = %v, want promotion p exclusively", locks)
		}
		// The same claim repeated counts once.
		locks = claimLocks([]string{"p"}, append(claims[:maxClaimLocks:maxClaimLocks], claims[0]))
		sorted(t, locks)
		if len(locks) != maxClaimLocks+1 || !slices.ContainsFunc(locks, func(l advisoryLock) bool { return l.exclusive }) {
			t.Fatalf("%d locks for %d distinct claims, want one per claim and the promotion", len(locks), maxClaimLocks)
		}
	})
	t.Run("kinds apart", func(t *testing.T) {
		t.Parallel()
		if lockKey("claim", "x") == lockKey("promotion", "x") {
			t.Fatal("a claim and a promotion of one id share a key")
		}
		if claimLocks(nil, []string{"x"})[0].key != lockKey("claim", "x") {
			t.Fatal("claim lock under another key")
		}
	})
}
