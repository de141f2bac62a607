-- The outbox: one row per event, written in the transaction of the change
-- it reports. seq is the feed's order (see Store.Events for how a reader
-- never passes a row whose transaction commits late). id is deterministic
-- (see store.EventID), so a change written twice (a redelivered claim)
-- writes its events once.
--
-- event_cursors: how far each webhook subscriber has been delivered, and
-- which instance delivers for it (owner, until lease_until).

CREATE TABLE events (
    seq          bigint      NOT NULL GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id           text        NOT NULL UNIQUE,
    type         text        NOT NULL,
    at           timestamptz NOT NULL,
    promotion_id text        NOT NULL,
    claim_id     text,
    data         jsonb       NOT NULL DEFAULT '{}'
);

-- Pruning reads the oldest events first.
CREATE INDEX events_by_at ON events (at);

CREATE TABLE event_cursors (
    subscriber  text        NOT NULL PRIMARY KEY,
    seq         bigint      NOT NULL DEFAULT 0,
    owner       text        NOT NULL DEFAULT '',
    lease_until timestamptz NOT NULL DEFAULT '-infinity'
);
