-- The outbox: one row per event, written in the transaction of the change
-- it reports. seq is the feed's order (see Store.Events for how a reader
-- never passes a row whose transaction commits late). id is deterministic
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
    seq          bigint      NOT NULL GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id           text        NOT NULL,
    type         text        NOT NULL,
    at           timestamptz NOT NULL,
    promotion_id text        NOT NULL,
    claim_id     text,
    data         jsonb       NOT NULL DEFAULT '{}'
);

CREATE UNIQUE INDEX events_promotion ON events (id) WHERE claim_id IS NULL;

CREATE TABLE event_cursors (
    subscriber  text        NOT NULL PRIMARY KEY,
    seq         bigint      NOT NULL DEFAULT 0,
    owner       text        NOT NULL DEFAULT '',
    lease_until timestamptz NOT NULL DEFAULT '-infinity'
);
