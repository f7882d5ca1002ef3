-- On PostgreSQL, 0011 keeps a raw point's time in one column of microseconds. SQLite keeps
-- `seconds` and `microseconds`: its integers are variable-length, so a whole-second time takes
-- 4 bytes and its zero fraction none (store/src/point_time.rs). Nothing changes here; the
-- migration keeps the two databases' versions in step.
SELECT 1;
