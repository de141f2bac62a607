// Package api holds the JSON shapes of dibs's HTTP API, shared by the
// server (httpapi) and the Go client, and the one rule both sides compute:
// the waiting room's proof of work (Solved, SolveChallenge).
//
// Each resource has one type here: the server encodes it, the client
// decodes the same type, and httpapi/openapi.json takes its schemas from
// these types, so a member added to a shape shows up in the document (its
// generator fails until the member is described). A member's JSON name is
// contract: docs/contract.md tells what each means.
//
// Conventions:
//   - Times are time.Time set in UTC: they encode as RFC 3339 with the
//     fraction of a second the time has ("2026-11-21T00:00:00.25Z").
//   - A member that may be null is a pointer without omitempty; a member
//     left out where it does not apply has omitempty (or omitzero).
//   - A request body whose zero members are left out (NewPromotion,
//     PromotionPatch) is what a client writes. Where the server must tell
//     an absent member from a zero one, it decodes the body into a struct of
//     its own with the same members; a test in httpapi keeps the two alike.
//
// The package imports the standard library only.
package api
