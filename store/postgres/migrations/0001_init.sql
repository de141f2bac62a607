-- Promotions, issued claims and dead letters. Times are timestamptz (stored
-- as UTC, microsecond precision). There are no foreign keys on purpose: an
-- issued row or a dead letter is written by the confirmation pipeline, which
-- only exists for created promotions, and one bad row must never fail a
-- whole batch.

CREATE TABLE promotions (
    id                             text        NOT NULL PRIMARY KEY,
    name                           text        NOT NULL,
    mode                           text        NOT NULL CHECK (mode IN ('first_come', 'grant')),
    kind                           text        NOT NULL CHECK (kind IN ('coupon', 'voucher', 'point')),
    stock                          bigint      NOT NULL,
    per_user_limit                 integer     NOT NULL,
    value                          bigint      NOT NULL,
    starts_at                      timestamptz NOT NULL,
    ends_at                        timestamptz NOT NULL,
    closed_at                      timestamptz,
    created_at                     timestamptz NOT NULL DEFAULT now(),
    waiting_room_enabled           boolean     NOT NULL DEFAULT false,
    waiting_room_admit_per_second  integer     NOT NULL DEFAULT 0,
    waiting_room_entry_ttl_seconds integer     NOT NULL DEFAULT 0,
    drained                        boolean     NOT NULL DEFAULT false
);

-- ListUndrained reads only the promotions still being watched.
CREATE INDEX promotions_undrained ON promotions (id) WHERE NOT drained;

CREATE TABLE issued (
    claim_id     text        NOT NULL PRIMARY KEY,
    promotion_id text        NOT NULL,
    user_id      text        NOT NULL,
    rank         bigint      NOT NULL,
    slot         integer     NOT NULL,
    accepted_at  timestamptz NOT NULL,
    issued_at    timestamptz NOT NULL DEFAULT now(),
    -- The two keys that make issuance exactly-once. The second also serves
    -- ListIssued (by promotion, user, slot); the first serves Counts.
    UNIQUE (promotion_id, rank),
    UNIQUE (promotion_id, user_id, slot)
);

CREATE TABLE dead_letters (
    claim_id     text        NOT NULL PRIMARY KEY,
    promotion_id text        NOT NULL,
    user_id      text        NOT NULL,
    rank         bigint      NOT NULL,
    slot         integer     NOT NULL,
    reason       text        NOT NULL,
    deliveries   bigint      NOT NULL,
    state        text        NOT NULL CHECK (state IN ('failed', 'replayed', 'voided')),
    at           timestamptz NOT NULL,
    fields       jsonb       NOT NULL DEFAULT '{}'
);

-- ListDeadLetters pages through one promotion's failed claims by claim id;
-- Counts counts them per state.
CREATE INDEX dead_letters_by_state ON dead_letters (promotion_id, state, claim_id);
