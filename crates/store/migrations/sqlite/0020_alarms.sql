-- Alarm rules and alarms (docs/api.md, "Alarms").
CREATE TABLE alarm_rules (
    id_alarm_rule    TEXT PRIMARY KEY NOT NULL,
    id_group         TEXT NOT NULL REFERENCES groups (id_group),
    label            TEXT NOT NULL,
    severity         TEXT NOT NULL,
    -- A CEL expression; NULL for an inactivity rule.
    condition        TEXT,
    clear_condition  TEXT,
    inactivity_s     INTEGER,
    datatype         INTEGER,
    source_device    TEXT,
    for_s            INTEGER NOT NULL DEFAULT 0,
    is_active        INTEGER NOT NULL DEFAULT 1,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    created_by       TEXT
);
CREATE INDEX alarm_rules_group ON alarm_rules (id_group, created_at);

-- Counts the changes of any rule: every node reads its rules again when it moves.
CREATE TABLE alarm_rule_changes (
    id       INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
    version  INTEGER NOT NULL
);
INSERT INTO alarm_rule_changes (id, version) VALUES (1, 0);

CREATE TABLE alarms (
    id_alarm         TEXT PRIMARY KEY NOT NULL,
    id_alarm_rule    TEXT NOT NULL,
    id_group         TEXT NOT NULL,
    source_device    TEXT NOT NULL,
    -- NULL: an inactivity alarm over every datatype.
    datatype         INTEGER,
    severity         TEXT NOT NULL,
    status           TEXT NOT NULL,
    raised_at        INTEGER NOT NULL,
    acknowledged_at  INTEGER,
    acknowledged_by  TEXT,
    cleared_at       INTEGER,
    value            REAL,
    count            INTEGER NOT NULL,
    -- "<rule> <device> <datatype>" while the alarm is not cleared, then NULL: at most one alarm
    -- not cleared per (rule, device, datatype), whichever node raises it.
    open_key         TEXT UNIQUE
);
CREATE INDEX alarms_group ON alarms (id_group, raised_at);
CREATE INDEX alarms_device ON alarms (source_device, raised_at);
CREATE INDEX alarms_rule ON alarms (id_alarm_rule, cleared_at);

-- Since when a rule's condition has held on every point of a series, for a rule with `for_s`:
-- kept so that a restart goes on counting.
CREATE TABLE alarm_holds (
    id_alarm_rule  TEXT NOT NULL,
    container_key  INTEGER NOT NULL,
    since_us       INTEGER NOT NULL,
    PRIMARY KEY (id_alarm_rule, container_key)
);
