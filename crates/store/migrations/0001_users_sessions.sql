-- Team mode, step 1: who may be signed in, and sign-ins in flight.
-- Portable SQL (SQLite and PostgreSQL): TEXT, BIGINT (times in unix seconds, flags 0/1),
-- BYTEA (sealed values; SQLite stores the bytes as-is).

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    is_admin BIGINT NOT NULL CHECK (is_admin IN (0, 1)),
    created_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL
);

-- A session is found by the SHA-256 of its cookie value; the cookie value itself is
-- never stored.
CREATE TABLE sessions (
    id_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX sessions_user_id ON sessions (user_id);

-- An OpenID Connect login between the redirect to the issuer and the callback, on any
-- instance: found by the SHA-256 of its `state`; the PKCE verifier sealed.
CREATE TABLE pending_logins (
    state_hash TEXT PRIMARY KEY,
    verifier BYTEA NOT NULL,
    nonce TEXT NOT NULL,
    return_path TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
