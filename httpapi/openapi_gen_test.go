package httpapi_test

// The Go description of the HTTP API that httpapi/openapi.json is generated
// from: go test ./httpapi -run TestOpenAPIFile -update. A route added to
// the Server gets its operation here (openapi_test.go fails until it has
// one); every problem code an operation can answer is listed with it.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
)

// J is a JSON object of the document.
type J = map[string]any

// problemCode is one row of the contract's table of problem codes.
type problemCode struct {
	statuses []int // the first is the code's status; the others where a guard answers another
	when     string
}

// tooManyRequests marks the edge's rate limit: overloaded with 429
// instead of 503.
const tooManyRequests = "overloaded@429"

// problemCodes is the contract's table: every code and its status.
var problemCodes = map[string]problemCode{
	httpapi.CodeInvalidRequest:       {[]int{400}, "malformed JSON, a missing or invalid field, a bad id; `field` names it"},
	httpapi.CodeUnauthorized:         {[]int{401}, "an admin endpoint without a known admin bearer token (a revoked one included), or a user endpoint without a valid user token when user tokens are on; carries WWW-Authenticate"},
	httpapi.CodeForbidden:            {[]int{403}, "a dashboard request that changes something without the page's Origin and CSRF token, or any request with the dashboard's cookie whose Origin is another origin"},
	httpapi.CodeNotFound:             {[]int{404}, "unknown promotion (or waiting room, user, token, endpoint)"},
	httpapi.CodeMethod:               {[]int{405}, "a method the path does not serve; carries Allow"},
	httpapi.CodeAlreadyExists:        {[]int{409}, "creating a promotion id (or admin token name) that exists"},
	httpapi.CodeAlreadyClaimed:       {[]int{409}, "the user reached the promotion's per-user limit"},
	httpapi.CodeRebuildInProgress:    {[]int{409}, "a rebuild of the promotion runs already; carries Retry-After"},
	httpapi.CodeNotEnded:             {[]int{409}, "archiving a promotion that has not ended (still scheduled or open)"},
	httpapi.CodePaused:               {[]int{409}, "a claim on a promotion an admin paused; carries Retry-After; nothing was taken"},
	httpapi.CodeStockBelowAccepted:   {[]int{409}, "a PATCH that would set stock below the claims accepted already; nothing was changed"},
	httpapi.CodeRequestInProgress:    {[]int{409}, "an admin request with this Idempotency-Key is still running, or another PATCH of the promotion is being applied; carries Retry-After"},
	httpapi.CodeNoPoolForKind:        {[]int{409}, "codes uploaded for a promotion whose kind takes no code pool (only coupon does)"},
	httpapi.CodePoolAfterStart:       {[]int{409}, "the first codes uploaded after the promotion started"},
	httpapi.CodeNotEnoughCodes:       {[]int{409}, "a PATCH that would raise the stock of a promotion with a code pool above the codes in its pool (the detail gives the pool's size); nothing was changed"},
	httpapi.CodeIdempotencyKeyReused: {[]int{422}, "an admin request reused an Idempotency-Key with another method, path or body"},
	httpapi.CodeNotStarted:           {[]int{403}, "before starts_at"},
	httpapi.CodeEnded:                {[]int{403}, "after ends_at or after the promotion was closed; a PATCH of ends_at on a drained promotion"},
	httpapi.CodeNotAdmitted:          {[]int{403}, "waiting room on and no valid entry token"},
	httpapi.CodeChallengeRequired:    {[]int{403}, "a join of a waiting room that asks for a proof of work (pow_difficulty) without a valid solution (none, forged, another user's, expired, used already, easier than the room asks now); carries a fresh challenge, difficulty and challenge_expires_at"},
	httpapi.CodeSoldOut:              {[]int{410}, "stock exhausted"},
	httpapi.CodeClaimVoided:          {[]int{410}, "a claim retried with its Idempotency-Key was accepted, then voided by an admin: it holds no unit any more"},
	httpapi.CodeTooLarge:             {[]int{413}, "body over its limit (64 KiB for JSON)"},
	httpapi.CodeOverloaded:           {[]int{503, 429}, "429: this user or client is over its rate limit; 503: the instance sheds load. Carries Retry-After; nothing was accepted"},
	httpapi.CodeUnavailable:          {[]int{503}, "Redis or the database unreachable; carries Retry-After. If Redis timed out mid-call the outcome is unknown: retry with the same Idempotency-Key"},
}

// retried are the codes whose answers carry Retry-After.
var retried = []string{httpapi.CodeOverloaded, httpapi.CodeUnavailable, httpapi.CodePaused,
	httpapi.CodeRequestInProgress, httpapi.CodeRebuildInProgress}

func ref(kind, name string) J { return J{"$ref": "#/components/" + kind + "/" + name} }
func schema(name string) J    { return ref("schemas", name) }
func param(name string) J     { return ref("parameters", name) }
func header(name string) J    { return ref("headers", name) }

func str(desc string) J { return J{"type": "string", "description": desc} }
func integer(desc string, bounds ...int64) J {
	s := J{"type": "integer", "description": desc}
	if len(bounds) == 2 {
		s["minimum"], s["maximum"] = bounds[0], bounds[1]
	}
	return s
}
func boolean(desc string) J { return J{"type": "boolean", "description": desc} }
func number(desc string) J  { return J{"type": "number", "description": desc} }
func timeStr(desc string) J { return J{"type": "string", "format": "date-time", "description": desc} }
func enum(desc string, vals ...string) J {
	return J{"type": "string", "enum": vals, "description": desc}
}
func array(items J, desc string) J { return J{"type": "array", "items": items, "description": desc} }

// orNull lets s be null as well.
func orNull(s J) J {
	out := J{}
	for k, v := range s {
		out[k] = v
	}
	out["type"] = []string{s["type"].(string), "null"}
	return out
}

