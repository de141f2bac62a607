-- Fewer index writes per issued claim. issued becomes a WITHOUT ROWID
-- table keyed by (promotion_id, rank), the first exactly-once key: its rows
-- are stored in that key's b-tree, in rank order, so new ones are appended
-- at the promotion's end and no rowid b-tree sits beside the key. claim_id
-- stays unique (a redelivered claim is found by it). The second
-- exactly-once key is kept with its columns in another order, UNIQUE
-- (user_id, promotion_id, slot): the same rows are unique as before, and
-- the key now also finds a user's rows across promotions (EraseUser), so
-- issued_by_user, which did only that, is dropped. Per claim this is three
-- b-trees written (the rows, claim_id, the user key) where there were five
-- (the rowid table, claim_id, the rank key, the user key, issued_by_user).
--
-- codes keeps its rowid: its key, the code, is random, and rows stored in
-- code order would scatter whole rows rather than small index entries.
--
-- SQLite cannot change a table's layout in place: the table is made anew,
-- every row copied, the old one dropped and the new one renamed, inside the
-- migration's transaction (a failure leaves the old table as it was).

CREATE TABLE issued_0011 (
    claim_id        TEXT    NOT NULL UNIQUE,
    promotion_id    TEXT    NOT NULL,
    user_id         TEXT    NOT NULL,
    rank            INTEGER NOT NULL,
    slot            INTEGER NOT NULL,
    accepted_at     TEXT    NOT NULL,
    issued_at       TEXT    NOT NULL,
    revoked_at      TEXT,
    revoke_returned INTEGER NOT NULL DEFAULT 0,
    revoke_applied  INTEGER NOT NULL DEFAULT 1 CHECK (revoke_applied IN (0, 1)),
    -- The two keys that make issuance exactly-once. The first also serves
    -- Counts, IssuedByRank, MaxRanks and ClaimsByRank; the second
    -- ListIssued (by promotion, user, slot) and EraseUser (by user).
    PRIMARY KEY (promotion_id, rank),
    UNIQUE (user_id, promotion_id, slot)
) STRICT, WITHOUT ROWID;

INSERT INTO issued_0011 (claim_id, promotion_id, user_id, rank, slot, accepted_at, issued_at,
        revoked_at, revoke_returned, revoke_applied)
    SELECT claim_id, promotion_id, user_id, rank, slot, accepted_at, issued_at,
        revoked_at, revoke_returned, revoke_applied
    FROM issued ORDER BY promotion_id, rank;

DROP TABLE issued;
ALTER TABLE issued_0011 RENAME TO issued;

-- ListUnappliedRevokes reads the few revokes still waiting for their steps.
CREATE INDEX issued_revoke_unapplied ON issued (revoked_at, claim_id) WHERE revoke_applied = 0;
