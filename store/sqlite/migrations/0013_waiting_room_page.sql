-- The waiting room's queue page (GET /w/{id}): its title, colours, logo,
-- texts, return URL and mode, as the JSON of store.RoomPage. Empty for a
-- promotion made before this migration, or without settings: the page's
-- defaults.

ALTER TABLE promotions ADD COLUMN waiting_room_page TEXT NOT NULL DEFAULT '';
