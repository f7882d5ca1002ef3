-- A series' closed points packed into chunks, one row a chunk (store/src/chunks; docs/operations.md,
-- "Compressed chunks"): the times and values of up to 10,000 points of one series, one UTC day
-- and one data session at most, packed column-wise. Recent points stay rows of `raw_points`
-- until the packer moves them here.
--
-- A rowid table, not WITHOUT ROWID: a chunk's payload runs to kilobytes, which SQLite keeps on
-- overflow pages of a rowid table without widening the key's B-tree.
CREATE TABLE point_chunks (
    container_key  INTEGER NOT NULL,
    first_us       INTEGER NOT NULL,
    last_us        INTEGER NOT NULL,
    points         INTEGER NOT NULL,
    session_key    INTEGER,
    payload        BLOB NOT NULL,
    PRIMARY KEY (container_key, first_us)
);
CREATE INDEX point_chunks_session ON point_chunks (session_key, first_us) WHERE session_key IS NOT NULL;

-- The time of a series' newest packed point: a point sent again at or before it may be in a
-- chunk, which the ingest path then looks in (a resend is stored once).
ALTER TABLE containers ADD COLUMN packed_until_us INTEGER;
