-- What operators keep: archived promotions (left out of the default list),
-- the audit log of admin actions (who, what, when, the answer; never a
-- secret), and the admin tokens issued through the API, kept by name and
-- SHA-256 only.

ALTER TABLE promotions ADD COLUMN archived_at timestamptz;

-- The list sorted by creation time pages on (created_at, id).
CREATE INDEX promotions_by_created ON promotions (created_at, id);

CREATE TABLE audit_log (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at           timestamptz NOT NULL DEFAULT now(),
    actor        text        NOT NULL,
    action       text        NOT NULL,
    promotion_id text        NOT NULL DEFAULT '',
    detail       jsonb       NOT NULL DEFAULT '{}',
    status       integer     NOT NULL
);

CREATE TABLE admin_tokens (
    name       text        NOT NULL PRIMARY KEY,
    sha256     text        NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text        NOT NULL
);

-- EraseUser finds every row of one user across promotions.
CREATE INDEX issued_by_user ON issued (user_id);
CREATE INDEX dead_letters_by_user ON dead_letters (user_id);
