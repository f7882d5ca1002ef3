-- Each group's own retention (docs/operations.md, "Retention"): how many days raw points and
-- each rollup are kept; NULL keeps them forever. A group without a row follows the service's
-- defaults (DEVICECLOUD_RETENTION_*_DAYS).
CREATE TABLE group_retention (
    id_group     TEXT PRIMARY KEY NOT NULL REFERENCES groups (id_group),
    raw_days     INTEGER,
    minute_days  INTEGER,
    hour_days    INTEGER,
    day_days     INTEGER,
    updated_at   INTEGER NOT NULL
);
