-- A series' closed points packed into chunks, one row a chunk (store/src/chunks; docs/operations.md,
-- "Compressed chunks"): the times and values of up to 10,000 points of one series, one UTC day
-- and one data session at most, packed column-wise. Recent points stay rows of `raw_points`
-- until the packer moves them here.
CREATE TABLE point_chunks (
    container_key  BIGINT NOT NULL,
    first_us       BIGINT NOT NULL,
    last_us        BIGINT NOT NULL,
    points         BIGINT NOT NULL,
    session_key    BIGINT,
    payload        BYTEA NOT NULL,
    PRIMARY KEY (container_key, first_us)
);
CREATE INDEX point_chunks_session ON point_chunks (session_key, first_us) WHERE session_key IS NOT NULL;
-- The payload is packed already: TOAST keeps it out of line without trying to compress it again.
ALTER TABLE point_chunks ALTER COLUMN payload SET STORAGE EXTERNAL;

-- The time of a series' newest packed point: a point sent again at or before it may be in a
-- chunk, which the ingest path then looks in (a resend is stored once).
ALTER TABLE containers ADD COLUMN packed_until_us BIGINT;
