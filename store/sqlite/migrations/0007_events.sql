-- The outbox: one row per event, written in the transaction of the change
-- it reports. seq is the feed's order; AUTOINCREMENT never hands out a seq
-- again, even after the rows below it were pruned. id is deterministic
-- (see store.EventID). A claim's events are written with the row that
-- changes once (its issued row, its dead letter's move to failed or
-- voided), so they are written once; promotion events, written by every
-- instance that observes the change, are kept once by events_promotion.
-- A unique index of every id, random as they are, would cost each issue
-- more than the rest of its event writes.
--
-- event_cursors: how far each webhook subscriber has been delivered, and
-- which instance delivers for it (owner, until lease_until).

CREATE TABLE events (
    seq          INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    id           TEXT    NOT NULL,
    type         TEXT    NOT NULL,
    at           TEXT    NOT NULL,
    promotion_id TEXT    NOT NULL,
    claim_id     TEXT,
    data         TEXT    NOT NULL DEFAULT '{}'
) STRICT;

CREATE UNIQUE INDEX events_promotion ON events (id) WHERE claim_id IS NULL;

CREATE TABLE event_cursors (
    subscriber  TEXT    NOT NULL PRIMARY KEY,
    seq         INTEGER NOT NULL DEFAULT 0,
    owner       TEXT    NOT NULL DEFAULT '',
    lease_until TEXT    NOT NULL DEFAULT ''
) STRICT;
