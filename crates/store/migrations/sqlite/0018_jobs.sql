-- Jobs (docs/api.md, "Jobs"): an operation over devices resolved at creation, one execution per
-- device. The job row keeps the counts of its executions by status, changed in the transaction
-- that changes an execution, and which node runs it until when (a lease, taken over by another
-- node once it ran out, as webhook lanes are).
CREATE TABLE jobs (
    id_job                TEXT PRIMARY KEY NOT NULL,
    label                 TEXT NOT NULL,
    kind                  TEXT NOT NULL,
    operation             TEXT NOT NULL,
    target                TEXT NOT NULL,
    status                TEXT NOT NULL,
    total                 INTEGER NOT NULL,
    pending               INTEGER NOT NULL,
    in_progress           INTEGER NOT NULL DEFAULT 0,
    succeeded             INTEGER NOT NULL DEFAULT 0,
    failed                INTEGER NOT NULL DEFAULT 0,
    timed_out             INTEGER NOT NULL DEFAULT 0,
    cancelled             INTEGER NOT NULL DEFAULT 0,
    created_at            INTEGER NOT NULL,
    created_by            TEXT,
    started_at            INTEGER,
    finished_at           INTEGER,
    rate_per_minute       INTEGER NOT NULL,
    max_failures_percent  INTEGER NOT NULL,
    timeout_s             INTEGER NOT NULL,
    expires_at            INTEGER NOT NULL,
    -- Executions started so far and when the first one did (milliseconds): the pacing.
    dispatched            INTEGER NOT NULL DEFAULT 0,
    started_ms            INTEGER,
    node_id               TEXT,
    lease_until           INTEGER
);
CREATE INDEX jobs_created ON jobs (created_at, id_job);
CREATE INDEX jobs_open ON jobs (finished_at, status);

-- The groups a job targets: it is visible to whoever sees every one of them.
CREATE TABLE job_groups (
    id_job    TEXT NOT NULL REFERENCES jobs (id_job),
    id_group  TEXT NOT NULL,
    PRIMARY KEY (id_job, id_group)
);
CREATE INDEX job_groups_group ON job_groups (id_group);

-- One execution per targeted device; `runner` names the process that started its current
-- attempt, so that another one (a take-over, a restart) knows the outcome was not recorded.
CREATE TABLE job_executions (
    id_job              TEXT NOT NULL REFERENCES jobs (id_job),
    id_physical_device  TEXT NOT NULL,
    seq                 INTEGER NOT NULL,
    gateway             TEXT NOT NULL,
    status              TEXT NOT NULL,
    attempts            INTEGER NOT NULL DEFAULT 0,
    started_at          INTEGER,
    finished_at         INTEGER,
    deadline            INTEGER,
    result              TEXT,
    twin_version        INTEGER,
    runner              TEXT,
    PRIMARY KEY (id_job, id_physical_device)
);
CREATE INDEX job_executions_status ON job_executions (id_job, status, seq);
-- A device's report ends its twin executions in progress at once.
CREATE INDEX job_executions_device ON job_executions (id_physical_device, status);
