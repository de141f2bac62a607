package claim

import "strconv"

// Claim identities. A claim's id is its identity everywhere — in the work
// stream, in the database's issued and dead_letters tables, in the API — and
// stream entry ids are transport only. The formats are defined here and
// nowhere else in Go; the scripts that write work-stream entries (claimScript,
// grantScript, rerankScript) build the same strings in Lua, and their
// comments point here.
//
//	<promotion>#<rank>            a first-come claim (ClaimID)
//	<promotion>@<user>            a grant (GrantID)
//	<claim id>~<user>             a dead letter of a claim whose id the database
//	                              holds for a different claim (CollisionID)
//	<promotion>!<stream entry id> a dead letter of an entry with no claim_id
//	                              (UndecodableID)
//
// Ids already stored keep their meaning: a new format gets a new separator,
// never a new reading of an old one.
const (
	claimSep       = "#"
	grantSep       = "@"
	collisionSep   = "~"
	undecodableSep = "!"
)

// ClaimID returns the identity of the first-come claim with the given rank.
func ClaimID(promotionID string, rank int64) string {
	return promotionID + claimSep + strconv.FormatInt(rank, 10)
}

// GrantID returns the identity of the grant of promotionID to userID.
func GrantID(promotionID, userID string) string {
	return promotionID + grantSep + userID
}

// CollisionID returns the id a dead letter of userID's claim is recorded
// under when the database holds claimID for a different claim (a rank
// handed out twice after Redis lost writes), so it neither overwrites nor
// vanishes into the stored one.
func CollisionID(claimID, userID string) string {
	return claimID + collisionSep + userID
}

// UndecodableID returns the id a dead letter of a work-stream entry that
// carries no claim_id is recorded under: the database needs an identity for
// it all the same.
func UndecodableID(promotionID, entryID string) string {
	return promotionID + undecodableSep + entryID
}
