-- Team mode, step 10: a server's request for input (MCP elicitation) during a chat's
-- tool call, kept like a confirmation so that any instance can show and answer it.
-- The instance running the turn writes the request and polls for the answer; the
-- answer is written through whichever instance the person's page reaches.
--
-- `request` is sealed (server name, message, mode, requested schema or URL): a server
-- may put anything in its message. `content` is the person's accepted answer, sealed
-- too (a form may ask for anything, secrets included); NULL until accepted.
-- `action` is NULL until answered.
CREATE TABLE chat_elicitations (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    request BYTEA NOT NULL,
    action TEXT CHECK (action IN ('accept', 'decline', 'cancel')),
    content BYTEA,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX chat_elicitations_conversation ON chat_elicitations (conversation_id);
