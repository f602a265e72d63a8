-- Team mode, the gateway: a call of a client on protocol 2026-07-28 that waits for the
-- client's answer to an upstream server's question (elicitation). The instance running
-- the upstream call keeps the call; the client's retry may reach any instance, which
-- writes the client's answer here, and the running instance takes it, relays on, and
-- writes the outcome here for the retrying instance to return.
--
-- `id` is the `requestState` handed to the client (random). `call_hash` is the SHA-256
-- (hex) of the call it belongs to (method and name): a retry of another call is refused
-- without the name stored in clear. `answer` (the client's inputResponses) and `outcome`
-- (the result, the error, or the next question) are sealed; NULL until written.
-- `taken_at` is set when the running instance takes the answer.
CREATE TABLE gateway_inputs (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    call_hash TEXT NOT NULL,
    answer BYTEA,
    taken_at BIGINT,
    outcome BYTEA,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX gateway_inputs_user ON gateway_inputs (user_id);
