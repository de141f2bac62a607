-- The outbox: one row per event, written in the transaction of the change
-- it reports. seq is the feed's order; AUTOINCREMENT never hands out a seq
-- again, even after the rows below it were pruned. id is deterministic
-- (see store.EventID), so a change written twice (a redelivered claim)
-- writes its events once.
--
-- event_cursors: how far each webhook subscriber has been delivered, and
-- which instance delivers for it (owner, until lease_until).

CREATE TABLE events (
    seq          INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    id           TEXT    NOT NULL UNIQUE,
    type         TEXT    NOT NULL,
    at           TEXT    NOT NULL,
    promotion_id TEXT    NOT NULL,
    claim_id     TEXT,
    data         TEXT    NOT NULL DEFAULT '{}'
) STRICT;

-- Pruning reads the oldest events first.
CREATE INDEX events_by_at ON events (at);

CREATE TABLE event_cursors (
    subscriber  TEXT    NOT NULL PRIMARY KEY,
    seq         INTEGER NOT NULL DEFAULT 0,
    owner       TEXT    NOT NULL DEFAULT '',
    lease_until TEXT    NOT NULL DEFAULT ''
) STRICT;
