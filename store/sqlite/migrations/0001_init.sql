-- Promotions, issued claims and dead letters. Times are UTC text in the
-- fixed-width form 2006-01-02T15:04:05.000000Z, so they sort as they read.
-- There are no foreign keys on purpose: an issued row or a dead letter is
-- written by the confirmation pipeline, which only exists for created
-- promotions, and one bad row must never fail a whole batch.

CREATE TABLE promotions (
    id                             TEXT    NOT NULL PRIMARY KEY,
    name                           TEXT    NOT NULL,
    mode                           TEXT    NOT NULL CHECK (mode IN ('first_come', 'grant')),
    kind                           TEXT    NOT NULL CHECK (kind IN ('coupon', 'voucher', 'point')),
    stock                          INTEGER NOT NULL,
    per_user_limit                 INTEGER NOT NULL,
    value                          INTEGER NOT NULL,
    starts_at                      TEXT    NOT NULL,
    ends_at                        TEXT    NOT NULL,
    closed_at                      TEXT,
    created_at                     TEXT    NOT NULL,
    waiting_room_enabled           INTEGER NOT NULL DEFAULT 0,
    waiting_room_admit_per_second  INTEGER NOT NULL DEFAULT 0,
    waiting_room_entry_ttl_seconds INTEGER NOT NULL DEFAULT 0,
    drained                        INTEGER NOT NULL DEFAULT 0
) STRICT;

-- ListUndrained reads only the promotions still being watched.
CREATE INDEX promotions_undrained ON promotions (id) WHERE drained = 0;

CREATE TABLE issued (
    claim_id     TEXT    NOT NULL PRIMARY KEY,
    promotion_id TEXT    NOT NULL,
    user_id      TEXT    NOT NULL,
    rank         INTEGER NOT NULL,
    slot         INTEGER NOT NULL,
    accepted_at  TEXT    NOT NULL,
    issued_at    TEXT    NOT NULL,
    -- The two keys that make issuance exactly-once. The second also serves
    -- ListIssued (by promotion, user, slot); the first serves Counts.
    UNIQUE (promotion_id, rank),
    UNIQUE (promotion_id, user_id, slot)
) STRICT;

CREATE TABLE dead_letters (
    claim_id     TEXT    NOT NULL PRIMARY KEY,
    promotion_id TEXT    NOT NULL,
    user_id      TEXT    NOT NULL,
    rank         INTEGER NOT NULL,
    slot         INTEGER NOT NULL,
    reason       TEXT    NOT NULL,
    deliveries   INTEGER NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('failed', 'replayed', 'voided')),
    at           TEXT    NOT NULL,
    fields       TEXT    NOT NULL DEFAULT '{}'
) STRICT;

-- ListDeadLetters pages through one promotion's failed claims by claim id;
-- Counts counts them per state.
CREATE INDEX dead_letters_by_state ON dead_letters (promotion_id, state, claim_id);
