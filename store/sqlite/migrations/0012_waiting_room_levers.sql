-- The waiting room's levers an operator changes while the line runs:
-- waiting_room_max_active caps the passes live at once (0: no cap),
-- waiting_room_message is shown to everyone in line ('' for none),
-- waiting_room_pow_difficulty asks each join for a proof of work of that
-- many leading zero bits (0: none). The admission rate,
-- waiting_room_admit_per_second, may change too. None of them for the
-- promotions made before this migration.

ALTER TABLE promotions ADD COLUMN waiting_room_max_active INTEGER NOT NULL DEFAULT 0;
ALTER TABLE promotions ADD COLUMN waiting_room_message TEXT NOT NULL DEFAULT '';
ALTER TABLE promotions ADD COLUMN waiting_room_pow_difficulty INTEGER NOT NULL DEFAULT 0;
