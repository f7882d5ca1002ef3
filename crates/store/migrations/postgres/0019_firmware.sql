-- Firmware images (docs/api.md, "Firmware"). The bytes live in the store, not on a node's disk:
-- every node of a service serves every image, and a backup of the store holds them. They are
-- content-addressed: a blob is its sha256 and its size, its bytes in pieces of 256 KiB, so an
-- upload and a download never hold an image whole in memory, and two images of the same bytes
-- share one blob.
CREATE TABLE firmware_blobs (
    sha256      TEXT PRIMARY KEY NOT NULL,
    size        BIGINT NOT NULL,
    created_at  BIGINT NOT NULL
);

-- The pieces of a blob (`blob` its sha256), or of an upload in progress (`blob` "upload:<id>"),
-- renamed to the blob in the transaction that stores the image.
CREATE TABLE firmware_chunks (
    blob  TEXT NOT NULL,
    seq   BIGINT NOT NULL,
    data  BYTEA NOT NULL,
    PRIMARY KEY (blob, seq)
);

-- Uploads in progress: what a crash left half is removed after an hour.
CREATE TABLE firmware_uploads (
    id_upload   TEXT PRIMARY KEY NOT NULL,
    started_at  BIGINT NOT NULL
);

CREATE TABLE firmware (
    id_firmware  TEXT PRIMARY KEY NOT NULL,
    kind         TEXT NOT NULL,
    component    TEXT NOT NULL,
    version      TEXT NOT NULL,
    -- NULL: an image for every group.
    id_group     TEXT,
    -- The group, or '' for every group: what a version is unique within.
    scope        TEXT NOT NULL,
    size         BIGINT NOT NULL,
    sha256       TEXT NOT NULL REFERENCES firmware_blobs (sha256),
    signature    TEXT NOT NULL,
    manifest     TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    created_by   TEXT
);
CREATE UNIQUE INDEX firmware_version ON firmware (kind, component, version, scope);
CREATE INDEX firmware_created ON firmware (created_at, id_firmware);
CREATE INDEX firmware_blob ON firmware (sha256);

-- The image a firmware job installs: an image is not deleted while a job that has executions
-- left uses it.
ALTER TABLE jobs ADD COLUMN id_firmware TEXT;
CREATE INDEX jobs_firmware ON jobs (id_firmware);
