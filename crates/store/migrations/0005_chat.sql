-- Team mode, step 5: chats. Everything a chat turn needs lives here, so any instance
-- can answer and an instance killed mid-turn loses no saved message.

-- One conversation of one user. `server_toggles` is a JSON object of server names to
-- on/off for this chat (a server not named follows its own `enabled`); `approvals` is a
-- JSON object {"tools": [[server, tool]], "servers": [server]} of "always allow" answers
-- given in this chat. `cancel_requested_at` is set by a cancel on any instance and read
-- by the instance running the turn. `marker_nonce` names this chat's tag around server
-- text for the model (the same on every instance and turn; never sent to a server).
CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    marker_nonce TEXT NOT NULL,
    server_toggles TEXT NOT NULL,
    approvals TEXT NOT NULL,
    cancel_requested_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX conversations_user_id ON conversations (user_id, updated_at);

-- The messages of a conversation, in order (`seq` from 1). `content` is the model API's
-- content JSON (parts: text, function calls, function responses), sealed: a person
-- pastes secrets into a chat and tool results carry whatever the tool read.
CREATE TABLE chat_messages (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('user', 'model', 'tool')),
    content BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (conversation_id, seq)
);

-- A tool call waiting for its user's answer: asked by the instance running the turn,
-- answered through any instance (the decision written here, polled by the turn). The
-- request (server, tool, arguments) is sealed: arguments can carry secrets.
CREATE TABLE chat_confirmations (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    request BYTEA NOT NULL,
    decision TEXT CHECK (decision IN ('once', 'tool', 'server', 'cancel')),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX chat_confirmations_conversation ON chat_confirmations (conversation_id);

-- The team's model API key, set by an admin (one row, sealed); a user's own key in
-- `model_keys` wins over it.
CREATE TABLE team_model_key (
    slot TEXT PRIMARY KEY CHECK (slot = 'team'),
    provider TEXT NOT NULL,
    api_key BYTEA NOT NULL,
    set_by TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);
