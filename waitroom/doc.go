// Package waitroom is the waiting room in front of a promotion: users join a
// line in order, are let in at a fixed rate that stays exact with any number
// of instances and never beyond what the stock can serve, and get a signed,
// single-use pass that the claim spends.
//
// # State and rules
//
// A room's keys (see [Keys]) share the promotion's hash tag with the claim
// keys, so one script reads the claim meta and rank counter next to the
// room. A room keeps its line in the [Layout] it was created with:
// [LayoutCompact] (one hash entry and one list element per waiting user)
// for rooms this release creates, [LayoutClassic] for those of the previous
// release; every script serves both. [Rooms.Join] hands out places from a
// Redis-side sequence (O(1));
// joining again keeps the place while the user checks in ([Rooms.Status])
// at least every [Settings].AbandonAfter. [Rooms.Tick] runs one script that
// reads Redis TIME and lets in users in order of place out of an allowance
// that grows at admit_per_second, capped at two ticks' worth and not banked
// while nobody waits, and never beyond
//
//	admitted + remaining − live
//
// with remaining = stock + voided − seq (claim keys) and live the passes
// neither spent nor expired: an expired pass gives its unit back, a tick up
// to one tick late catches up, time when no tick ran is not paid back
// beyond one tick's worth (at most admit_per_second × T plus two ticks'
// worth in any span T), and two ticks at once never let anyone in twice. A user
// reached by admission who stopped checking in is skipped; joining again
// puts them at the back. A sold-out or ended promotion answers
// [StatusSoldOut] or [StatusEnded] to every waiting user at once, and joins
// get [ErrSoldOut] or [ErrEnded]; if stock comes back, admission resumes.
//
// A user whose pass was spent is [StatusUsed]. With a per-user limit above
// 1, joining again while the user's claims (as the claim script counts
// them) are below the limit takes a new place at the back, so each pass is
// one of the user's claims; at the limit the join answers [StatusUsed]. A
// user holds one place or one pass at a time, and admission counts every
// pass alike, so joining again never lets the live passes exceed the units
// that remain.
//
// # Passes
//
// An admitted user gets an entry token ([Signer]): URL-safe base64 of the
// key id, promotion, user, pass id and expiry, signed with HMAC-SHA256 by
// the first of one or two keys ([ParseKeys]: "id:base64secret,…", the form
// of DIBS_WAITROOM_SECRET). Verify rejects a forged token with [ErrForged],
// another user's or promotion's with [ErrNotYours], an expired one with
// [ErrExpired]. A pass lets in once: [SpendScript] marks it spent in Redis
// and answers [ErrSpent] after that.
//
// # Wiring the claim
//
// The claim script spends the pass in the step that takes the unit, by
// including [PassLua] at its top and taking three more keys,
// [Keys.SpendKeys] (Passes, Live, Meta of the room, all in the promotion's
// slot), and the pass id of the token verified in Go as one more argument.
// In order:
//
//  1. answer a retry whose Idempotency-Key matched before any pass check,
//     as today;
//  2. check the window (ended, not started) as today;
//  3. r = wr_pass_check(passes, pass_id, user, now); if r, return
//     {'not_admitted', r} and write nothing;
//  4. check the per-user limit and the stock as today (sold out writes
//     nothing: the pass stays live until it expires);
//  5. take the unit and call wr_pass_spend(passes, live, meta, pass_id).
//
// # Levers
//
// [Rooms.Apply] changes a running room: its rate (the allowance accrued is
// re-based to the new rate in the same step, against Redis TIME, so
// admission stays exact across the change), a cap on the passes live at
// once ([Settings].MaxActive: a tick lets in at most the cap less the live
// passes), a message shown to everyone in line ([Standing].Message), and
// the difficulty of a proof of work each join must bring: a [Challenge]
// signed with the entry-token keys, bound to the promotion and user,
// expiring after [ChallengeTTL], solved when SHA-256(challenge + ":" +
// nonce) starts with that many zero bits ([Solved], [Solve]), checked in
// O(1) and spent once in Redis by [Rooms.JoinWithProof].
//
// # Scheduler
//
// A [Scheduler] ticks every room the instance knows ([Config].Known: in
// dibs serve, the rooms of the promotions the promotion manager holds as
// undrained, read from the database; by default those opened through the
// [Rooms]) every TickInterval through a bounded worker pool with
// caller-runs back-pressure; a round that overruns makes the next ticks
// skip, never queue. Nothing in Redis lists the rooms, so no lost key can
// stop a room, and an instance that knows no room sends Redis nothing. A
// room is left alone before its start and after a tick saw its promotion
// ended, until what the instance knows of it changes (a reopening by a
// later end). A lease per room (SET PX, renewed each tick) lets one
// instance tick it; another takes it over once the lease lapses, or at
// once when the holder stops.
//
// # Watching standings
//
// A place never changes while its user waits, and admission moves the line
// for everyone at once. A [Watcher] reads each room it serves once per tick
// (a snapshot: cursor, counts, state) and answers every local watch (a
// server-sent event stream per user) and every status lookup
// ([Watcher.Status]) of a waiting user from it and the user's place, read
// once and kept; the users it serves are checked in with its reads, in
// batches. Users the snapshot cannot answer (let in, used, expired,
// abandoned, in the prequeue) are answered by the status script. The
// scheduler's ticks hand the Watcher the users they let in
// ([Watcher.Admit] as Config.OnAdmit) before they return, and publish a
// hint on the room's sharded pub/sub channel ([Keys.Events]) after a tick
// that changed something, on which every instance serving the room reads
// it again. A periodic read is the guarantee.
package waitroom
