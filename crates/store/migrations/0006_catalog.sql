-- Team mode, step 6: the team catalog. Admins publish MCP servers for everyone (HTTP/SSE,
-- or stdio commands that run on the server under the publishing admin's responsibility);
-- each user enables the ones they want and brings their own OAuth login.
--
-- Catalog servers are a namespace of their own, apart from a user's `mcp_servers`: their
-- tokens are in `catalog_oauth_tokens` (not `oauth_tokens`, whose rows belong to a user's
-- own server through a foreign key), so a catalog server and a user's server of the same
-- name never share a row, a token or a login.

CREATE TABLE catalog_servers (
    name TEXT PRIMARY KEY,
    transport TEXT NOT NULL CHECK (transport IN ('http', 'sse', 'stdio')),
    -- http/sse: the endpoint; NULL for stdio.
    url TEXT,
    -- stdio: the program, its arguments (a JSON array of strings) and working folder;
    -- NULL for http/sse.
    command TEXT,
    args TEXT,
    cwd TEXT,
    -- Sealed JSON objects (names to values), NULL when there are none: request headers
    -- (http/sse) and the complete environment of the process (stdio).
    headers BYTEA,
    env BYTEA,
    description TEXT NOT NULL,
    -- The admin who last published it (kept as NULL if that user is deleted).
    published_by TEXT REFERENCES users (id) ON DELETE SET NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    CHECK ((transport = 'stdio' AND command IS NOT NULL AND url IS NULL)
        OR (transport <> 'stdio' AND url IS NOT NULL AND command IS NULL))
);

-- Which users use which catalog servers: a row while enabled.
CREATE TABLE catalog_enablements (
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    catalog_name TEXT NOT NULL REFERENCES catalog_servers (name) ON DELETE CASCADE,
    enabled_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, catalog_name)
);

-- A user's own OAuth tokens for a catalog server they enabled (sealed), with the same
-- refresh lease as `oauth_tokens`. They go with the enablement: disabling the server or
-- unpublishing it removes them.
CREATE TABLE catalog_oauth_tokens (
    user_id TEXT NOT NULL,
    catalog_name TEXT NOT NULL,
    tokens BYTEA NOT NULL,
    expires_at BIGINT,
    updated_at BIGINT NOT NULL,
    refresh_holder TEXT,
    refresh_until BIGINT,
    PRIMARY KEY (user_id, catalog_name),
    FOREIGN KEY (user_id, catalog_name)
        REFERENCES catalog_enablements (user_id, catalog_name) ON DELETE CASCADE
);

-- A server login in flight is for the user's own server (0) or a catalog server (1).
ALTER TABLE pending_server_logins ADD COLUMN catalog BIGINT NOT NULL DEFAULT 0;
