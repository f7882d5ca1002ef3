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
CREATE FUNCTION pg_temp.partition_by_time(tbl text, col text, width bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    old text := tbl || '_unpartitioned';
    slot bigint;
    lowest bigint := 946684800;  -- 2000-01-01: older rows go to the default partition
    highest bigint := extract(epoch FROM now())::bigint + 400 * 86400;
BEGIN
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

ALTER TABLE raw_points RENAME TO raw_points_unpartitioned;
ALTER INDEX raw_points_pkey RENAME TO raw_points_unpartitioned_pkey;
ALTER INDEX raw_points_session RENAME TO raw_points_unpartitioned_session;
CREATE TABLE raw_points (
    container_key  BIGINT NOT NULL,
    seconds        BIGINT NOT NULL,
    microseconds   BIGINT NOT NULL,
    value          DOUBLE PRECISION NOT NULL,
    session_key    BIGINT,
    PRIMARY KEY (container_key, seconds, microseconds)
) PARTITION BY RANGE (seconds);
CREATE INDEX raw_points_session ON raw_points (session_key, seconds) WHERE session_key IS NOT NULL;
SELECT pg_temp.partition_by_time('raw_points', 'seconds', 86400);

ALTER TABLE rollup_minute RENAME TO rollup_minute_unpartitioned;
ALTER INDEX rollup_minute_pkey RENAME TO rollup_minute_unpartitioned_pkey;
CREATE TABLE rollup_minute (
    container_key BIGINT NOT NULL, bucket BIGINT NOT NULL,
    min_val DOUBLE PRECISION NOT NULL, max_val DOUBLE PRECISION NOT NULL, sum_val DOUBLE PRECISION NOT NULL, count_val BIGINT NOT NULL,
    PRIMARY KEY (container_key, bucket)
) PARTITION BY RANGE (bucket);
SELECT pg_temp.partition_by_time('rollup_minute', 'bucket', 604800);

ALTER TABLE rollup_hour RENAME TO rollup_hour_unpartitioned;
ALTER INDEX rollup_hour_pkey RENAME TO rollup_hour_unpartitioned_pkey;
CREATE TABLE rollup_hour (
    container_key BIGINT NOT NULL, bucket BIGINT NOT NULL,
    min_val DOUBLE PRECISION NOT NULL, max_val DOUBLE PRECISION NOT NULL, sum_val DOUBLE PRECISION NOT NULL, count_val BIGINT NOT NULL,
    PRIMARY KEY (container_key, bucket)
) PARTITION BY RANGE (bucket);
SELECT pg_temp.partition_by_time('rollup_hour', 'bucket', 7862400);

ALTER TABLE rollup_day RENAME TO rollup_day_unpartitioned;
ALTER INDEX rollup_day_pkey RENAME TO rollup_day_unpartitioned_pkey;
CREATE TABLE rollup_day (
    container_key BIGINT NOT NULL, bucket BIGINT NOT NULL,
    min_val DOUBLE PRECISION NOT NULL, max_val DOUBLE PRECISION NOT NULL, sum_val DOUBLE PRECISION NOT NULL, count_val BIGINT NOT NULL,
    PRIMARY KEY (container_key, bucket)
) PARTITION BY RANGE (bucket);
SELECT pg_temp.partition_by_time('rollup_day', 'bucket', 31449600);
