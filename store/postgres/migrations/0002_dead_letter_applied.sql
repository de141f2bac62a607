-- Replaying or voiding a dead letter is two steps: the state change here,
-- then a change in Redis (the claim enqueued again, or its unit returned to
-- stock). applied records that the second step was done; moved_at is when
-- the first one was. A row moved but not applied is one whose Redis step may
-- have been lost (a crash or a Redis error in between), to be done again by
-- the recovery sweep. Rows that exist already count as applied.

ALTER TABLE dead_letters
    ADD COLUMN applied  boolean     NOT NULL DEFAULT true,
    ADD COLUMN moved_at timestamptz;

-- ListUnappliedDeadLetters reads the few rows still waiting for their Redis
-- step, oldest move first; applied rows (nearly all of them) stay out of it.
CREATE INDEX dead_letters_unapplied ON dead_letters (moved_at, claim_id) WHERE NOT applied;
