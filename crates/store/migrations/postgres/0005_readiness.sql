-- The write probe of `/readyz` (docs/operations.md, "Probes"): each node upserts its row, so a
-- store that can be reached but not written (a full disk, a read-only file system, a replica)
-- reports not ready.
CREATE TABLE readiness_probe (
    node       TEXT PRIMARY KEY NOT NULL,
    probed_at  BIGINT NOT NULL
);
