-- A raw point keeps its time in one BIGINT, microseconds since the Unix epoch, instead of
-- whole seconds and microseconds in two: PostgreSQL's integers are fixed-width and its rows
-- aligned to 8 bytes, so this makes a point's row 48 bytes instead of 56 and its key entry 24
-- instead of 32 (store/src/point_time.rs; docs/operations.md, "Retention", gives the bytes a
-- point takes). SQLite keeps two columns: its integers are variable-length.
--
-- The table stays partitioned by time, a day a partition, under the same partition names; the
-- bounds are now in microseconds. Existing rows are copied into the new table, then the key
-- and the session index are built, which is faster than keeping them up to date row by row.
ALTER TABLE raw_points RENAME TO raw_points_wide;
DROP INDEX raw_points_session;

CREATE TABLE raw_points (
    container_key  BIGINT NOT NULL,
    time_us        BIGINT NOT NULL,
    value          DOUBLE PRECISION NOT NULL,
    session_key    BIGINT
) PARTITION BY RANGE (time_us);

DO $$
DECLARE
    part record;
    bound text[];
BEGIN
    FOR part IN
        SELECT c.relname::text AS name, pg_get_expr(c.relpartbound, c.oid) AS spec
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'raw_points_wide'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %I RENAME TO %I', part.name, part.name || '_wide');
        IF part.spec = 'DEFAULT' THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF raw_points DEFAULT', part.name);
        ELSE
            bound := regexp_match(part.spec, 'FROM \(''?(-?[0-9]+)''?\) TO \(''?(-?[0-9]+)''?\)');
            EXECUTE format('CREATE TABLE %I PARTITION OF raw_points FOR VALUES FROM (%s) TO (%s)',
                part.name, bound[1]::bigint * 1000000, bound[2]::bigint * 1000000);
        END IF;
    END LOOP;
END
$$;

INSERT INTO raw_points (container_key, time_us, value, session_key)
    SELECT container_key, seconds * 1000000 + microseconds, value, session_key FROM raw_points_wide;
DROP TABLE raw_points_wide;

ALTER TABLE raw_points ADD PRIMARY KEY (container_key, time_us) WITH (fillfactor = 100);
CREATE INDEX raw_points_session ON raw_points (session_key, time_us) WHERE session_key IS NOT NULL;

-- Rows every ingest transaction updates (a series' latest value, a device's last data, the
-- rollups of the current minute, hour and day) leave half of each page free, so that their next
-- version fits on the same page: a heap-only update then writes no index entry
-- (store/src/partitions.rs makes new rollup partitions the same way).
ALTER TABLE containers SET (fillfactor = 50);
ALTER TABLE physical_devices SET (fillfactor = 50);
DO $$
DECLARE
    part text;
BEGIN
    FOR part IN
        SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent IN ('rollup_minute'::regclass, 'rollup_hour'::regclass, 'rollup_day'::regclass)
    LOOP
        EXECUTE format('ALTER TABLE %I SET (fillfactor = 50)', part);
    END LOOP;
END
$$;
