-- Team mode, step 11: MCP App sessions. A tool result in a team chat that links an MCP
-- App UI resource opens an app session here, so any instance serves the app's page and
-- answers its requests. The session names its user, chat, server (`server_kind` own or
-- catalog + `server_name`), tool call, `ui://` resource and the host methods the app may
-- use (`allowed`, a JSON list). `init` (the tool's arguments and result the app starts
-- with) is sealed: both carry whatever the tool was given or read. `csp_header` is the
-- sandbox's Content-Security-Policy, set when the page first opens the app (from the
-- resource's `_meta.ui.csp`). `after_seq` is the last message of the chat when the
-- session was made (where the page shows the app). `model_context` is the app's latest
-- `ui/update-model-context` (sealed), taken by the chat's next turn.

CREATE TABLE app_sessions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    server_kind TEXT NOT NULL CHECK (server_kind IN ('own', 'catalog')),
    server_name TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    call_id TEXT NOT NULL,
    resource_uri TEXT NOT NULL,
    allowed TEXT NOT NULL,
    init BYTEA NOT NULL,
    csp_header TEXT,
    model_context BYTEA,
    after_seq BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX app_sessions_conversation ON app_sessions (user_id, conversation_id, created_at);
