-- Team mode, step 9: saved workflows and their run logs, per user, so a team member can
-- keep, run and review workflows from any instance.

-- A user's workflow: its name (unique per user) and its YAML source, sealed (people
-- put URLs, keys and tokens into workflows).
CREATE TABLE workflows (
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    source BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, name)
);

-- One run of a user's workflow. Written when the run starts (`outcome` NULL while it
-- runs, until `deadline_at`; a row still without an outcome after it was left by a
-- stopped instance), finished with its outcome and run log (the run-log JSON, sealed:
-- it holds tool results and variables). `cancel_requested_at` is set by a cancel on any
-- instance and read by the instance running it. Only the newest runs of each user are
-- kept.
CREATE TABLE workflow_runs (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    workflow_name TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    deadline_at BIGINT NOT NULL,
    finished_at BIGINT,
    outcome TEXT CHECK (outcome IN ('ok', 'failed', 'cancelled')),
    cancel_requested_at BIGINT,
    log BYTEA
);
CREATE INDEX workflow_runs_user ON workflow_runs (user_id, started_at);
