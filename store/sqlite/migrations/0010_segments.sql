-- Segments: how many parts a first-come promotion's stock is split into,
-- each on its own Redis hash tag (and so, in a Redis Cluster, on its own
-- master). 1 — one part, the promotion's own hash tag — for every
-- promotion made before this migration.

ALTER TABLE promotions ADD COLUMN segments INTEGER NOT NULL DEFAULT 1;
