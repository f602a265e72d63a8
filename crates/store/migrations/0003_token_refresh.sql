-- Team mode, step 3: one instance at a time refreshes a user's OAuth tokens. A refresh
-- takes a lease on the row (holder, until); only the holder's result is written, and a
-- lease left by a dead instance runs out.

ALTER TABLE oauth_tokens ADD COLUMN refresh_holder TEXT;
ALTER TABLE oauth_tokens ADD COLUMN refresh_until BIGINT;
