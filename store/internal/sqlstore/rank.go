package sqlstore

import "github.com/dibsio/dibs/store"

// OnePerRank drops, from claims ordered by rank, each claim whose rank the
// one before it already has, reusing claims' storage. Two dead letters can
// never share a rank (the claim id is made from it), but ClaimsByRank keeps
// one per rank whatever the data says, so paging on the last rank never
// skips or repeats one.
func OnePerRank(claims []store.KnownClaim) []store.KnownClaim {
	out := claims[:0]
	for _, c := range claims {
		if n := len(out); n > 0 && out[n-1].Rank == c.Rank {
			continue
		}
		out = append(out, c)
	}
	return out
}

// CollectMaxRanks reads rows of (promotion id, highest rank) into out.
func CollectMaxRanks(rows Rows, out map[string]int64) error {
	for rows.Next() {
		var (
			id   string
			rank int64
		)
		if err := rows.Scan(&id, &rank); err != nil {
			return err
		}
		out[id] = rank
	}
	return rows.Err()
}
