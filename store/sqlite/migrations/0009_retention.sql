-- Retention and sizing: when a promotion was found drained (retirement
-- counts its retention from then), when it was retired (its Redis state
-- deleted; the database keeps everything and answers for it), and the
-- claims per second its creator expects (0: not stated), from which each
-- instance sizes the promotion's consumer pool. Times are stored like the
-- others: UTC text, fixed width. Promotions drained before this migration
-- count their retention from it.

ALTER TABLE promotions ADD COLUMN drained_at TEXT;
ALTER TABLE promotions ADD COLUMN retired_at TEXT;
ALTER TABLE promotions ADD COLUMN expected_claims_per_second INTEGER NOT NULL DEFAULT 0;

UPDATE promotions SET drained_at = strftime('%Y-%m-%dT%H:%M:%S', 'now') || '.000000Z' WHERE drained <> 0;

-- The retirement pass finds drained, unretired promotions by drained_at.
CREATE INDEX promotions_by_drained_at ON promotions (drained_at) WHERE drained <> 0;
