// Package client is a Go client of the dibs HTTP API (docs/contract.md):
// promotions, claims, grants, code pools, dead letters, the waiting room,
// the events feed, the audit log, admin tokens, users and health.
//
//	c, err := client.New("http://127.0.0.1:8080", client.WithAdminToken(token))
//	p, err := c.CreatePromotion(ctx, client.NewPromotion{ID: "spring-drop", Stock: 1000})
//	got, err := c.Claim(ctx, "spring-drop", "u-123", client.IdempotencyKey("order-17"))
//
// Every method takes a context and sends one request (the iterators: one
// per page; WatchQueue follows a waiting user's standing over an event
// stream, reconnecting and polling as it must). A server's refusal is a *Problem (get it with errors.As and
// switch on its Code); a request that got no answer is a *RequestError.
// The client keeps no state between calls and is safe for concurrent use.
//
// The types of the requests and answers are the server's own JSON shapes,
// from package github.com/dibsio/dibs/api: client.Promotion is
// api.Promotion, and so on.
package client
