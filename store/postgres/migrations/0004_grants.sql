-- What a claim receives beyond its issued row, written in the same
-- transaction and only when the row is new, so a redelivered claim keeps
-- what it got first.
--
-- codes: a coupon's or voucher's code, unique across every claim of every
-- promotion (a code taken by another claim is made anew, never reissued).
-- ledger: one credit of points per claim; a user's balance is the sum of
-- the user's entries (ledger_by_user covers it, an index-only scan), so it
-- always matches its ledger and concurrent credits never wait on a
-- balance row's lock.

CREATE TABLE codes (
    code         text        NOT NULL PRIMARY KEY,
    claim_id     text        NOT NULL UNIQUE,
    promotion_id text        NOT NULL,
    value        bigint      NOT NULL,
    expires_at   timestamptz
);

CREATE TABLE ledger (
    claim_id     text        NOT NULL PRIMARY KEY,
    user_id      text        NOT NULL,
    promotion_id text        NOT NULL,
    amount       bigint      NOT NULL,
    at           timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX ledger_by_user ON ledger (user_id) INCLUDE (amount);
