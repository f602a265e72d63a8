-- Team mode, the gateway: the latest progress of a call that relays on one instance
-- while the client's retry waits on another (see 0013). The running instance writes each
-- progress it hears (`progress`: sealed JSON {progress, total, message}) and counts the
-- writes (`progress_seq`); the retrying instance sends the client each new one.
ALTER TABLE gateway_inputs ADD COLUMN progress BYTEA;
ALTER TABLE gateway_inputs ADD COLUMN progress_seq BIGINT NOT NULL DEFAULT 0;
