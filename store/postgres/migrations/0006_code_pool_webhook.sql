-- Uploaded code pools and the webhook kind.
--
-- promotions: kind may now be 'webhook' (the issuer posts each claim to the
-- promotion's webhook_url, empty for the other kinds).
--
-- code_pool: codes a partner supplied for a promotion, unique within it.
-- claim_id is NULL while a code is free; IssueBatch takes a free one for a
-- new issued row in the same transaction (FOR UPDATE SKIP LOCKED, so
-- concurrent batches take different codes without waiting on each other),
-- so a redelivered claim keeps its code and no code is taken twice.

ALTER TABLE promotions DROP CONSTRAINT promotions_kind_check;
ALTER TABLE promotions ADD CONSTRAINT promotions_kind_check
    CHECK (kind IN ('coupon', 'voucher', 'point', 'webhook'));
ALTER TABLE promotions ADD COLUMN webhook_url text NOT NULL DEFAULT '';

CREATE TABLE code_pool (
    promotion_id text        NOT NULL,
    code         text        NOT NULL,
    claim_id     text        UNIQUE,
    value        bigint,
    added_at     timestamptz NOT NULL DEFAULT now(),
    taken_at     timestamptz,
    PRIMARY KEY (promotion_id, code)
);

-- Taking a free code reads only the free ones.
CREATE INDEX code_pool_free ON code_pool (promotion_id) WHERE claim_id IS NULL;
