package claim

// A claim answered with a rank the database already holds for another user
// (the window no fence sees: ranks another instance answered and Redis lost
// before they were confirmed) is made harmless here: re-ranked once the
// promotion is rebuilt, or settled. See docs/durability.md.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Rerank outcomes besides the sentinels.
var (
	// ErrNoStockToRerank means a claim whose rank was handed out twice
	// cannot be given a new one: the stock is exhausted.
	ErrNoStockToRerank = errors.New("claim: no stock left to re-rank a claim whose rank was handed out twice")
)

// Rerank gives the claim of userID (slot, accepted at acceptedAt) answered
// with oldRank a new rank, because the database holds oldRank for another
// user's claim: Redis lost writes and handed the rank out twice. fence is
// the database's highest rank: if Redis's counter is below it the
// promotion is marked rebuilding and ErrLost returned, so the new rank is
// taken only once the promotion is rebuilt (ErrRebuilding until then). The new
// rank gets a work-stream entry of its own; a second call for the same
// claim returns the same rank with fresh false. ErrNoStockToRerank means
// no unit is left for it.
func (g *Gate) Rerank(ctx context.Context, id string, oldRank int64, userID string, slot int, acceptedAt time.Time, fence int64) (rank int64, fresh bool, err error) {
	k := g.Keys(id)
	vals, err := rerankScript.Exec(ctx, g.client,
		[]string{k.Meta(), k.Seq(), k.Status(), k.ByUser(), k.Stream(), k.Reranks(), k.StatusBytes()},
		[]string{strconv.FormatInt(oldRank, 10), userID, strconv.Itoa(slot),
			strconv.FormatInt(acceptedAt.UnixMilli(), 10), id, strconv.FormatInt(fence, 10)}).ToArray()
	if err != nil {
		return 0, false, fmt.Errorf("re-rank %s rank %d: %w", id, oldRank, err)
	}
	status, err := vals[0].ToString()
	if err != nil {
		return 0, false, fmt.Errorf("re-rank %s rank %d: %w", id, oldRank, err)
	}
	switch status {
	case "ok":
	case "sold_out":
		return 0, false, ErrNoStockToRerank
	default:
		if e, ok := outcomes[status]; ok {
			return 0, false, e
		}
		return 0, false, fmt.Errorf("re-rank %s rank %d: unexpected outcome %q", id, oldRank, status)
	}
	if len(vals) < 3 {
		return 0, false, fmt.Errorf("re-rank %s rank %d: short reply", id, oldRank)
	}
	rank, err = vals[1].AsInt64()
	if err != nil {
		return 0, false, fmt.Errorf("re-rank %s rank %d: %w", id, oldRank, err)
	}
	f, _ := vals[2].AsInt64()
	return rank, f == 1, nil
}

// Collided is called when the database shows that a claim accepted at
// acceptedAt was handed a rank or slot that another claim holds: Redis lost
// writes. It returns nil if the promotion's counters were rebuilt after the
// claim was accepted, so the collision may be settled on them; otherwise it
// marks the promotion rebuilding (if no rebuild has already) and returns ErrLost or
// ErrRebuilding: settle it once the rebuild is done.
func (g *Gate) Collided(ctx context.Context, id string, acceptedAt time.Time) error {
	out, err := collisionScript.Exec(ctx, g.client, []string{g.Keys(id).Meta()},
		[]string{strconv.FormatInt(acceptedAt.UnixMilli(), 10)}).ToString()
	if err != nil {
		return fmt.Errorf("collision in %s: %w", id, err)
	}
	if out == "ok" {
		return nil
	}
	if e, ok := outcomes[out]; ok {
		return e
	}
	return fmt.Errorf("collision in %s: unexpected outcome %q", id, out)
}
