package httpapi

import "github.com/dibsio/dibs/promotion"

// records are the database records beside the promotions, each as its
// handlers need it: the interfaces are declared next to them, and
// promotion.Records (the Manager's) is every one of them.
type records struct {
	tokens  tokenStore // the admin tokens issued through the API (tokens.go)
	audit   auditLog   // the audit log (audit.go)
	winners winnerRows // the issued rows in rank order (winners.go)
	claims  claimRows  // the claims the database knows, by rank (claimlookup.go)
	eraser  userEraser // the erasure of a user (users_admin.go)
}

// newRecords returns the records kept by rec.
func newRecords(rec promotion.Records) records {
	return records{tokens: rec, audit: rec, winners: rec, claims: rec, eraser: rec}
}
