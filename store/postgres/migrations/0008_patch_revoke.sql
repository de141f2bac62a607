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

ALTER TABLE promotions ADD COLUMN held boolean NOT NULL DEFAULT false;
ALTER TABLE promotions ADD COLUMN revoke_returns_stock boolean NOT NULL DEFAULT false;

ALTER TABLE issued ADD COLUMN revoked_at timestamptz;
ALTER TABLE issued ADD COLUMN revoke_returned boolean NOT NULL DEFAULT false;
ALTER TABLE issued ADD COLUMN revoke_applied boolean NOT NULL DEFAULT true;

-- ListUnappliedRevokes reads the few revokes still waiting for their steps.
CREATE INDEX issued_revoke_unapplied ON issued (revoked_at, claim_id) WHERE NOT revoke_applied;

ALTER TABLE codes ADD COLUMN revoked_at timestamptz;
