-- What operators keep: archived promotions (left out of the default list),
-- the audit log of admin actions (who, what, when, the answer; never a
-- secret), and the admin tokens issued through the API, kept by name and
-- SHA-256 only. Times are stored like the others: UTC text, fixed width.

ALTER TABLE promotions ADD COLUMN archived_at TEXT;

-- The list sorted by creation time pages on (created_at, id).
CREATE INDEX promotions_by_created ON promotions (created_at, id);

CREATE TABLE audit_log (
    id           INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    at           TEXT    NOT NULL,
    actor        TEXT    NOT NULL,
    action       TEXT    NOT NULL,
    promotion_id TEXT    NOT NULL DEFAULT '',
    detail       TEXT    NOT NULL DEFAULT '{}',
    status       INTEGER NOT NULL
) STRICT;

CREATE TABLE admin_tokens (
    name       TEXT NOT NULL PRIMARY KEY,
    sha256     TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    created_by TEXT NOT NULL
) STRICT;

-- EraseUser finds every row of one user across promotions.
CREATE INDEX issued_by_user ON issued (user_id);
CREATE INDEX dead_letters_by_user ON dead_letters (user_id);
