-- The team gateway's connected clients: when a grant's access token last reached `/mcp`
-- (unix seconds; NULL until first used), shown to its user next to the Revoke button.
-- Written at most once a minute per grant.
ALTER TABLE gateway_grants ADD COLUMN last_used_at BIGINT;
