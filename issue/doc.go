// Package issue decides what a claim receives once it is confirmed: a
// coupon code, a voucher (a code with a value and an expiry), points on the
// user's balance, or whatever an [Issuer] a library user writes produces.
//
// The confirmation pipeline (package promotion) asks the promotion kind's
// Issuer for a [Grant] for each claim it is about to write, then the store
// writes the claim's issued row and its Grant in one database transaction.
// The Grant is written only when the row is new: a redelivered claim keeps
// what it got first, so nothing is issued twice, whatever the redeliveries.
//
// The built-in issuers are [Coupon], [Voucher] and [Point]; [Builtin]
// returns them by kind for a [Config].
package issue
