// Package stream runs the consumers of Redis Streams, the queue between a
// claim taken in Redis and its row in the database: a [Pool] reads one
// stream with one consumer group and hands the entries to a [Handler],
// sizing its consumers to the backlog and stopping itself when idle, and a
// [Registry] keeps one pool per key (a promotion) in a process.
//
// A pool
//
//   - creates its group idempotently and runs consumers named
//     instance-consumer-i, each leased by this process (SET NX PX plus a
//     heartbeat) so two live processes never share a pending-entries list;
//     a consumer whose lease may have run out (renewals failing, or the
//     process froze) reads and acknowledges nothing until the heartbeat
//     renews it, and stops if another process took the name meanwhile;
//   - reads in one of two modes: [ReadBlock] (XREADGROUP BLOCK) or [ReadPoll]
//     (non-blocking reads with a sleep that starts short and grows to the poll
//     interval). It never busy-waits: when the stream is empty one consumer
//     reads and the others park until a read finds work, so an empty
//     pool reads at most once per interval whatever its consumer count, and
//     blocking reads are capped across all pools of a registry. A read that
//     finds a full batch wakes every parked consumer (a backlog wants them
//     all); a partial one wakes a single consumer to take over reading, so a
//     trickle costs a few reads per entry, not one per consumer;
//   - lets batches fill under a steady load (BatchWait): after a partial
//     read the consumer waits a few milliseconds, keeping the reading role,
//     then reads once more without blocking and hands the handler one batch
//     of both reads, so the per-batch costs (the read, the acknowledgement,
//     a database transaction) are shared by the entries that arrive
//     meanwhile; a full read is handled at once;
//   - acknowledges an entry only after its handler succeeded; on start each
//     consumer first handles its own pending entries (id 0), then new ones;
//   - reclaims entries left idle by dead consumers, and dead-letters an
//     entry (a callback, then a dead-letter stream capped at
//     about DeadLetterMaxLen entries, then XACK) when it is malformed, fails
//     permanently, or its handler failed MaxDeliveries times;
//   - classifies handler errors: [Transient] pauses the pool with backoff and
//     retries, [Permanent] and [Malformed] dead-letter at once, anything else
//     (a panic too, recovered) is retried and counted, up to MaxDeliveries.
//     Only those counted failures move an entry towards the dead letters:
//     they are kept per entry in a hash beside the stream ([FailuresKey]),
//     so they survive restarts and reclaims, while Redis's delivery count,
//     which every restart, reclaim and retry raises, does not matter. An
//     outage of the handler's database, however long, dead-letters nothing;
//   - gives a handler a deadline under half of ReclaimMinIdle, so a slow
//     handler is never reclaimed while it runs, and the dead-letter
//     callbacks of one read the same deadline, so a stalled database never
//     holds a consumer for good;
//   - trims acknowledged entries with XTRIM MINID ~, never past an
//     unfinished entry of any group;
//   - scales between MinConsumers and MaxConsumers with the policy of Spring
//     AMQP's SimpleMessageListenerContainer ([ScalePolicy]);
//   - stops itself after IdleTimeout without messages once its group has
//     nothing pending and no lag, and then makes no Redis calls at all.
//
// The runtime needs Redis 7.0 or newer on every node; [CheckServer] checks.
//
// # Bounded commands
//
// Redis runs one command at a time, so every command the runtime sends holds
// up every other client of the server (at the peak, the claims) for as long
// as it runs. The runtime's commands are therefore bounded: none carries
// more than 100 ids or fields, or asks for more than 100 entries.
//
//   - Reads: one XREADGROUP asks for at most 100 entries; a BatchSize over
//     100 is read with several in a row, without blocking, while each comes
//     back full, and handed to the handler as one batch.
//   - Acknowledgements, failure counts: XACK, HMGET, HDEL and XCLAIM carry
//     at most 100 ids each; a bigger batch is sent as several commands in
//     one round trip. [Spec.Ack] gets the whole batch and should do the
//     same (the dibs ack script takes 100 entries a call).
//   - Reclaim: XAUTOCLAIM walks the pending list from where it is told to
//     start, whatever the entries' age, so a pool under load, whose pending
//     list holds thousands of entries in flight, paid for looking at all of
//     them on every pass. The runtime uses instead that a stream id is the
//     Redis time its entry was added (XADD *), at or before every delivery
//     of it: an entry pending for at least ReclaimMinIdle has an id no newer
//     than Redis TIME less ReclaimMinIdle. A reclaim slice is one script
//     call: XPENDING from a cursor up to that id, at most 100 entries, then
//     XCLAIM of those idle at least ReclaimMinIdle, at most 25 (XCLAIM
//     finds each entry by walking its stream node: 25 entries cost Redis
//     about 0.25 ms, 100 over 1 ms; fewer if BatchSize is smaller), which
//     counts a delivery; entries deleted from the stream while pending are
//     dropped from the pending list and dead-lettered, as XAUTOCLAIM did.
//     The cursor moves past the last entry a slice looked at; a slice that
//     looked at fewer than 100 entries and took fewer than 25 ends the
//     scan, so the next one starts over at the oldest pending entry. A pass
//     runs up to 64 slices (handling what each took before the next), and
//     one that used them up leaves the cursor where it stopped for the next
//     pass. Under load the range holds only the entries really left behind,
//     so a pass usually costs one short slice.
//     Entry ids given by the application (XADD with an explicit id) must be
//     no newer than the time they are added, or those entries are reclaimed
//     late.
//   - Trim: XTRIM MINID ~ with LIMIT 5000 removes whole stream nodes (about
//     100 entries or 4 kB each) below the oldest unfinished entry, at most
//     5,000 entries a call; a pass calls it again while it trims something,
//     up to 64 times (64 × 5,000 entries per pass, 64,000 entries a second
//     at the default interval of 5s). Acknowledged entries in the node of
//     the oldest unfinished one stay until that node is finished.
//
// Handlers get every entry of one read ([Handler]) and return one result per
// entry, so a database writer can insert a batch in one statement; or use
// [PerMessage]. Handlers must be idempotent: delivery is at least once.
//
// Inside a pool one supervisor goroutine owns the consumer set, the scale
// state, the poller role and the idle decision; the consumers report each
// read and their exit to it over a bounded channel, and after a read that
// found nothing wait for its go-ahead. A heartbeat goroutine renews the
// leases.
//
// A [Registry] keeps one pool per key: [Registry.Run] makes sure a key's
// pool runs (it wakes a running pool, and starts a new one otherwise),
// [Registry.Wake] only wakes a running pool, [Registry.StopPool] stops one
// key's pool and [Registry.Stop] every pool. A registry never runs two pools
// of one key at once: a pool started while an earlier one of the same key
// is still stopping (its Stop timed out with a handler still running) waits
// until every earlier one is done.
//
// [Pool] and [Registry] answer Start and Stop alike: Stop waits until the
// goroutines are done or ctx's deadline (then it returns ctx.Err()), is safe
// to call twice and before Start, and nothing starts again after Stop.
package stream
