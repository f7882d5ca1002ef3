-- Each group's own retention (docs/operations.md, "Retention"): how many days raw points and
-- each rollup are kept; NULL keeps them forever. A group without a row follows the service's
-- defaults (DEVICECLOUD_RETENTION_*_DAYS).
CREATE TABLE group_retention (
    id_group     TEXT PRIMARY KEY NOT NULL REFERENCES groups (id_group),
    raw_days     BIGINT,
    minute_days  BIGINT,
    hour_days    BIGINT,
    day_days     BIGINT,
    updated_at   BIGINT NOT NULL
);

-- Raw points and rollups become tables partitioned by time, so that expiry drops whole
-- partitions instead of deleting rows. Partition widths (seconds): raw points one day, minute
-- rollups 7 days, hour rollups 91 days, day rollups 364 days, aligned on the Unix epoch; the
-- service makes the partitions of the coming slots ahead (store/src/partitions.rs, the same
-- names and widths). A row outside every partition (a clock years off) lands in the default
-- partition. Existing rows are moved into partitions made for the slots they fall in.
CREATE FUNCTION pg_temp.partition_by_time(tbl text, col text, width bigint, key text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    old text := tbl || '_unpartitioned';
    slot bigint;
    lowest bigint := 946684800;  -- 2000-01-01: older rows go to the default partition
    highest bigint := extract(epoch FROM now())::bigint + 400 * 86400;
BEGIN
    EXECUTE format('ALTER TABLE %I RENAME TO %I', tbl, old);
    EXECUTE format('ALTER INDEX %I RENAME TO %I', tbl || '_pkey', old || '_pkey');
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS, PRIMARY KEY (%s)) PARTITION BY RANGE (%I)',
        tbl, old, key, col);
    EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', tbl || '_default', tbl);
    FOR slot IN EXECUTE format(
        'SELECT DISTINCT div(%I, $1) FROM %I WHERE %I >= $2 AND %I < $3', col, old, col, col)
        USING width, lowest, highest
    LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%s) TO (%s)',
            tbl || '_' || to_char(to_timestamp(slot * width) AT TIME ZONE 'UTC', 'YYYYMMDD'),
            tbl, slot * width, (slot + 1) * width);
    END LOOP;
    EXECUTE format('INSERT INTO %I SELECT * FROM %I', tbl, old);
    EXECUTE format('DROP TABLE %I', old);
END
$$;

DROP INDEX raw_points_session;
SELECT pg_temp.partition_by_time('raw_points', 'seconds', 86400, 'container_key, seconds, microseconds');
CREATE INDEX raw_points_session ON raw_points (session_key, seconds) WHERE session_key IS NOT NULL;
SELECT pg_temp.partition_by_time('rollup_minute', 'bucket', 604800, 'container_key, bucket');
SELECT pg_temp.partition_by_time('rollup_hour', 'bucket', 7862400, 'container_key, bucket');
SELECT pg_temp.partition_by_time('rollup_day', 'bucket', 31449600, 'container_key, bucket');
