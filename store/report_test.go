package store_test

import (
	"testing"

	"github.com/dibsio/dibs/store"
)

func TestNearestRank(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    float64
		n    int64
		want int64
	}{{0.5, 10, 4}, {0.99, 10, 9}, {0.99, 100, 98}, {0.5, 1, 0}, {0.5, 0, 0}, {1, 7, 6}, {0.5, 3, 1}} {
		if got := store.NearestRank(c.p, c.n); got != c.want {
			t.Errorf("NearestRank(%v, %d) = %d, want %d", c.p, c.n, got, c.want)
		}
	}
}
