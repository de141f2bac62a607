-- Fewer index writes per issued claim. The second exactly-once key is kept
-- with its columns in another order, UNIQUE (user_id, promotion_id, slot):
-- the same rows are unique as before, and the key now also finds a user's
-- rows across promotions (EraseUser), so issued_by_user, which did only
-- that, is dropped. Per claim this is three index entries (claim_id, the
-- rank key, the user key) where there were four.
--
-- The table is not rewritten: the new key's index is built from the rows
-- (CREATE INDEX holds a SHARE lock while it builds, which lets reads go on
-- and makes writes to issued wait), then becomes the constraint, and the
-- old key and index are dropped (brief ACCESS EXCLUSIVE locks, no scan).
-- An operator with a large issued table can build the index beforehand
-- without blocking writes:
--
--   CREATE UNIQUE INDEX CONCURRENTLY issued_user_promotion_slot
--       ON issued (user_id, promotion_id, slot);
--
-- and the migration then uses it as it is.

CREATE UNIQUE INDEX IF NOT EXISTS issued_user_promotion_slot ON issued (user_id, promotion_id, slot);
ALTER TABLE issued ADD CONSTRAINT issued_user_promotion_slot UNIQUE USING INDEX issued_user_promotion_slot;
ALTER TABLE issued DROP CONSTRAINT issued_promotion_id_user_id_slot_key;
DROP INDEX issued_by_user;
