-- Team mode: users are keyed by the issuer and its `sub` (an email is a display attribute
-- the issuer may reassign to another account). Rows from before this migration keep
-- issuer and subject empty until claimed (see `account.rs`); at most one such row per
-- email. SQLite: 0015_user_identity.sqlite.sql (the same schema, by a table rebuild).

ALTER TABLE users DROP CONSTRAINT users_email_key;
ALTER TABLE users ADD COLUMN issuer TEXT;
ALTER TABLE users ADD COLUMN subject TEXT;
ALTER TABLE users ADD CONSTRAINT users_identity_whole
    CHECK ((issuer IS NULL) = (subject IS NULL));
CREATE UNIQUE INDEX users_identity ON users (issuer, subject);
CREATE UNIQUE INDEX users_unclaimed_email ON users (email) WHERE subject IS NULL;
