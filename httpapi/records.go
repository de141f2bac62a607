package httpapi

import "github.com/dibsio/dibs/promotion"

// records are the database records beside the promotions that the
// Server's own handlers read, each as they need it: the interfaces are
// declared next to them, and promotion.Records (the Manager's) is every
// one of them, as it is the admin tokens' store (tokens.go) and the audit
// log (audit.go) of the Server's parts.
type records struct {
	winners winnerRows // the issued rows in rank order (winners.go)
	claims  claimRows  // the claims the database knows, by rank (claimlookup.go)
	eraser  userEraser // the erasure of a user (users_admin.go)
}

// newRecords returns the records kept by rec.
func newRecords(rec promotion.Records) records {
	return records{winners: rec, claims: rec, eraser: rec}
}
