-- Team mode, step 2: each user's MCP servers and the secrets that go with them. Every
-- row belongs to one user; every query names that user.

CREATE TABLE mcp_servers (
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    url TEXT NOT NULL,
    transport TEXT NOT NULL CHECK (transport IN ('http', 'sse')),
    -- A sealed JSON object of header names to values; NULL when there are none.
    headers BYTEA,
    enabled BIGINT NOT NULL CHECK (enabled IN (0, 1)),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, name)
);

-- The user's OAuth tokens for one of their servers (sealed). They go with the server:
-- removed with it, and when its URL changes.
CREATE TABLE oauth_tokens (
    user_id TEXT NOT NULL,
    server_name TEXT NOT NULL,
    tokens BYTEA NOT NULL,
    expires_at BIGINT,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, server_name),
    FOREIGN KEY (user_id, server_name) REFERENCES mcp_servers (user_id, name) ON DELETE CASCADE
);

-- The user's own model API key (sealed).
CREATE TABLE model_keys (
    user_id TEXT PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    provider TEXT NOT NULL,
    api_key BYTEA NOT NULL,
    updated_at BIGINT NOT NULL
);
