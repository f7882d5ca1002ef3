-- Webhooks as delivered by the outbox worker. Nothing used the tables of 0001 yet, so they are
-- replaced rather than altered: the outbox keeps compact rows (a point or an event reference)
-- instead of rendered JSON, the authorization column gets its real name, and delivery times are
-- kept in milliseconds (backoff starts at one second, with jitter).
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_outbox;
DROP TABLE webhooks;

CREATE TABLE webhooks (
    id_webhook           TEXT PRIMARY KEY NOT NULL,
    id_group             TEXT NOT NULL REFERENCES groups (id_group),
    label                TEXT NOT NULL,
    forwarding_type      TEXT NOT NULL CHECK (forwarding_type IN ('measurements', 'events')),
    formatter            TEXT NOT NULL,
    url                  TEXT NOT NULL,
    authorization_header TEXT,
    secret               TEXT NOT NULL,
    is_active            INTEGER NOT NULL DEFAULT 1,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    created_by           TEXT
);
CREATE INDEX webhooks_group ON webhooks (id_group, forwarding_type);

-- One row per record to forward, written in the transaction that stores the record. No foreign
-- key on the webhook: an ingest batch routed just before the webhook was deleted must still
-- commit; the worker drops rows whose webhook is gone.
CREATE TABLE webhook_outbox (
    id_outbox     INTEGER PRIMARY KEY,
    id_webhook    TEXT NOT NULL,
    container_key INTEGER,
    seconds       INTEGER,
    microseconds  INTEGER,
    value         REAL,
    id_event      INTEGER
);
CREATE INDEX webhook_outbox_webhook ON webhook_outbox (id_webhook, id_outbox);

-- A batch cut from the outbox: its body and delivery id never change across retries.
CREATE TABLE webhook_deliveries (
    id_delivery      TEXT PRIMARY KEY NOT NULL,
    id_webhook       TEXT NOT NULL REFERENCES webhooks (id_webhook) ON DELETE CASCADE,
    body             BLOB NOT NULL,
    content_type     TEXT NOT NULL,
    item_count       INTEGER NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('pending', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_ms  INTEGER NOT NULL,
    created_ms       INTEGER NOT NULL,
    finished_at      INTEGER
);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (id_webhook, state, created_ms);

CREATE TABLE webhook_attempts (
    id_attempt    INTEGER PRIMARY KEY AUTOINCREMENT,
    id_webhook    TEXT NOT NULL REFERENCES webhooks (id_webhook) ON DELETE CASCADE,
    id_delivery   TEXT NOT NULL,
    attempted_at  INTEGER NOT NULL,
    status_code   INTEGER,
    duration_ms   INTEGER NOT NULL,
    error         TEXT,
    item_count    INTEGER NOT NULL,
    attempt       INTEGER NOT NULL
);
CREATE INDEX webhook_attempts_webhook ON webhook_attempts (id_webhook, attempted_at);
