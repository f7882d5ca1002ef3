-- Signed-in browser sessions of the dashboard. The cookie carries a random token; only its
-- hash is stored, with the session's CSRF token and its absolute expiry.
CREATE TABLE dashboard_sessions (
    session_hash  TEXT PRIMARY KEY NOT NULL,
    id_user       TEXT NOT NULL REFERENCES accounts (id_user) ON DELETE CASCADE,
    csrf_token    TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL
);
CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expires_at);

-- The dashboard's device page reads the latest values of one device.
CREATE INDEX containers_source ON containers (source_device, datatype);
