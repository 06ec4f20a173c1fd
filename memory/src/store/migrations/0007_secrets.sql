-- 7: secrets people supplied through the API (never through a model);
-- tools receive them by reference (e.g. as environment variables of Shell)
CREATE TABLE user_secrets (
    owner      TEXT NOT NULL,
    name       TEXT NOT NULL,
    value      TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (owner, name)
) WITHOUT ROWID;
