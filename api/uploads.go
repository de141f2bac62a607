package api

// GrantsUpload is the JSON body of a grant upload (POST
// /v1/promotions/{id}/grants): the targets, all or nothing.
type GrantsUpload struct {
	UserIDs []string `json:"user_ids"`
}

// GrantLine is one line of an NDJSON grant upload.
type GrantLine struct {
	UserID string `json:"user_id"`
}

// CodesUpload is the JSON body of a code upload (POST
// /v1/promotions/{id}/codes): codes for the pool, all or nothing.
type CodesUpload struct {
	Codes []string `json:"codes"`
}

// CodeLine is one line of an NDJSON code upload.
type CodeLine struct {
	Code string `json:"code"`
}

// LineError is a rejected line of an upload (1-based).
type LineError struct {
	Line   int    `json:"line"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// GrantResult is the answer of a grant upload. Errors holds at most the
// first 100 rejected lines.
type GrantResult struct {
	Enqueued   int         `json:"enqueued"`
	Duplicates int         `json:"duplicates"`
	Rejected   int         `json:"rejected"`
	Errors     []LineError `json:"errors"`
}

// CodesResult is the answer of a code upload: Total is the pool's size,
// Free the codes no claim took.
type CodesResult struct {
	Added      int64       `json:"added"`
	Duplicates int64       `json:"duplicates"`
	Total      int64       `json:"total"`
	Free       int64       `json:"free"`
	Stock      int64       `json:"stock"`
	Rejected   int         `json:"rejected"`
	Errors     []LineError `json:"errors"`
}
