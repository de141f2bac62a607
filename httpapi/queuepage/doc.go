// Package queuepage is the waiting room's queue page that dibs serve shows
// a shop's users, at /w/{id}: plain HTML, CSS and hand-written JavaScript,
// embedded, no build step, nothing loaded from elsewhere (but the
// promotion's logo, if it has one). The page joins the user to the
// promotion's waiting room with the user token the shop links to
// (/w/{id}#token=<user token>), follows the user's place over server-sent
// events (polling when the stream fails), solves the proof-of-work a join
// may ask for, and once the user is admitted either claims at once or hands
// the entry token to the shop's page, as the promotion's page setting says
// (promotion.RoomPage).
//
// The same logic, without the page, is the standalone script
// dibs-waitroom.js (served at /w/dibs-waitroom.js), for a shop that keeps
// its own page: see docs/waitroom.md for its API.
//
// Every page carries a strict Content-Security-Policy (CSP): the
// promotion's settings reach the page as data (a JSON blob in a data
// attribute), never as inline script or style.
package queuepage
