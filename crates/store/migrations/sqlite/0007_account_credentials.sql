-- Accounts (docs/api.md, "Accounts"): an administrator can disable an account; a disabled account
-- cannot sign in and its tokens and dashboard sessions end.
ALTER TABLE accounts ADD COLUMN disabled BIGINT NOT NULL DEFAULT 0;
-- A disabled account or a changed password ends every token and session of the account at once:
-- both are found by account. (A token pair's `created_at` is its password grant: refreshes only
-- move `expires_at`, so it also bounds how long refreshes may go on.)
CREATE INDEX access_tokens_user ON access_tokens (id_user);
CREATE INDEX dashboard_sessions_user ON dashboard_sessions (id_user);
