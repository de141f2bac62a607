-- Uploaded code pools and the webhook kind.
--
-- promotions: kind may now be 'webhook' (the issuer posts each claim to the
-- promotion's webhook_url, empty for the other kinds). SQLite cannot change
-- a CHECK constraint in place, so the table is rebuilt: a new table with
-- the wider CHECK, every row copied, the old one dropped, the new one
-- renamed and its indexes made again. It runs inside the migration's
-- transaction, so a failure leaves the old table as it was.
--
-- code_pool: codes a partner supplied for a promotion, unique within it.
-- claim_id is NULL while a code is free; IssueBatch takes a free one for a
-- new issued row in the same transaction (claim_id, value and taken_at
-- set), so a redelivered claim keeps its code and no code is taken twice.

CREATE TABLE promotions_0006 (
    id                                 TEXT    NOT NULL PRIMARY KEY,
    name                               TEXT    NOT NULL,
    mode                               TEXT    NOT NULL CHECK (mode IN ('first_come', 'grant')),
    kind                               TEXT    NOT NULL CHECK (kind IN ('coupon', 'voucher', 'point', 'webhook')),
    stock                              INTEGER NOT NULL,
    per_user_limit                     INTEGER NOT NULL,
    value                              INTEGER NOT NULL,
    starts_at                          TEXT    NOT NULL,
    ends_at                            TEXT    NOT NULL,
    closed_at                          TEXT,
    created_at                         TEXT    NOT NULL,
    waiting_room_enabled               INTEGER NOT NULL DEFAULT 0,
    waiting_room_admit_per_second      INTEGER NOT NULL DEFAULT 0,
    waiting_room_entry_ttl_seconds     INTEGER NOT NULL DEFAULT 0,
    drained                            INTEGER NOT NULL DEFAULT 0,
    waiting_room_abandon_after_seconds INTEGER NOT NULL DEFAULT 0,
    waiting_room_prequeue_seconds      INTEGER NOT NULL DEFAULT 0,
    waiting_room_prequeue_seed         BLOB,
    archived_at                        TEXT,
    webhook_url                        TEXT    NOT NULL DEFAULT ''
) STRICT;

INSERT INTO promotions_0006 (id, name, mode, kind, stock, per_user_limit, value, starts_at, ends_at,
        closed_at, created_at, waiting_room_enabled, waiting_room_admit_per_second,
        waiting_room_entry_ttl_seconds, drained, waiting_room_abandon_after_seconds,
        waiting_room_prequeue_seconds, waiting_room_prequeue_seed, archived_at)
    SELECT id, name, mode, kind, stock, per_user_limit, value, starts_at, ends_at,
        closed_at, created_at, waiting_room_enabled, waiting_room_admit_per_second,
        waiting_room_entry_ttl_seconds, drained, waiting_room_abandon_after_seconds,
        waiting_room_prequeue_seconds, waiting_room_prequeue_seed, archived_at
    FROM promotions;

DROP TABLE promotions;
ALTER TABLE promotions_0006 RENAME TO promotions;

-- ListUndrained reads only the promotions still being watched; the list
-- sorted by creation time reads the second.
CREATE INDEX promotions_undrained ON promotions (id) WHERE drained = 0;
CREATE INDEX promotions_by_created ON promotions (created_at, id);

CREATE TABLE code_pool (
    promotion_id TEXT    NOT NULL,
    code         TEXT    NOT NULL,
    claim_id     TEXT    UNIQUE,
    value        INTEGER,
    added_at     TEXT    NOT NULL,
    taken_at     TEXT,
    PRIMARY KEY (promotion_id, code)
) STRICT;

-- Taking a free code reads only the free ones.
CREATE INDEX code_pool_free ON code_pool (promotion_id) WHERE claim_id IS NULL;
