-- Team mode, step 7: the team server as an OAuth 2.1 authorization server for the MCP
-- clients of its gateway (`/mcp`). Every step of a client's authorization lives here, so
-- any instance answers any step. Codes and tokens are found by their SHA-256; the values
-- themselves are never stored.

-- A client registered itself (RFC 7591 dynamic registration; public clients only).
CREATE TABLE gateway_clients (
    client_id TEXT PRIMARY KEY,
    client_name TEXT NOT NULL,
    -- A JSON array of the checked redirect URIs (loopback http or https).
    redirect_uris TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

-- What a user approved for a client: the resource (the gateway's `/mcp` URL) and scope,
-- tied to the sign-in session that approved it, so ending that session (sign-out, on
-- one device or everywhere) ends the grant and every token of it.
CREATE TABLE gateway_grants (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL REFERENCES gateway_clients (client_id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    session_hash TEXT NOT NULL REFERENCES sessions (id_hash) ON DELETE CASCADE,
    resource TEXT NOT NULL,
    scope TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX gateway_grants_user_id ON gateway_grants (user_id);
CREATE INDEX gateway_grants_session_hash ON gateway_grants (session_hash);

-- An authorization code between the consent and the token request: taken once.
CREATE TABLE gateway_codes (
    code_hash TEXT PRIMARY KEY,
    grant_id TEXT NOT NULL REFERENCES gateway_grants (id) ON DELETE CASCADE,
    redirect_uri TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);

-- Access and refresh tokens of a grant. A refresh token is spent once (`used`); a spent
-- one presented again ends its whole grant (refresh-token reuse detection).
CREATE TABLE gateway_tokens (
    token_hash TEXT PRIMARY KEY,
    grant_id TEXT NOT NULL REFERENCES gateway_grants (id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    used BIGINT NOT NULL DEFAULT 0 CHECK (used IN (0, 1)),
    expires_at BIGINT NOT NULL
);
CREATE INDEX gateway_tokens_grant_id ON gateway_tokens (grant_id);
