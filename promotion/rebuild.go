package promotion

import (
	"time"

	"github.com/dibsio/dibs/claim"
)

// Redis is fast, the database is the truth. When Redis loses writes — a
// flush, a restart without its append-only file, a crash under appendfsync
// everysec, a failover to an empty or lagging replica — a promotion's
// counters in Redis fall below what the database already holds, and claims
// admitted on them would reuse ranks and let users claim twice. The Manager
// detects that in two ways and rebuilds the counters from the database:
//
//   - opening a promotion whose meta hash is missing while the database
//     holds claims of it creates the meta hash rebuilding (see open), so not one
//     claim is admitted before the rebuild;
//   - every re-check compares the database's highest rank with Redis's rank
//     counter for every undrained promotion (one indexed query for all of
//     them and one pipelined round trip): a counter below the database's
//     rank means Redis lost its last writes (losses keep Redis's history a
//     prefix of what it was, so the counter is the first thing to fall).
//
// A rebuild marks the promotion rebuilding (claims and grants wait for it:
// they answer claim.ErrRebuilding, which the API maps to 503 unavailable
// with Retry-After), merges the database's claims page by page
// (claim.RestoreChunk per page, so memory stays bounded whatever the
// promotion's size), raises the rank counter to the database's highest rank
// and lets claims go on. Merges never lower anything, so a rebuild can run
// twice, on two instances, or over live state without harm. One rebuild holds a
// promotion at a time (a hold in Redis that expires if its process dies);
// a promotion left rebuilding by a dead process is taken over by the next
// re-check of any instance.

// DefaultRebuildHold is how long a rebuild keeps its hold on a promotion
// without progress before another instance may take it over.
const DefaultRebuildHold = claim.DefaultRebuildLease

// RebuildReport tells what one rebuild of a promotion's Redis counters did.
type RebuildReport struct {
	PromotionID string
	// Reason is why the rebuild ran.
	Reason string
	// Created is true when Redis had lost the promotion entirely.
	Created bool
	// Claims is the number of claims read from the database.
	Claims int64
	// Floor is the database's highest rank; Seq the rank counter after the
	// rebuild (at least Floor).
	Floor, Seq int64
	// Restored counts what the merge changed in Redis.
	Restored claim.RestoreStats
	// Took is how long this rebuild ran: from marking the promotion
	// rebuilding to letting its claims go on (or to the failure).
	Took time.Duration
	// Err is nil when the promotion was rebuilt and its claims go on.
	// claim.ErrRebuildBusy means another process holds the rebuild.
	Err error
}

// Reasons of a rebuild, as RebuildReport.Reason gives them.
const (
	reasonMissing = "promotion missing in Redis"
	reasonBehind  = "rank counter behind the database"
	// reasonOrphaned: found rebuilding with no rebuild running (its
	// owner died).
	reasonOrphaned  = "marked rebuilding with no rebuild running"
	reasonRequested = "requested"
	reasonFenced    = "rank counter below a rank known to be taken"
	reasonCollision = "a rank was handed out twice"
	reasonJournal   = "claims this instance answered are missing"
)
