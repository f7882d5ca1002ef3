-- The whole devicecloud schema for SQLite (the embedded default).
-- Identifiers are UUID text; times are Unix seconds (INTEGER); flags are 0/1 integers.
-- Hot tables (raw points, rollups) are WITHOUT ROWID and clustered by (container, time).

CREATE TABLE groups (
    id_group    TEXT PRIMARY KEY NOT NULL,
    label       TEXT NOT NULL,
    type        TEXT NOT NULL DEFAULT '0',
    subtype     TEXT NOT NULL DEFAULT '',
    id_country  TEXT,
    created_at  INTEGER NOT NULL,
    deleted_at  INTEGER
);
CREATE INDEX groups_created ON groups (created_at, id_group);

CREATE TABLE accounts (
    id_user        TEXT PRIMARY KEY NOT NULL,
    username       TEXT NOT NULL,
    password_hash  TEXT NOT NULL,
    is_admin       INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL
);
CREATE UNIQUE INDEX accounts_username ON accounts (lower(username));

CREATE TABLE api_clients (
    client_id    TEXT PRIMARY KEY NOT NULL,
    name         TEXT NOT NULL,
    secret_hash  TEXT NOT NULL,
    created_at   INTEGER NOT NULL
);

CREATE TABLE access_tokens (
    token_hash    TEXT PRIMARY KEY NOT NULL,
    refresh_hash  TEXT NOT NULL UNIQUE,
    id_user       TEXT NOT NULL REFERENCES accounts (id_user) ON DELETE CASCADE,
    client_id     TEXT NOT NULL REFERENCES api_clients (client_id) ON DELETE CASCADE,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
);
CREATE INDEX access_tokens_expiry ON access_tokens (expires_at);

CREATE TABLE memberships (
    id_group  TEXT NOT NULL REFERENCES groups (id_group) ON DELETE CASCADE,
    id_user   TEXT NOT NULL REFERENCES accounts (id_user) ON DELETE CASCADE,
    role      TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'manager')),
    PRIMARY KEY (id_user, id_group)
) WITHOUT ROWID;
CREATE INDEX memberships_group ON memberships (id_group);

CREATE TABLE physical_devices (
    id_physical_device         TEXT PRIMARY KEY NOT NULL,
    serial_hardware            TEXT NOT NULL,
    label                      TEXT NOT NULL DEFAULT '',
    id_parent                  TEXT REFERENCES physical_devices (id_physical_device),
    id_group                   TEXT NOT NULL REFERENCES groups (id_group),
    id_device_type             TEXT NOT NULL,
    id_iot_device              TEXT,
    kind                       TEXT,
    is_connected               INTEGER NOT NULL DEFAULT 0,
    expected_offline_interval  INTEGER NOT NULL DEFAULT 3600,
    expected_live_status       INTEGER NOT NULL DEFAULT 0,
    device_status              INTEGER NOT NULL DEFAULT 0,
    connection                 TEXT NOT NULL DEFAULT '',
    created_at                 INTEGER NOT NULL,
    last_data_at               INTEGER,
    signal                     INTEGER,
    commissioned_at            INTEGER,
    calibrated_at              INTEGER,
    reconnected_at             INTEGER,
    platform_software_version  TEXT NOT NULL DEFAULT '',
    app_software_version       TEXT NOT NULL DEFAULT '',
    archived_serial            TEXT,
    archived_at                INTEGER,
    archived_by                TEXT,
    device_token_hash          TEXT,
    wifi_enabled               INTEGER NOT NULL DEFAULT 1,
    location_json              TEXT,
    sim_json                   TEXT,
    modbus_template_json       TEXT,
    device_info_json           TEXT,
    device_info_at             INTEGER,
    last_disconnect_at         INTEGER
);
CREATE UNIQUE INDEX physical_devices_serial ON physical_devices (serial_hardware) WHERE archived_at IS NULL;
CREATE INDEX physical_devices_group ON physical_devices (id_group, created_at);
CREATE INDEX physical_devices_parent ON physical_devices (id_parent);

CREATE TABLE iot_devices (
    id_iot_device       TEXT PRIMARY KEY NOT NULL,
    id_physical_device  TEXT NOT NULL REFERENCES physical_devices (id_physical_device),
    protocol            TEXT NOT NULL DEFAULT 'mqtt',
    client_identifier   TEXT NOT NULL DEFAULT '',
    node_id             TEXT,
    last_connect_at     INTEGER,
    last_disconnect_at  INTEGER
);

CREATE TABLE modbus_template_history (
    id_template         INTEGER PRIMARY KEY AUTOINCREMENT,
    id_physical_device  TEXT NOT NULL REFERENCES physical_devices (id_physical_device),
    template_json       TEXT NOT NULL,
    received_at         INTEGER NOT NULL
);
CREATE INDEX modbus_template_history_device ON modbus_template_history (id_physical_device, received_at);

