-- Team mode: users are keyed by the issuer and its `sub` (an email is a display attribute
-- the issuer may reassign to another account). Rows from before this migration keep
-- issuer and subject empty until claimed (see `account.rs`); at most one such row per
-- email. SQLite cannot drop the UNIQUE on `email`, so the table is rebuilt: this file
-- runs with foreign keys off (`migrate.rs`), so dropping the old table deletes nothing
-- that refers to it, and the ids are kept, so every reference holds.
-- PostgreSQL: 0015_user_identity.postgres.sql.

CREATE TABLE users_new (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL,
    name TEXT NOT NULL,
    is_admin BIGINT NOT NULL CHECK (is_admin IN (0, 1)),
    created_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    issuer TEXT,
    subject TEXT,
    CONSTRAINT users_identity_whole CHECK ((issuer IS NULL) = (subject IS NULL))
);
INSERT INTO users_new (id, email, name, is_admin, created_at, last_seen_at)
    SELECT id, email, name, is_admin, created_at, last_seen_at FROM users;
DROP TABLE users;
ALTER TABLE users_new RENAME TO users;
CREATE UNIQUE INDEX users_identity ON users (issuer, subject);
CREATE UNIQUE INDEX users_unclaimed_email ON users (email) WHERE subject IS NULL;
