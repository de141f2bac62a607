-- What a claim receives beyond its issued row, written in the same
-- transaction and only when the row is new, so a redelivered claim keeps
-- what it got first.
--
-- codes: a coupon's or voucher's code, unique across every claim of every
-- promotion (a code taken by another claim is made anew, never reissued).
-- ledger: one credit of points per claim; a user's balance is the sum of
-- the user's entries (ledger_by_user covers it), so it always matches its
-- ledger and concurrent credits never contend on a balance row.

CREATE TABLE codes (
    code         TEXT    NOT NULL PRIMARY KEY,
    claim_id     TEXT    NOT NULL UNIQUE,
    promotion_id TEXT    NOT NULL,
    value        INTEGER NOT NULL,
    expires_at   TEXT
) STRICT;

CREATE TABLE ledger (
    claim_id     TEXT    NOT NULL PRIMARY KEY,
    user_id      TEXT    NOT NULL,
    promotion_id TEXT    NOT NULL,
    amount       INTEGER NOT NULL,
    at           TEXT    NOT NULL
) STRICT;

CREATE INDEX ledger_by_user ON ledger (user_id, amount);