CREATE TABLE data_sessions (
    session_key         INTEGER PRIMARY KEY AUTOINCREMENT,
    id_data_session     TEXT NOT NULL UNIQUE,
    id_group            TEXT NOT NULL REFERENCES groups (id_group),
    id_physical_device  TEXT NOT NULL REFERENCES physical_devices (id_physical_device),
    id_person           TEXT,
    label               TEXT NOT NULL DEFAULT '',
    start               INTEGER NOT NULL,
    "end"               INTEGER,
    created_at          INTEGER NOT NULL,
    created_by          TEXT,
    updated_at          INTEGER NOT NULL,
    updated_by          TEXT,
    archived_at         INTEGER,
    datapoint_count     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX data_sessions_group ON data_sessions (id_group, start);
CREATE INDEX data_sessions_device ON data_sessions (id_physical_device, "end");

-- A container is one (group, source device, datatype) series; its integer key keeps raw rows small.
CREATE TABLE containers (
    container_key            INTEGER PRIMARY KEY AUTOINCREMENT,
    id_container_data_latest TEXT NOT NULL UNIQUE,
    id_group                 TEXT NOT NULL REFERENCES groups (id_group),
    source_device            TEXT NOT NULL REFERENCES physical_devices (id_physical_device),
    datatype                 INTEGER NOT NULL,
    latest_seconds           INTEGER,
    latest_microseconds      INTEGER,
    latest_value             REAL,
    UNIQUE (id_group, source_device, datatype)
);

CREATE TABLE raw_points (
    container_key  INTEGER NOT NULL,
    seconds        INTEGER NOT NULL,
    microseconds   INTEGER NOT NULL,
    value          REAL NOT NULL,
    session_key    INTEGER,
    PRIMARY KEY (container_key, seconds, microseconds)
) WITHOUT ROWID;
CREATE INDEX raw_points_session ON raw_points (session_key, seconds) WHERE session_key IS NOT NULL;

CREATE TABLE rollup_minute (
    container_key INTEGER NOT NULL, bucket INTEGER NOT NULL,
    min_val REAL NOT NULL, max_val REAL NOT NULL, sum_val REAL NOT NULL, count_val INTEGER NOT NULL,
    PRIMARY KEY (container_key, bucket)
) WITHOUT ROWID;
CREATE TABLE rollup_hour (
    container_key INTEGER NOT NULL, bucket INTEGER NOT NULL,
    min_val REAL NOT NULL, max_val REAL NOT NULL, sum_val REAL NOT NULL, count_val INTEGER NOT NULL,
    PRIMARY KEY (container_key, bucket)
) WITHOUT ROWID;
CREATE TABLE rollup_day (
    container_key INTEGER NOT NULL, bucket INTEGER NOT NULL,
    min_val REAL NOT NULL, max_val REAL NOT NULL, sum_val REAL NOT NULL, count_val INTEGER NOT NULL,
    PRIMARY KEY (container_key, bucket)
) WITHOUT ROWID;

CREATE TABLE events (
    id_event           INTEGER PRIMARY KEY AUTOINCREMENT,
    id_group           TEXT NOT NULL,
    source_device      TEXT NOT NULL,
    from_device        INTEGER,
    event_type         INTEGER NOT NULL,
    occurred_at        INTEGER NOT NULL,
    value              TEXT NOT NULL DEFAULT '',
    datatype           INTEGER,
    value_description  TEXT,
    created_at         INTEGER NOT NULL
);
CREATE INDEX events_group_time ON events (id_group, occurred_at);
CREATE INDEX events_device_time ON events (source_device, occurred_at);

CREATE TABLE webhooks (
    id_webhook          TEXT PRIMARY KEY NOT NULL,
    id_group            TEXT NOT NULL REFERENCES groups (id_group),
    label               TEXT NOT NULL,
    forwarding_type     TEXT NOT NULL CHECK (forwarding_type IN ('measurements', 'events')),
    formatter           TEXT NOT NULL,
    url                 TEXT NOT NULL,
    authorization_enc   TEXT,
    secret              TEXT NOT NULL,
    is_active           INTEGER NOT NULL DEFAULT 1,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    created_by          TEXT
);
CREATE INDEX webhooks_group ON webhooks (id_group, forwarding_type);

-- One row per record to forward, written in the ingest transaction; the worker cuts batches from it.
CREATE TABLE webhook_outbox (
    id_outbox    INTEGER PRIMARY KEY AUTOINCREMENT,
    id_webhook   TEXT NOT NULL REFERENCES webhooks (id_webhook) ON DELETE CASCADE,
    record_json  TEXT NOT NULL,
    created_at   INTEGER NOT NULL
);
CREATE INDEX webhook_outbox_webhook ON webhook_outbox (id_webhook, id_outbox);

CREATE TABLE webhook_deliveries (
    id_delivery      TEXT PRIMARY KEY NOT NULL,
    id_webhook       TEXT NOT NULL REFERENCES webhooks (id_webhook) ON DELETE CASCADE,
    body             BLOB NOT NULL,
    item_count       INTEGER NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    finished_at      INTEGER
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (id_webhook, created_at);

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
