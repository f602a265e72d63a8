-- Team mode, step 4: a user's OAuth login to one of their MCP servers, between the
-- popup's redirect to the authorization server and the callback, on any instance.
-- Found by the SHA-256 of its `state` together with the user it belongs to (a callback
-- arriving with another user's session finds nothing and uses nothing up); the PKCE
-- verifier sealed; bound to the server's name and the URL it had when the login began.

CREATE TABLE pending_server_logins (
    state_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    server_name TEXT NOT NULL,
    server_url TEXT NOT NULL,
    verifier BYTEA NOT NULL,
    -- Not secret: client id, token endpoint, redirect URI, resource, scopes (JSON).
    client TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX pending_server_logins_user_id ON pending_server_logins (user_id);
