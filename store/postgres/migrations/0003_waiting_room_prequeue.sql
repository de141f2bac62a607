-- A waiting room's own abandonment time, and its opening moment: for
-- prequeue_seconds before starts_at joins are collected unordered and
-- shuffled once at the start, by a random seed whose SHA-256 the promotion
-- shows from its creation and which it reveals at the start. The seed is
-- NULL without a prequeue. Rooms that exist already keep the 120 s they had.

ALTER TABLE promotions
    ADD COLUMN waiting_room_abandon_after_seconds integer NOT NULL DEFAULT 0,
    ADD COLUMN waiting_room_prequeue_seconds      integer NOT NULL DEFAULT 0,
    ADD COLUMN waiting_room_prequeue_seed         bytea;

UPDATE promotions SET waiting_room_abandon_after_seconds = 120 WHERE waiting_room_enabled;
