-- Changing a running promotion and revoking issued claims.
--
-- promotions.held: an admin paused the promotion's claims (they answer
-- paused until it is resumed). promotions.revoke_returns_stock: a revoked
-- claim's unit goes back to stock.
-- issued.revoked_at: when an admin revoked the issued claim (NULL while it
-- stands); revoke_returned: whether its unit went back to stock;
-- revoke_applied: whether the revoke's steps outside this database (the
-- status and stock in Redis, the issuer's undo elsewhere) are done. A row
-- revoked but not applied is finished by the recovery sweep. Rows that
-- exist already count as applied.
-- codes.revoked_at: the code of a revoked claim is no longer valid.

ALTER TABLE promotions ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
ALTER TABLE promotions ADD COLUMN revoke_returns_stock INTEGER NOT NULL DEFAULT 0;

ALTER TABLE issued ADD COLUMN revoked_at TEXT;
ALTER TABLE issued ADD COLUMN revoke_returned INTEGER NOT NULL DEFAULT 0;
ALTER TABLE issued ADD COLUMN revoke_applied INTEGER NOT NULL DEFAULT 1 CHECK (revoke_applied IN (0, 1));

-- ListUnappliedRevokes reads the few revokes still waiting for their steps.
CREATE INDEX issued_revoke_unapplied ON issued (revoked_at, claim_id) WHERE revoke_applied = 0;

ALTER TABLE codes ADD COLUMN revoked_at TEXT;
