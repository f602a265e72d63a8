-- The team gateway's dynamic registration, bounded: a client that registered and was
-- never approved by anyone is *pending* (`granted_at` NULL); the store keeps at most a
-- fixed number of pending clients, purging the oldest first (`registered_us`, the
-- registration time in microseconds, orders them; seconds would tie within a burst).
-- A client is marked granted at its first approval and is never pending again. Clients
-- that identify themselves with a Client ID Metadata Document (their `client_id` is the
-- document's URL) get a row only when a user approves them, already marked granted.
ALTER TABLE gateway_clients ADD COLUMN granted_at BIGINT;
ALTER TABLE gateway_clients ADD COLUMN registered_us BIGINT NOT NULL DEFAULT 0;
UPDATE gateway_clients SET registered_us = created_at * 1000000;
UPDATE gateway_clients SET granted_at = created_at
    WHERE client_id IN (SELECT client_id FROM gateway_grants);
CREATE INDEX gateway_clients_pending ON gateway_clients (granted_at, registered_us);