// object is an answer's object: required names the members always there.
func object(desc string, required []string, props J) J {
	o := J{"type": "object", "description": desc, "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

// input is a request body's object: unknown members get 400.
func input(desc string, required []string, props J) J {
	o := object(desc, required, props)
	o["additionalProperties"] = false
	return o
}

func idSchema(desc string) J {
	return J{"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$", "description": desc}
}

func nextCursor() J {
	return orNull(str("the cursor of the next page; null on the last"))
}

// roomMessage is the schema of a waiting room's message to the line.
func roomMessage() J {
	return J{"type": "string", "maxLength": 280, "description": "a message shown to everyone in line: one line of plain text, at most 280 characters, no control characters (\"\" for none)"}
}

// queuePage is the setting of a waiting room's queue page (GET /w/{id}).
func queuePage() J {
	color := func(desc string) J {
		return J{"type": "string", "pattern": "^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$", "description": desc + ": #rgb or #rrggbb"}
	}
	texts := J{}
	for _, name := range slices.Sorted(maps.Keys(promotion.PageTexts)) {
		texts[name] = J{"type": "string", "maxLength": promotion.MaxPageText, "description": "default: " + promotion.PageTexts[name]}
	}
	return inputOf[api.QueuePage]("the queue page's setting (GET /w/{id}); only with the waiting room enabled; every member optional", nil, J{
		"title":  J{"type": "string", "maxLength": promotion.MaxPageTitle, "description": "the page's title and heading (default the promotion's name)"},
		"colors": inputOf[api.QueuePageColors]("the page's colours", nil, J{"background": color("the background"), "text": color("the text"), "accent": color("the accent")}),
		"logo_url": J{"type": "string", "format": "uri", "maxLength": promotion.MaxPageURLLength,
			"description": "an https URL of an image shown above the title"},
		"texts": input("the page's texts, replacing the defaults by name (text only, never HTML)", nil, texts),
		"return_url": J{"type": "string", "format": "uri", "maxLength": promotion.MaxPageURLLength,
			"description": "the shop's page: https, or http on localhost; no fragment. Mode return sends the admitted user there with #entry_token=…&expires_at=…&promotion=…; mode claim links back to it"},
		"mode": enum("what the page does once the user is admitted: claim at once and show the result (default), or return to return_url with the entry token",
			promotion.PageModeClaim, promotion.PageModeReturn),
	})
}

func schemas() J {
	waitingRoomIn := inputOf[api.WaitingRoomSettings]("the waiting room of a first_come promotion", nil, J{
		"enabled":               boolean("claims need an entry token (default false)"),
		"admit_per_second":      integer("users let in per second (default 100)", 1, 1_000_000),
		"entry_ttl_seconds":     integer("how long an entry token is valid (default 300)", 1, 86_400),
		"abandon_after_seconds": integer("a waiting user who neither joins again nor asks for the status this long loses the place (default 120)", 10, 3_600),
		"prequeue_seconds":      integer("opens the room this long before starts_at and shuffles everyone who joined until the start once, at the start (default 0 = off; only with enabled)", 0, 86_400),
		"max_active":            integer("the most passes live at once, whatever the rate (default 0 = no cap; only with enabled)", 0, 1_000_000_000),
		"message":               roomMessage(),
		"pow_difficulty":        integer("a proof of work each join must bring: leading zero bits of SHA-256 (default 0 = off; only with enabled)", 0, 24),
		"page":                  schema("QueuePage"),
	})
	roomPatch := inputOf[api.WaitingRoomPatch]("a change of the waiting room's levers and its queue page's setting while its line runs (promotions with a waiting room only; a member left out is kept)", nil, J{
		"admit_per_second": integer("the new rate; admission stays exact across the change: what the old rate allowed until it plus what the new one allows since", 1, 1_000_000),
		"max_active":       integer("the most passes live at once (0 lifts the cap)", 0, 1_000_000_000),
		"message":          roomMessage(),
		"pow_difficulty":   integer("leading zero bits of SHA-256 each join's proof of work must have (0 turns it off)", 0, 24),
		"page": J{"description": "replaces the queue page's setting as a whole, checked as at creation; null resets it to the page's defaults",
			"oneOf": []J{schema("QueuePage"), {"type": "null"}}},
	})
	return J{
		"Problem": shapeOf[httpapi.Problem]("an RFC 9457 problem document; clients switch on code", J{
			"type":     str("always about:blank"),
			"title":    str("the code's title"),
			"status":   integer("the HTTP status, fixed per code (overloaded: 429 or 503)"),
			"code":     enum("the problem's code (see x-problem-codes at the root of the document)", slices.Sorted(maps.Keys(problemCodes))...),
			"detail":   str("what went wrong, for people"),
			"instance": str("the request's path"),
			"field":    str("the request field at fault (invalid_request, stock_below_accepted, ended)"),
			"request_id": str("the request's id, as in its X-Request-Id answer header and its log lines (request_id); " +
				"a replayed answer (Idempotent-Replayed) is the first one, with the first request's id"),
			"challenge": str("challenge_required: a fresh proof-of-work challenge; find a nonce such that SHA-256(challenge + \":\" + nonce) " +
				"starts with difficulty zero bits and join again with both"),
			"difficulty":           integer("challenge_required: the leading zero bits the solution's hash must have", 1, 24),
			"challenge_expires_at": timeStr("challenge_required: when the challenge stops being accepted"),
		}),
		"RoomPatch": roomPatch,
		"JoinRequest": inputOf[api.JoinRequest]("the user joining; with user tokens on user_id may be left out (the token's user)", nil, J{
			"user_id":   idSchema("the user"),
			"challenge": str("with a proof of work: the challenge of a challenge_required answer, as it was"),
			"nonce":     J{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$", "description": "with a proof of work: the solution of challenge"},
		}),
		"WaitingRoomIn": waitingRoomIn,
		"QueuePage":     queuePage(),
		"PromotionCreate": inputOf[api.NewPromotion]("a new promotion", nil, J{
			"id":                         idSchema("generated if absent"),
			"name":                       str("shown to people"),
			"mode":                       enum("first_come (users race for stock, default) or grant (an admin uploads the targets)", "first_come", "grant"),
			"kind":                       enum("what is issued (default coupon); value is its amount", "coupon", "voucher", "point", "webhook"),
			"stock":                      integer("units to hand out (grant: the expected target count, may be omitted)", 1, 1_000_000_000),
			"per_user_limit":             integer("claims one user may hold (default 1)", 1, 1_000),
			"starts_at":                  timeStr("default now"),
			"ends_at":                    timeStr("default starts_at + 24 h; after starts_at"),
			"value":                      integer("the amount of what is issued"),
			"waiting_room":               schema("WaitingRoomIn"),
			"revoke_returns_stock":       boolean("a revoked claim's unit goes back to stock (default false; not for grant)"),
			"expected_claims_per_second": integer("the claim rate expected at the peak (0 = not stated); sizes the confirmation pools", 0, 10_000_000),
			"allow_past_ends_at":         boolean("create a promotion whose ends_at has passed (back-filling; it is created ended)"),
			"webhook_url":                J{"type": "string", "format": "uri", "maxLength": 2048, "description": "kind webhook only, required there: each claim is posted to it"},
			"segments":                   integer("first_come only, default 1: the stock split over this many hash slots (Cluster masters); not with a waiting room", 1, 64),
		}),
		"PromotionPatch": inputOf[api.PromotionPatch]("a change of a running promotion; a member left out is kept", nil, J{
			"name":                 str("the new name"),
			"stock":                integer("never below the claims accepted (409 stock_below_accepted)", 1, 1_000_000_000),
			"ends_at":              timeStr("after starts_at: later reopens a promotion that ended by its end, earlier ends it"),
			"paused":               boolean("true: every claim answers 409 paused until false"),
			"revoke_returns_stock": boolean("a revoked claim's unit goes back to stock"),
			"waiting_room":         schema("RoomPatch"),
		}),
		"Counts": shapeOf[api.Counts]("the promotion's claims", J{
			"accepted":  integer("claims admitted in Redis (grant: targets enqueued)"),
			"pending":   integer("accepted − issued − failed"),
			"issued":    integer("rows confirmed in the database and not revoked"),
			"revoked":   integer("issued claims an admin revoked"),
			"failed":    integer("claims dead-lettered"),
			"remaining": orNull(integer("stock − accepted; null for grant promotions")),
		}),
		"WaitingRoom": shapeOf[api.RoomView]("the promotion's waiting room and its counts", J{
			"enabled":               boolean("claims need an entry token"),
			"admit_per_second":      integer("with a room: users let in per second"),
			"entry_ttl_seconds":     integer("with a room: how long an entry token is valid"),
			"abandon_after_seconds": integer("with a room: silence after which a waiting user loses the place"),
			"prequeue_seconds":      integer("with a prequeue: how long before starts_at the room opens"),
			"prequeue_seed_sha256":  str("with a prequeue: hex SHA-256 of the shuffle's seed, fixed at creation"),
			"prequeue_seed":         str("with a prequeue, from starts_at on or once closed: the seed (hex)"),
			"max_active":            integer("with a cap: the most passes live at once"),
			"message":               str("with a message: the message shown to everyone in line"),
			"pow_difficulty":        integer("with a proof of work: the leading zero bits each join's solution must have"),
			"page":                  schema("QueuePage"),
			"waiting":               integer("places in line not yet reached by admission"),
			"admitted":              integer("passes handed out"),
			"passes_spent":          integer("passes spent by claims"),
			"abandoned":             integer("places skipped because their user stopped checking in"),
		}),
		"Promotion": shapeOf[api.Promotion]("a promotion", J{
			"id":                         idSchema("the promotion's id"),
			"name":                       str("shown to people"),
			"mode":                       enum("how units are handed out", "first_come", "grant"),
			"kind":                       enum("what is issued", "coupon", "voucher", "point", "webhook"),
			"stock":                      integer("units to hand out"),
			"per_user_limit":             integer("claims one user may hold"),
			"value":                      integer("the amount of what is issued"),
			"state":                      enum("where it is in its life (a closed or retired promotion is ended)", "scheduled", "open", "sold_out", "ended"),
			"starts_at":                  timeStr("when claims open"),
			"ends_at":                    timeStr("when claims close"),
			"closed_at":                  orNull(timeStr("when an admin closed it")),
			"created_at":                 timeStr("when it was created"),
			"archived_at":                orNull(timeStr("when it was archived")),
			"paused":                     boolean("an admin paused its claims"),
			"revoke_returns_stock":       boolean("a revoked claim's unit goes back to stock"),
			"counts":                     schema("Counts"),
			"waiting_room":               schema("WaitingRoom"),
			"webhook_url":                str("kind webhook: where each claim is posted; shown to admin callers only (an admin bearer token or the dashboard's session)"),
			"retired_at":                 orNull(timeStr("when its Redis state was retired (the database answers for it)")),
			"expected_claims_per_second": integer("the claim rate expected at the peak (0 = not stated)"),
			"segments":                   integer("the hash slots its stock is split over (1: one)"),
		}),
		"PromotionList": pageOf[api.PromotionPage]("a page of promotions", "promotions", "Promotion", "the page"),
		"UserRef": inputOf[api.UserRef]("the user acting; with user tokens on it may be left out (the token's user)", nil, J{
			"user_id": idSchema("the user"),
		}),
		"ClaimAccepted": shapeOf[api.Claimed]("an accepted claim", J{
			"status":   enum("always pending: confirmation follows asynchronously", "pending"),
			"claim_id": str("the claim's id"),
			"rank":     integer("the place among stock, in order of arrival"),
		}),
		"UserClaim": shapeOf[api.UserClaim]("one claim of the user; what it received appears once issued", J{
			"claim_id":   str("the claim's id"),
			"rank":       integer("the place among stock (grant: the order of enqueueing)"),
			"status":     enum("the claim's status", "pending", "issued", "failed", "voided", "revoked"),
			"issued_at":  orNull(timeStr("when it was issued")),
			"code":       str("coupon, voucher: the code (not for a revoked claim)"),
			"value":      integer("coupon, voucher: the value; point: the points credited"),
			"expires_at": timeStr("voucher: when it expires"),
		}),
		"UserClaims": shapeOf[api.UserClaims]("a user's claims on a promotion", J{
			"status": enum("the user's overall status", "none", "pending", "issued", "failed", "revoked"),
			"claims": array(schema("UserClaim"), "the user's claims"),
		}),
		"Standing": shapeOf[api.QueueStanding]("a user's standing in a waiting room (members absent where they do not apply)", J{
			"status":                       enum("the user's status", "waiting", "prequeue", "admitted", "used", "expired", "abandoned", "sold_out", "ended"),
			"position":                     integer("waiting: the live place in line, 1 = next"),
			"estimated_wait_seconds":       number("waiting: the estimated wait"),
			"estimated_wait_range_seconds": J{"type": "array", "items": J{"type": "number"}, "minItems": 2, "maxItems": 2, "description": "waiting: [low, high] of the estimate"},
			"stock_expected_to_last":       boolean("waiting: whether the units left cover everyone up to this user"),
			"poll_after_ms":                integer("waiting, prequeue: when to ask again", 1_000, 30_000),
			"entry_token":                  str("admitted: claim with it in X-Entry-Token"),
			"expires_at":                   timeStr("admitted: when the entry token expires"),
			"shuffle_at":                   timeStr("prequeue: when the places are dealt (starts_at)"),
			"paused":                       boolean("waiting, prequeue, admitted: an admin paused the promotion's claims, or it is rebuilding; nobody is let in and no claim is taken until it resumes, and the estimated wait counts from the resume"),
			"message":                      str("the room's message to everyone in line, when it has one"),
		}),
		"Prequeue": shapeOf[api.PrequeuePage]("the audit record of the opening moment's shuffle", J{
			"promotion_id": str("the promotion"),
			"seed":         str("the shuffle's seed (hex)"),
			"seed_sha256":  str("hex SHA-256 of the seed, shown since creation"),
			"total":        integer("users the prequeue collected"),
			"users":        array(str("a user id"), "a page of the users in the order the shuffle gave them places"),
			"next_cursor":  nextCursor(),
		}),
		"Rebuild": shapeOf[api.Rebuild]("what a rebuild did", J{
			"promotion_id":      str("the promotion"),
			"claims":            integer("claims merged from the database"),
			"database_max_rank": integer("the highest rank the database holds"),
			"seq":               integer("the claim sequence after the rebuild"),
			"requeued":          integer("claims put back into the pipeline"),
			"took_ms":           integer("how long it took"),
		}),
		"GrantsUpload": inputOf[api.GrantsUpload]("targets of a grant promotion (all or nothing)", []string{"user_ids"}, J{
			"user_ids": J{"type": "array", "items": idSchema("a user"), "minItems": 1, "maxItems": httpapi.MaxGrantIDs, "description": "the targets"},
		}),
		"GrantLine": inputOf[api.GrantLine]("one line of an NDJSON grant upload", []string{"user_id"}, J{"user_id": idSchema("a target")}),
		"LineError": shapeOf[api.LineError]("a rejected line of an upload", J{
			"line":   integer("1-based line number"),
			"code":   str("the problem code of the line"),
			"detail": str("what is wrong with it"),
		}),
		"GrantsResult": shapeOf[api.GrantResult]("what a grant upload did", J{
			"enqueued":   integer("targets enqueued"),
			"duplicates": integer("targets granted already (never issued twice)"),
			"rejected":   integer("lines rejected"),
			"errors":     J{"type": "array", "items": schema("LineError"), "maxItems": 100, "description": "the first rejected lines"},
		}),
		"CodesUpload": inputOf[api.CodesUpload]("codes for the promotion's pool (all or nothing)", []string{"codes"}, J{
			"codes": J{"type": "array", "items": J{"type": "string", "minLength": 1, "maxLength": 64}, "minItems": 1, "maxItems": httpapi.MaxUploadCodes,
				"description": "codes of 1–64 bytes of printable UTF-8 without spaces"},
		}),
		"CodeLine": inputOf[api.CodeLine]("one line of an NDJSON code upload", []string{"code"}, J{"code": J{"type": "string", "minLength": 1, "maxLength": 64, "description": "a code"}}),
		"CodesResult": shapeOf[api.CodesResult]("what a code upload did", J{
			"added":      integer("codes added to the pool"),
			"duplicates": integer("codes the pool held already, or given twice"),
			"total":      integer("the pool's size"),
			"free":       integer("codes no claim took"),
			"stock":      integer("the promotion's stock; it accepts at most min(stock, total) claims"),
			"rejected":   integer("lines rejected"),
			"errors":     J{"type": "array", "items": schema("LineError"), "maxItems": 100, "description": "the first rejected lines"},
		}),
		"DeadLetter": shapeOf[api.DeadLetter]("a dead-lettered claim", J{
			"claim_id":   str("the claim"),
			"user_id":    str("its user"),
			"reason":     str("why it failed"),
			"deliveries": integer("how often it was tried"),
			"at":         timeStr("when it was dead-lettered"),
		}),
		"DeadLetterList": pageOf[api.DeadLetterPage]("a page of dead letters", "dead_letters", "DeadLetter", "the page"),
		"ReplayRequest": inputOf[api.ReplayRequest](`either "claim_ids" (non-empty) or "all": true`, nil, J{
			"claim_ids": J{"type": "array", "items": J{"type": "string", "minLength": 1, "maxLength": 200}, "maxItems": 1000, "description": "the claims to replay"},
			"all":       boolean("replay every dead letter of the promotion"),
		}),
		"Replayed": shapeOf[api.Replayed]("claims put back into the pipeline", J{"replayed": integer("how many")}),
		"ClaimIDs": inputOf[api.ClaimIDs]("claims, all or nothing on validation", []string{"claim_ids"}, J{
			"claim_ids": J{"type": "array", "items": J{"type": "string", "minLength": 1, "maxLength": 200}, "minItems": 1, "maxItems": 1000, "description": "the claims"},
		}),
		"Voided": shapeOf[api.Voided]("dead letters given up, their units back in stock", J{"voided": integer("how many")}),
		"Revoked": shapeOf[api.Revoked]("what a revoke did", J{
			"revoked": integer("claims revoked now"),
			"skipped": array(str("a claim id"), "ids not revoked now (unknown, not issued, another promotion's, or revoked already)"),
			"pending": array(str("a claim id"), "revoked claims whose issuer's undo is still being retried"),
			"refused": J{"type": "array", "items": schema("RefusedUndo"), "description": "revoked claims whose issuer's undo was refused for good (a webhook's 4xx other than 404 and 409): they stay revoked, the undo is not tried again"},
		}),
		"RefusedUndo": shapeOf[api.RefusedUndo]("a revoked claim whose issuer's undo was refused", J{
			"claim_id": str("the claim id"),
			"reason":   str("the refusal: the webhook's URL, status and the start of its answer"),
		}),
		"Winner": shapeOf[api.Winner]("an issued claim", J{
			"rank":        integer("its place"),
			"claim_id":    str("the claim"),
			"user_id":     str("its user"),
			"slot":        integer("the stream slot it went through"),
			"accepted_at": timeStr("when it was accepted"),
			"issued_at":   timeStr("when it was issued"),
			"code":        str("its code, for kinds that hand one out"),
		}),
		"WinnerList": pageOf[api.WinnerPage]("a page of winners, in rank order", "claims", "Winner", "the page"),
		"Event": shapeOf[api.Event]("a change, from the outbox", J{
			"id":           str("the same every time the same change is reported: deduplicate on it"),
			"seq":          integer("orders the feed"),
			"type":         enum("what changed", store.EventTypes...),
			"at":           timeStr("when"),
			"promotion_id": str("the promotion"),
			"claim_id":     orNull(str("the claim; null for promotion events")),
			"data":         J{"type": "object", "description": "the change's data (see docs/contract.md, Events)"},
		}),
		"EventList": shapeOf[api.EventPage]("a page of the feed", J{
			"events":      array(schema("Event"), "the page, in seq order"),
			"next_cursor": str("never null: a page with no events returns the cursor it was given"),
		}),
		"AuditEntry": shapeOf[api.AuditEntry]("one admin request that changed something", J{
			"id":    integer("the entry"),
			"at":    timeStr("when"),
			"actor": str("the admin token's name"),
			"action": enum("what was asked", "promotion.create", "promotion.change", "promotion.close", "promotion.archive", "promotion.rebuild",
				"promotion.grants", "promotion.codes", "claims.revoke", "dead_letters.replay", "dead_letters.void",
				"admin_token.create", "admin_token.delete", "user.erase"),
			"promotion_id": orNull(str("the promotion the route names; of promotion.create, the promotion created (or the id asked for, when refused)")),
			"detail": J{"type": "object", "description": "the path, idempotency_key, replayed, and per action more: promotion.change the fields whose value changed (fields), " +
				"dead_letters.replay the claim_ids asked for or all, and the count replayed, dead_letters.void the claim_ids and the count voided (never a token or a body)"},
			"status": integer("the HTTP status answered"),
		}),
		"AuditList":        pageOf[api.AuditPage]("a page of the audit log, newest first", "entries", "AuditEntry", "the page"),
		"AdminTokenCreate": inputOf[api.AdminTokenCreate]("a new admin token", []string{"name"}, J{"name": idSchema("who the token is in the audit log")}),
		"AdminToken": shapeOf[api.AdminToken]("an admin token (never its value, but in the answer to its creation)", J{
			"name":       str("its name"),
			"source":     enum("where it comes from", "config", "api"),
			"created_at": orNull(timeStr("when it was issued (null for configured ones)")),
			"created_by": str("the admin who issued it"),
			"token":      str("the value: in the answer to its creation only"),
		}),
		"AdminTokenList": shapeOf[api.AdminTokenList]("every admin token", J{"admin_tokens": array(schema("AdminToken"), "the tokens")}),
		"Balance": shapeOf[api.Balance]("a user's points over every promotion", J{
			"user_id": str("the user"),
			"balance": integer("the sum of what point claims credited"),
			"entries": integer("ledger entries, one per issued point claim"),
		}),
		"ClaimLookup": shapeOf[api.ClaimLookup]("one claim found by its id", J{
			"promotion_id": str("its promotion"),
			"user_id":      str("its user"),
			"claim":        schema("UserClaim"),
		}),
		"TimeBucket": shapeOf[api.TimeBucket]("what happened to a promotion's claims in one bucket of time (settled claims only: issued rows and dead letters)",
			J{
				"at":            timeStr("the bucket's start"),
				"accepted":      integer("issued rows accepted in the bucket"),
				"issued":        integer("rows issued in the bucket"),
				"max_lag_ms":    integer("the longest issued_at − accepted_at of the rows issued in the bucket, ms"),
				"dead_lettered": integer("claims dead-lettered in the bucket"),
			}),
		"Timeline": shapeOf[api.Timeline]("a promotion's settled claims per bucket; buckets where nothing happened are left out",
			J{
				"promotion_id":   str("the promotion"),
				"bucket_seconds": integer("the width of a bucket"),
				"from":           timeStr("the start asked for (the first bucket starts at it rounded down)"),
				"to":             timeStr("the end asked for, excluded"),
				"buckets":        array(schema("TimeBucket"), "oldest first"),
			}),
		"Report": shapeOf[api.Report]("the summary of a drop: claims from the database (global), refusals as this instance counted them, the waiting room from Redis",
			J{
				"promotion_id":      str("the promotion"),
				"name":              str("its name"),
				"mode":              enum("its mode", "first_come", "grant"),
				"kind":              str("its kind"),
				"state":             str("its state now"),
				"stock":             integer("its stock"),
				"starts_at":         timeStr("its start"),
				"ends_at":           timeStr("its end"),
				"closed_at":         orNull(timeStr("when an admin closed it")),
				"generated_at":      timeStr("when this report was made"),
				"accepted":          integer("claims accepted (grants: targets enqueued)"),
				"issued":            integer("issued rows, revoked ones included"),
				"revoked":           integer("issued claims an admin revoked"),
				"pending":           integer("accepted, not yet issued nor dead-lettered"),
				"dead_letters":      J{"type": "object", "additionalProperties": J{"type": "integer"}, "description": "dead letters by state: failed, replayed, voided (states without any left out)"},
				"sold_out_at":       orNull(timeStr("first_come, sold out: the acceptance time of the last claim issued")),
				"first_accepted_at": orNull(timeStr("the earliest acceptance of an issued claim")),
				"last_accepted_at":  orNull(timeStr("the latest acceptance of an issued claim")),
				"last_issued_at":    orNull(timeStr("the latest issue")),
				"issue_lag": shapeOf[api.IssueLag]("issued_at − accepted_at over the issued claims (nearest-rank percentiles), ms; zeros without any",
					J{"p50_ms": integer("median"), "p99_ms": integer("99th percentile"), "max_ms": integer("maximum")}),
				"claims_per_second": shapeOf[api.ClaimRate]("accepted claims per second over the drop", J{
					"peak":           number("the busiest bucket's accepted claims over its width"),
					"mean":           number("issued claims over the span from the first to the last acceptance"),
					"bucket_seconds": integer("the width of a bucket: ?bucket, else the narrowest of 1s, 10s, 1m, 10m, 1h that spans the drop in at most 1,000"),
					"buckets":        array(schema("TimeBucket"), "the drop's timeline, oldest first"),
				}),
				"rejected": shapeOf[api.Rejected]("claims refused by the promotion, by code, as the answering instance counted them since it started (no other record exists)",
					J{
						"scope":   enum("whose count", "instance"),
						"since":   timeStr("when the instance started counting"),
						"total":   integer("the sum of by_code"),
						"by_code": J{"type": "object", "additionalProperties": J{"type": "integer"}, "description": "sold_out, already_claimed, not_started, ended, not_admitted, paused, claim_voided (codes without any left out)"},
					}),
				"waiting_room": orNull(shapeOf[api.ReportRoom]("the waiting room, while Redis holds it (null without a room, or once retired)",
					J{
						"joins":        integer("places taken: admitted + abandoned + waiting"),
						"admitted":     integer("passes handed out"),
						"abandoned":    integer("places skipped, their user gone"),
						"waiting":      integer("places not reached (told sold_out or ended once the promotion is)"),
						"passes_spent": integer("passes spent by claims"),
					})),
				"notes": array(str("a note"), "what the figures leave out"),
			}),
		"Health":  object("the process's health", []string{"status"}, J{"status": enum("ok (healthz) or ready (readyz)", "ok", "ready")}),
		"UILogin": input("a dashboard login", []string{"token"}, J{"token": str("an admin token")}),
		"UISession": object("a dashboard session", []string{"name", "csrf"}, J{
			"name": str("the admin token's name"),
			"csrf": str("the CSRF token to send in X-CSRF-Token"),
		}),
	}
}

func parameters() J {
	path := func(name, desc string) J {
		return J{"name": name, "in": "path", "required": true, "description": desc, "schema": idSchema(desc)}
	}
	return J{
		"PromotionID": path("id", "the promotion's id"),
		"UserID":      path("user_id", "the user's id"),
		"TokenName":   path("name", "the admin token's name"),
		"Cursor": J{"name": "cursor", "in": "query", "description": "the next_cursor of the page before; absent: the first page",
			"schema": J{"type": "string"}},
		"Limit": J{"name": "limit", "in": "query", "description": "items per page",
			"schema": J{"type": "integer", "minimum": 1, "maximum": httpapi.MaxPageLimit, "default": httpapi.DefaultPageLimit}},
		"RequestID": J{"name": httpapi.RequestIDHeader, "in": "header",
			"description": "the caller's id of the request, answered in X-Request-Id and logged as request_id; one that is empty, longer than 128 characters or not visible ASCII is replaced by a generated id (never refused)",
			"schema":      J{"type": "string"}},
		"IdempotencyKey": J{"name": "Idempotency-Key", "in": "header", "description": "a retry with the same key and request gets the first answer again (admin: within 24 h; claims: within the promotion's life)",
			"schema": J{"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[\\x21-\\x7e]+$"}},
		"EntryToken": J{"name": httpapi.EntryTokenHeader, "in": "header", "description": "the entry token of an admitted user (waiting room on)",
			"schema": J{"type": "string"}},
	}
}

func headers() J {
	return J{
		"RetryAfter": J{"description": "seconds to wait before retrying", "schema": J{"type": "integer", "minimum": 1}},
		"RequestID": J{"description": "the request's id: the caller's X-Request-Id if valid, else one the server made; problems carry it as request_id, log lines as request_id",
			"schema": J{"type": "string", "minLength": 1, "maxLength": httpapi.MaxRequestIDLen}},
		"IdempotentReplayed": J{"description": "true on the first answer replayed for a retry with the same Idempotency-Key",
			"schema": J{"type": "string", "enum": []string{"true"}}},
		"WWWAuthenticate": J{"description": "the Bearer challenge", "schema": J{"type": "string"}},
		"Allow":           J{"description": "the methods the path serves", "schema": J{"type": "string"}},
		"ETag":            J{"description": "the document's validator", "schema": J{"type": "string"}},
		"SetCookie":       J{"description": "the dashboard's session cookie dibs_ui (HttpOnly, SameSite=Strict, Path=/)", "schema": J{"type": "string"}},
		"Location":        J{"description": "where the resource is", "schema": J{"type": "string"}},
	}
}

// withRequestID is response r with the X-Request-Id header every answer
// carries.
func withRequestID(r J) J {
	out := maps.Clone(r)
	hd := J{}
	if h, ok := r["headers"].(J); ok {
		hd = maps.Clone(h)
	}
	hd[httpapi.RequestIDHeader] = header("RequestID")
	out["headers"] = hd
	return out
}

// problems is the problem answers of an operation: status → codes.
type problems map[int][]string

// with adds codes, each under its status (tooManyRequests: overloaded
// under 429).
func (p problems) with(codes ...string) problems {
	out := problems{}
	for st, cs := range p {
		out[st] = slices.Clone(cs)
	}
	for _, c := range codes {
		st, code := 0, c
		if c == tooManyRequests {
			st, code = 429, httpapi.CodeOverloaded
		} else {
			pc, ok := problemCodes[c]
			if !ok {
				panic("no problem code " + c)
			}
			st = pc.statuses[0]
		}
		if !slices.Contains(out[st], code) {
			out[st] = append(out[st], code)
			slices.Sort(out[st])
		}
	}
	return out
}

func (p problems) responses() J {
	out := J{}
	for st, codes := range p {
		var when []string
		hd := J{}
		for _, c := range codes {
			when = append(when, "`"+c+"`")
			if slices.Contains(retried, c) {
				hd["Retry-After"] = header("RetryAfter")
			}
			if c == httpapi.CodeUnauthorized {
				hd["WWW-Authenticate"] = header("WWWAuthenticate")
			}
		}
		r := J{
			"description":     "a problem: " + strings.Join(when, ", ") + " (see x-problem-codes at the root)",
			"content":         J{"application/problem+json": J{"schema": schema("Problem")}},
			"x-problem-codes": codes,
		}
		if len(hd) > 0 {
			r["headers"] = hd
		}
		out[fmt.Sprint(st)] = r
	}
	return out
}

// The problem answers shared by groups of operations.
var (
	base    = problems{}.with(httpapi.CodeOverloaded, httpapi.CodeUnavailable)
	admin   = base.with(httpapi.CodeUnauthorized, httpapi.CodeForbidden)
	keyed   = admin.with(httpapi.CodeInvalidRequest, httpapi.CodeTooLarge, httpapi.CodeIdempotencyKeyReused, httpapi.CodeRequestInProgress)
	inPromo = base.with(httpapi.CodeInvalidRequest, httpapi.CodeNotFound)
)

// op is one operation of the document.
type op struct {
	id, summary, desc string
	tag               string
	security          []J
	params            []J
	body              J // the request body, or nil
	ok                J // status → the response
	problems          problems
}

var (
	adminSecurity = []J{{"adminBearer": []string{}}, {"dashboardCookie": []string{}}}
	// userSecurity: a user token when user tokens are on (else nothing),
	// or the admin token in its place.
	userSecurity = []J{{}, {"userBearer": []string{}}, {"adminBearer": []string{}}}
	openSecurity = []J{{}}
)

func (o op) json() J {
	resp := o.problems.responses()
	for st, r := range o.ok {
		resp[st] = r
	}
	for st, r := range resp {
		resp[st] = withRequestID(r.(J))
	}
	o.params = append(slices.Clone(o.params), param("RequestID"))
	out := J{"operationId": o.id, "summary": o.summary, "tags": []string{o.tag}, "responses": resp, "security": o.security}
	if o.desc != "" {
		out["description"] = o.desc
	}
	if len(o.params) > 0 {
		out["parameters"] = o.params
	}
	if o.body != nil {
		out["requestBody"] = o.body
	}
	return out
}

func jsonBody(name string, required bool) J {
	return J{"required": required, "content": J{"application/json": J{"schema": schema(name)}}}
}

// upload is the body of an upload: JSON, or NDJSON lines streamed.
func upload(whole, line string) J {
	return J{"required": true, "content": J{
		"application/json":     J{"schema": schema(whole)},
		"application/x-ndjson": J{"schema": J{"$ref": "#/components/schemas/" + line, "description": "one object per line, each ≤ 64 KiB"}},
	}}
}

func answer(desc, name string, hd ...string) J {
	r := J{"description": desc, "content": J{"application/json": J{"schema": schema(name)}}}
	if len(hd) > 0 {
		h := J{}
		for _, n := range hd {
			h[n] = header(strings.ReplaceAll(n, "-", ""))
		}
		r["headers"] = h
	}
	return r
}

// keyedAnswer is the answer of an admin request that takes an
// Idempotency-Key: a replay carries Idempotent-Replayed.
func keyedAnswer(desc, name string) J { return answer(desc, name, "Idempotent-Replayed") }

func noContent(desc string) J { return J{"description": desc} }

func eventStream(desc string) J { return J{"text/event-stream": J{"schema": str(desc)}} }

// paths is every operation, by path and method.
func paths() map[string]map[string]op {
	id, user := param("PromotionID"), param("UserID")
	page := []J{param("Cursor"), param("Limit")}
	key := param("IdempotencyKey")
	noBody := J{"required": false, "description": "none; anything sent is ignored (and fingerprinted with an Idempotency-Key)", "content": J{"application/json": J{"schema": J{}}}}
	return map[string]map[string]op{
		"/v1/promotions": {
			"GET": {id: "listPromotions", tag: "promotions", summary: "List promotions", security: openSecurity,
				desc: "Every promotion not archived, by id; `state` filters (archived ones only with state=archived), `sort` orders. A filtered page may hold fewer than limit while next_cursor is not null.",
				params: append([]J{
					{"name": "state", "in": "query", "schema": enum("keep promotions in this state (closed: closed by an admin, shown as ended)", "scheduled", "open", "sold_out", "ended", "closed", "archived")},
					{"name": "sort", "in": "query", "schema": enum("order (default by id); a cursor is valid for the sort it came with", "id", "created_at", "-created_at")},
				}, page...),
				ok:       J{"200": answer("a page of promotions", "PromotionList")},
				problems: base.with(httpapi.CodeInvalidRequest)},
			"POST": {id: "createPromotion", tag: "promotions", summary: "Create a promotion", security: adminSecurity,
				params: []J{key}, body: jsonBody("PromotionCreate", true),
				ok:       J{"201": keyedAnswer("the promotion", "Promotion")},
				problems: keyed.with(httpapi.CodeAlreadyExists)},
		},
		"/v1/promotions/{id}": {
			"GET": {id: "getPromotion", tag: "promotions", summary: "Read a promotion (archived ones too)", security: openSecurity,
				params: []J{id}, ok: J{"200": answer("the promotion", "Promotion")}, problems: inPromo},
			"PATCH": {id: "patchPromotion", tag: "promotions", summary: "Change a running promotion", security: adminSecurity,
				desc:   "Applied atomically in Redis and recorded in the database. grant promotions may change name and ends_at only.",
				params: []J{id, key}, body: jsonBody("PromotionPatch", true),
				ok:       J{"200": keyedAnswer("the promotion", "Promotion")},
				problems: keyed.with(httpapi.CodeNotFound, httpapi.CodeStockBelowAccepted, httpapi.CodeNotEnoughCodes, httpapi.CodeEnded)},
		},
		"/v1/promotions/{id}/close": {
			"POST": {id: "closePromotion", tag: "promotions", summary: "End a promotion now", security: adminSecurity,
				params: []J{id, key}, body: noBody, ok: J{"200": keyedAnswer("the promotion", "Promotion")},
				problems: keyed.with(httpapi.CodeNotFound)},
		},
		"/v1/promotions/{id}/archive": {
			"POST": {id: "archivePromotion", tag: "promotions", summary: "Archive an ended promotion", security: adminSecurity,
				params: []J{id, key}, body: noBody, ok: J{"200": keyedAnswer("the promotion, archived_at set (archiving again keeps the first time)", "Promotion")},
				problems: keyed.with(httpapi.CodeNotFound, httpapi.CodeNotEnded)},
		},
		"/v1/promotions/{id}/rebuild": {
			"POST": {id: "rebuildPromotion", tag: "promotions", summary: "Merge the database's claims into Redis",
				desc:     "Marks the promotion rebuilding (its claims answer 503 unavailable meanwhile), merges the database's claims into Redis without lowering anything, and lets claims go on; it also lifts a halt.",
				security: adminSecurity, params: []J{id, key}, body: noBody,
				ok:       J{"200": keyedAnswer("what the rebuild did", "Rebuild")},
				problems: keyed.with(httpapi.CodeNotFound, httpapi.CodeRebuildInProgress, httpapi.CodeEnded)},
		},
		"/v1/promotions/{id}/claims": {
			"POST": {id: "claim", tag: "claims", summary: "Claim a unit (first_come)", security: userSecurity,
				desc:   "A retry with the same Idempotency-Key for the same user and promotion gets the original answer and never a second unit. With a waiting room the request needs the user's X-Entry-Token.",
				params: []J{id, key, param("EntryToken")}, body: jsonBody("UserRef", true),
				ok: J{"202": answer("accepted: confirmation into the database follows", "ClaimAccepted")},
				problems: base.with(httpapi.CodeInvalidRequest, httpapi.CodeUnauthorized, httpapi.CodeNotFound, httpapi.CodeNotStarted,
					httpapi.CodeEnded, httpapi.CodeNotAdmitted, httpapi.CodeAlreadyClaimed, httpapi.CodePaused, httpapi.CodeSoldOut,
					httpapi.CodeClaimVoided, httpapi.CodeTooLarge, tooManyRequests)},
			"GET": {id: "listWinners", tag: "claims", summary: "List the issued claims in rank order", security: adminSecurity,
				desc:   "With Accept: text/csv every issued claim as CSV, streamed (limit and cursor do not apply); it counts against the streamed-request limit.",
				params: append([]J{id, {"name": "status", "in": "query", "schema": enum("the only value; may be left out", "issued")}}, page...),
				ok: J{"200": J{"description": "a page of winners, or the CSV export", "content": J{
					"application/json": J{"schema": schema("WinnerList")},
					"text/csv":         J{"schema": J{"type": "string", "description": "header rank,claim_id,user_id,slot,accepted_at,issued_at,code then one row per claim"}},
				}}},
				problems: admin.with(httpapi.CodeInvalidRequest, httpapi.CodeNotFound)},
		},
		"/v1/promotions/{id}/claims/{user_id}": {
			"GET": {id: "getUserClaims", tag: "claims", summary: "A user's claims on a promotion", security: userSecurity,
				desc:   "With user tokens on, only to that user's token or the admin token.",
				params: []J{id, user}, ok: J{"200": answer("the user's claims", "UserClaims")},
				problems: inPromo.with(httpapi.CodeUnauthorized)},
		},
		"/v1/claims/{claim_id}": {
			"GET": {id: "getClaim", tag: "claims", summary: "One claim by its id", security: adminSecurity,
				desc: "The id is <promotion>#<rank> (escape # as %23), found through the database's row of that rank, or <promotion>@<user> (a grant). " +
					"404 not_found for an unknown promotion, or a rank the database holds nothing for yet: a pending claim is found through its user (GET /v1/promotions/{id}/claims/{user_id}).",
				params:   []J{{"name": "claim_id", "in": "path", "required": true, "description": "the claim id", "schema": J{"type": "string", "minLength": 1, "maxLength": 200}}},
				ok:       J{"200": answer("the claim and whose it is", "ClaimLookup")},
				problems: admin.with(httpapi.CodeInvalidRequest, httpapi.CodeNotFound)},
		},
		"/v1/promotions/{id}/claims/revoke": {
			"POST": {id: "revokeClaims", tag: "claims", summary: "Revoke issued claims", security: adminSecurity,
				params: []J{id, key}, body: jsonBody("ClaimIDs", true),
				ok:       J{"200": keyedAnswer("what the revoke did", "Revoked")},
				problems: keyed.with(httpapi.CodeNotFound)},
		},
		"/v1/promotions/{id}/grants": {
			"POST": {id: "grant", tag: "claims", summary: "Upload the targets of a grant promotion", security: adminSecurity,
				desc:     "JSON (all or nothing, up to 10,000 ids) or application/x-ndjson lines (streamed, any size, applied line by line; one of http.max_streams streamed requests). Re-sending a target is a duplicate, never a second issuance.",
				params:   []J{id, key},
				body:     upload("GrantsUpload", "GrantLine"),
				ok:       J{"202": keyedAnswer("what the upload did", "GrantsResult")},
				problems: keyed.with(httpapi.CodeNotFound, httpapi.CodeEnded)},
		},
		"/v1/promotions/{id}/codes": {
			"POST": {id: "uploadCodes", tag: "claims", summary: "Upload codes into a coupon promotion's pool", security: adminSecurity,
				desc:     "JSON (all or nothing, 1 to 10,000 codes) or application/x-ndjson lines (streamed, any size). The first codes must come before starts_at; codes may be added until the promotion ends. A promotion with a code pool accepts at most as many claims as its pool has codes: an upload raises its effective stock, min(stock, total), up to stock.",
				params:   []J{id, key},
				body:     upload("CodesUpload", "CodeLine"),
				ok:       J{"200": keyedAnswer("what the upload did", "CodesResult")},
				problems: keyed.with(httpapi.CodeNotFound, httpapi.CodeEnded, httpapi.CodeNoPoolForKind, httpapi.CodePoolAfterStart)},
		},
		"/v1/promotions/{id}/queue": {
			"POST": {id: "joinQueue", tag: "waiting-room", summary: "Join the waiting room", security: userSecurity,
				desc: "Idempotent: joining again keeps the place (expired and abandoned users take a new place at the back, and so does a user whose pass was spent while the user's claims are below per_user_limit; at the limit it answers used). " +
					"A room with pow_difficulty answers a join without a valid solution 403 challenge_required with a fresh challenge: find a nonce such that SHA-256(challenge + \":\" + nonce) starts with difficulty zero bits and join again with challenge and nonce (each challenge joins once).",
				params: []J{id}, body: jsonBody("JoinRequest", true),
				ok: J{
					"200": answer("admitted or used", "Standing"),
					"202": answer("waiting or prequeue", "Standing"),
				},
				problems: inPromo.with(httpapi.CodeUnauthorized, httpapi.CodeNotStarted, httpapi.CodeEnded, httpapi.CodeSoldOut,
					httpapi.CodeChallengeRequired, httpapi.CodeTooLarge, tooManyRequests)},
		},
		"/v1/promotions/{id}/queue/{user_id}": {
			"GET": {id: "getStanding", tag: "waiting-room", summary: "A user's standing in the waiting room (a check-in)", security: userSecurity,
				desc: "A waiting user's standing comes from the instance's latest read of the room (at most one admission tick old). With Accept: text/event-stream the standing as server-sent events (event status, data the JSON form) until the first status other than waiting; one of http.max_streams streamed requests; over HTTP/1.1 with Connection: close, the stream being the rest of the connection.",
				params: []J{id, user, {"name": "Accept", "in": "header", "schema": J{"type": "string"},
					"description": "text/event-stream for the live stream"}},
				ok: J{"200": J{"description": "the standing", "content": J{
					"application/json":  J{"schema": schema("Standing")},
					"text/event-stream": J{"schema": str("retry: 2000, then `event: status` with the JSON standing as data, each time it changes; a `: keep-alive` comment line every 15 s")},
				}}},
				problems: inPromo.with(httpapi.CodeUnauthorized, httpapi.CodeEnded, httpapi.CodeSoldOut)},
		},
		"/v1/promotions/{id}/report": {
			"GET": {id: "getReport", tag: "admin", summary: "The summary of a drop, for the morning after", security: adminSecurity,
				desc: "Claims, issue lag and the timeline come from the database, so every instance answers the same; refusals are the answering instance's count since it started; the waiting room comes from Redis until the promotion is retired.",
				params: []J{id, {"name": "bucket", "in": "query", "description": "the timeline's bucket width; absent: the narrowest that spans the drop in at most 1,000",
					"schema": enum("a width", "1s", "10s", "1m", "10m", "1h")}},
				ok:       J{"200": answer("the report", "Report")},
				problems: admin.with(httpapi.CodeInvalidRequest, httpapi.CodeNotFound)},
		},
		"/v1/promotions/{id}/timeline": {
			"GET": {id: "getTimeline", tag: "admin", summary: "A promotion's settled claims per bucket of time, from the database", security: adminSecurity,
				desc: "At most 10,000 buckets from from to to, else 400 invalid_request (field bucket).",
				params: []J{id,
					{"name": "from", "in": "query", "description": "RFC 3339; default: ten minutes before to", "schema": J{"type": "string", "format": "date-time"}},
					{"name": "to", "in": "query", "description": "RFC 3339, excluded; default: now", "schema": J{"type": "string", "format": "date-time"}},
					{"name": "bucket", "in": "query", "description": "the bucket width; default 1s", "schema": enum("a width", "1s", "10s", "1m", "10m", "1h")}},
				ok:       J{"200": answer("the buckets", "Timeline")},
				problems: admin.with(httpapi.CodeInvalidRequest, httpapi.CodeNotFound)},
		},
		"/v1/promotions/{id}/prequeue": {
			"GET": {id: "getPrequeue", tag: "waiting-room", summary: "The audit record of the opening moment's shuffle", security: adminSecurity,
				desc:   "403 not_started before starts_at (the seed is still secret); 503 unavailable after it until the shuffle ran.",
				params: append([]J{id}, page...), ok: J{"200": answer("the shuffle's seed and a page of its order", "Prequeue")},
				problems: admin.with(httpapi.CodeInvalidRequest, httpapi.CodeNotFound, httpapi.CodeNotStarted)},
		},
		"/v1/promotions/{id}/dead-letters": {
			"GET": {id: "listDeadLetters", tag: "claims", summary: "List dead-lettered claims", security: adminSecurity,
				params: append([]J{id}, page...), ok: J{"200": answer("a page of dead letters", "DeadLetterList")},
				problems: admin.with(httpapi.CodeInvalidRequest, httpapi.CodeNotFound)},
		},
		"/v1/promotions/{id}/dead-letters/replay": {
			"POST": {id: "replayDeadLetters", tag: "claims", summary: "Put dead letters back into the pipeline", security: adminSecurity,
				params: []J{id, key}, body: jsonBody("ReplayRequest", true),
				ok:       J{"202": keyedAnswer("how many were replayed", "Replayed")},
				problems: keyed.with(httpapi.CodeNotFound, httpapi.CodeEnded)},
		},
		"/v1/promotions/{id}/dead-letters/void": {
			"POST": {id: "voidDeadLetters", tag: "claims", summary: "Give up on dead letters, their units back to stock", security: adminSecurity,
				params: []J{id, key}, body: jsonBody("ClaimIDs", true),
				ok:       J{"200": keyedAnswer("how many were voided", "Voided")},
				problems: keyed.with(httpapi.CodeNotFound, httpapi.CodeEnded)},
		},
		"/v1/events": {
			"GET": {id: "listEvents", tag: "admin", summary: "The event feed, in seq order", security: adminSecurity,
				params: append([]J{{"name": "type", "in": "query", "description": "keep these types only (repeated or comma-separated)",
					"schema": J{"type": "array", "items": enum("an event type", store.EventTypes...)}, "explode": true}}, page...),
				ok:       J{"200": answer("a page of events", "EventList")},
				problems: admin.with(httpapi.CodeInvalidRequest)},
		},
		"/v1/audit": {
			"GET": {id: "listAudit", tag: "admin", summary: "The audit log, newest first", security: adminSecurity,
				params: page, ok: J{"200": answer("a page of the audit log", "AuditList")},
				problems: admin.with(httpapi.CodeInvalidRequest)},
		},
		"/v1/admin-tokens": {
			"GET": {id: "listAdminTokens", tag: "admin", summary: "List the admin tokens (never a value)", security: adminSecurity,
				ok: J{"200": answer("every admin token", "AdminTokenList")}, problems: admin},
			"POST": {id: "createAdminToken", tag: "admin", summary: "Issue an admin token", security: adminSecurity,
				params: []J{key}, body: jsonBody("AdminTokenCreate", true),
				ok:       J{"201": keyedAnswer("the token, its value shown here only", "AdminToken")},
				problems: keyed.with(httpapi.CodeAlreadyExists)},
		},
		"/v1/admin-tokens/{name}": {
			"DELETE": {id: "deleteAdminToken", tag: "admin", summary: "Revoke an admin token issued through the API", security: adminSecurity,
				params: []J{param("TokenName")}, ok: J{"204": noContent("revoked: it gets 401 from now on, on every instance")},
				problems: admin.with(httpapi.CodeInvalidRequest, httpapi.CodeNotFound)},
		},
		"/v1/users/{user_id}": {
			"DELETE": {id: "eraseUser", tag: "users", summary: "Erase a user's ids from the database", security: adminSecurity,
				desc:   "404 not_found when no erase secret is configured.",
				params: []J{user}, ok: J{"204": noContent("erased, also when there was nothing (left) to erase")},
				problems: admin.with(httpapi.CodeInvalidRequest, httpapi.CodeNotFound)},
		},
		"/v1/users/{user_id}/balance": {
			"GET": {id: "getBalance", tag: "users", summary: "A user's points", security: userSecurity,
				params: []J{user}, ok: J{"200": answer("the balance", "Balance")},
				problems: base.with(httpapi.CodeInvalidRequest, httpapi.CodeUnauthorized)},
		},
		"/healthz": {
			"GET": {id: "healthz", tag: "operations", summary: "The process runs", security: openSecurity,
				ok: J{"200": answer("it runs", "Health")}},
		},
		"/readyz": {
			"GET": {id: "readyz", tag: "operations", summary: "Redis and the database answer", security: openSecurity,
				ok: J{"200": answer("ready", "Health")}, problems: problems{}.with(httpapi.CodeUnavailable)},
		},
		"/metrics": {
			"GET": {id: "metrics", tag: "operations", summary: "Prometheus metrics", security: openSecurity,
				ok: J{"200": J{"description": "the Prometheus text format", "content": J{"text/plain": J{"schema": J{"type": "string"}}}}}},
		},
		"/openapi.json": {
			"GET": {id: "openapi", tag: "operations", summary: "This document", security: openSecurity,
				desc: "The machine-readable contract. Cacheable; a request whose If-None-Match names its ETag gets 304.",
				ok: J{
					"200": J{"description": "the OpenAPI document", "headers": J{"ETag": header("ETag")},
						"content": J{"application/json": J{"schema": J{"type": "object"}}}},
					"304": J{"description": "not modified", "headers": J{"ETag": header("ETag")}},
				}},
		},
		"/w/{id}": {
			"GET": {id: "queuePage", tag: "waiting-room", summary: "The promotion's queue page, for its users", security: openSecurity,
				desc: "HTML with a strict Content-Security-Policy; the user token comes in the URL fragment (#token=…), never sent to the server with the page. " +
					"Works only with user tokens configured. See docs/waitroom.md.",
				params: []J{id},
				ok: J{
					"200": J{"description": "the page", "content": J{"text/html": J{"schema": J{"type": "string"}}}},
					"404": J{"description": "no such promotion, or one without a waiting room (an HTML page)", "content": J{"text/html": J{"schema": J{"type": "string"}}}},
				},
				problems: problems{}.with(httpapi.CodeOverloaded, httpapi.CodeUnavailable)},
		},
		"/w/dibs-waitroom.js": {
			"GET": {id: "queueSnippet", tag: "waiting-room", summary: "The standalone script for a shop's own page (DibsWaitroom)", security: openSecurity,
				desc: "Any origin may load it (Access-Control-Allow-Origin: *). Its API is in docs/waitroom.md.",
				ok:   J{"200": J{"description": "the script", "content": J{"text/javascript": J{"schema": J{"type": "string"}}}}}},
		},
		"/w/assets/{file}": {
			"GET": {id: "queuePageAsset", tag: "waiting-room", summary: "The queue page's files (page.css, page.js, icon.svg)", security: openSecurity,
				params: []J{{"name": "file", "in": "path", "required": true, "schema": str("the file's name")}},
				ok: J{
					"200": J{"description": "the file", "content": J{"text/css": J{"schema": J{"type": "string"}}, "text/javascript": J{"schema": J{"type": "string"}}, "image/svg+xml": J{"schema": J{"type": "string"}}}},
					"404": J{"description": "no such file (plain text)", "content": J{"text/plain": J{"schema": J{"type": "string"}}}},
				}},
		},
		"/ui": {
			"GET": {id: "uiRedirect", tag: "dashboard", summary: "Redirects to /ui/", security: openSecurity,
				ok: J{"301": J{"description": "to /ui/", "headers": J{"Location": header("Location")}}}},
		},
		"/ui/": {
			"GET": {id: "uiPage", tag: "dashboard", summary: "The live dashboard (and its assets below /ui/)", security: openSecurity,
				ok: J{
					"200": J{"description": "the page or asset", "content": J{"text/html": J{"schema": J{"type": "string"}}}},
					"404": J{"description": "no such asset (plain text)", "content": J{"text/plain": J{"schema": J{"type": "string"}}}},
				}},
		},
		"/ui/login": {
			"POST": {id: "uiLogin", tag: "dashboard", summary: "Open a dashboard session with an admin token", security: openSecurity,
				desc: "Needs an Origin header naming the server's own origin (else 403 forbidden).", body: jsonBody("UILogin", true),
				ok:       J{"200": answer("the session; the cookie dibs_ui is set", "UISession", "Set-Cookie")},
				problems: base.with(httpapi.CodeInvalidRequest, httpapi.CodeUnauthorized, httpapi.CodeForbidden, httpapi.CodeTooLarge)},
		},
		"/ui/logout": {
			"POST": {id: "uiLogout", tag: "dashboard", summary: "End the dashboard session", security: openSecurity,
				desc:     "With a live session, needs the page's Origin and X-CSRF-Token.",
				ok:       J{"204": J{"description": "ended; the cookie is cleared", "headers": J{"Set-Cookie": header("SetCookie")}}},
				problems: base.with(httpapi.CodeForbidden)},
		},
		"/ui/session": {
			"GET": {id: "uiSession", tag: "dashboard", summary: "The live dashboard session", security: []J{{"dashboardCookie": []string{}}},
				desc:     "An Origin header naming another origin than the server's gets 403 forbidden.",
				ok:       J{"200": answer("the session", "UISession")},
				problems: base.with(httpapi.CodeUnauthorized, httpapi.CodeForbidden)},
		},
		"/ui/events": {
			"GET": {id: "uiEvents", tag: "dashboard", summary: "The dashboard's snapshots as server-sent events", security: []J{{"dashboardCookie": []string{}}},
				desc:     "history first, then snapshot once a second. One of http.max_streams streamed requests and of 16 dashboards per instance. An Origin header naming another origin than the server's gets 403 forbidden.",
				ok:       J{"200": J{"description": "the stream", "content": eventStream("event history then event snapshot once a second")}},
				problems: base.with(httpapi.CodeUnauthorized, httpapi.CodeForbidden)},
		},
	}
}

// openAPIDocument is the document openapi.json holds.
func openAPIDocument() J {
	ps := J{}
	for path, ops := range paths() {
		item := J{}
		for method, o := range ops {
			item[strings.ToLower(method)] = o.json()
		}
		ps[path] = item
	}
	table := J{}
	for code, pc := range problemCodes {
		table[code] = J{"status": pc.statuses, "when": pc.when}
	}
	return J{
		"openapi": "3.1.0",
		"info": J{
			"title":   "dibs HTTP API",
			"version": "1",
			"summary": "Limited-stock, first-come-first-served promotions",
			"description": "The machine-readable contract of the dibs HTTP API; docs/contract.md is its prose. " +
				"Errors are application/problem+json (RFC 9457) with a code member; the HTTP status is fixed per code " +
				"(x-problem-codes below), and each problem answer lists the codes it can carry in its own x-problem-codes. " +
				"Clients switch on code, not on the status alone. JSON request bodies over 64 KiB get 413; unknown JSON fields " +
				"and trailing data get 400. A wrong method gets 405 with Allow; an unknown path 404 not_found. HEAD is answered " +
				"wherever GET is. CORS preflights (OPTIONS) from the origins in edge.cors.allowed_origins are answered 204 by the edge, " +
				"in front of every route. Every answer carries X-Request-Id: the caller's, when it sent a valid one, else one the server made; " +
				"problems carry it as request_id, and the server's log lines of the request as request_id.",
		},
		"servers": []J{{"url": "/"}},
		"tags": []J{
			{"name": "promotions"}, {"name": "claims"}, {"name": "waiting-room"}, {"name": "users"},
			{"name": "admin"}, {"name": "operations"}, {"name": "dashboard"},
		},
		"paths": ps,
		"components": J{
			"schemas":    schemas(),
			"parameters": parameters(),
			"headers":    headers(),
			"responses": J{
				"MethodNotAllowed": withRequestID(problems{}.with(httpapi.CodeMethod).responses()["405"].(J)),
				"NoSuchEndpoint":   withRequestID(problems{}.with(httpapi.CodeNotFound).responses()["404"].(J)),
			},
			"securitySchemes": J{
				"adminBearer": J{"type": "http", "scheme": "bearer",
					"description": "an admin token: --admin-token, the config file's admin.tokens, or one issued by POST /v1/admin-tokens"},
				"userBearer": J{"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
					"description": "a user token (edge.user_tokens: HS256, EdDSA or RS256; sub = the user id, exp required); needed only when user tokens are on"},
				"dashboardCookie": J{"type": "apiKey", "in": "cookie", "name": httpapi.UICookie,
					"description": "the dashboard's session (POST /ui/login), for the dashboard's own page only: a request with an Origin header naming another origin gets 403 forbidden; requests other than GET and HEAD also need the page's Origin and X-CSRF-Token"},
			},
		},
		"x-problem-codes": table,
	}
}
