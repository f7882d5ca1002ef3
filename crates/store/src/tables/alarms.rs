//! Alarms (docs/api.md, "Alarms"): raised, counted, acknowledged and cleared, each change with
//! its event (230, 231, 232) in the same transaction, routed to the group's events webhooks.
//!
//! At most one alarm per (rule, device, datatype) is not cleared: its `open_key` is unique and
//! set to NULL when it clears, so two nodes raising the same alarm at once make one, the second
//! adding to its count (a match) or leaving it be (an inactivity).

use devicecloud_query::{AttrKind, Attribute, SortKey};

use crate::chunks;
use crate::collection::{Column, ListArgs, Listing, Table, attributes, names, same_name};
use crate::database::db::{Db, Tx, values};
use crate::database::{Result, new_id};
use crate::sql::lists::in_list;
use crate::tables::alarm_rules::Cleared;
use crate::tables::events::{self, EventRow, NewEvent};
use crate::tables::webhooks::{RouteTable, Routes};

/// Event 230: an alarm was raised (value: its severity).
pub const RAISED: i64 = 230;
/// Event 231: an alarm was acknowledged.
pub const ACKNOWLEDGED: i64 = 231;
/// Event 232: an alarm cleared.
pub const CLEARED: i64 = 232;

/// A stored alarm.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct AlarmRow {
    pub id_alarm: String,
    pub id_alarm_rule: String,
    pub id_group: String,
    pub source_device: String,
    pub datatype: Option<i64>,
    pub severity: String,
    pub status: String,
    pub raised_at: i64,
    pub acknowledged_at: Option<i64>,
    pub acknowledged_by: Option<String>,
    pub cleared_at: Option<i64>,
    #[serde(deserialize_with = "crate::collection::optional_real")]
    pub value: Option<f64>,
    pub count: i64,
}

const TABLE: &str = "alarms";

/// The filterable and sortable attributes of the alarm collection.
pub const COLUMNS: [Column; 13] = [
    same_name(TABLE, "id_alarm", AttrKind::String),
    same_name(TABLE, "id_alarm_rule", AttrKind::String),
    same_name(TABLE, "id_group", AttrKind::String),
    same_name(TABLE, "source_device", AttrKind::String),
    same_name(TABLE, "datatype", AttrKind::Integer),
    same_name(TABLE, "severity", AttrKind::String),
    same_name(TABLE, "status", AttrKind::String),
    same_name(TABLE, "raised_at", AttrKind::Integer),
    same_name(TABLE, "acknowledged_at", AttrKind::Integer),
    same_name(TABLE, "acknowledged_by", AttrKind::String),
    same_name(TABLE, "cleared_at", AttrKind::Integer),
    same_name(TABLE, "value", AttrKind::Number),
    same_name(TABLE, "count", AttrKind::Integer),
];
/// The filter attributes of the alarm collection.
pub const ATTRIBUTES: [Attribute; 13] = attributes(&COLUMNS);
/// The sortable attributes of the alarm collection.
pub const SORTABLE: [&str; 13] = names(&COLUMNS);

/// The alarms, newest first.
static ALARMS: Table<AlarmRow> = Table::new(TABLE, &COLUMNS, &[], SortKey::desc("raised_at"), &[COLUMNS[0]]);

const COLS: &str = "id_alarm, id_alarm_rule, id_group, source_device, datatype, severity, status, raised_at, \
                    acknowledged_at, acknowledged_by, cleared_at, value, count";

/// The key that is unique while an alarm is not cleared.
fn open_key(rule: &str, device: &str, datatype: Option<i64>) -> String {
    match datatype {
        Some(d) => format!("{rule} {device} {d}"),
        None => format!("{rule} {device} *"),
    }
}

/// An alarm by id.
pub async fn get(db: &Db, id: &str) -> Result<Option<AlarmRow>> {
    let sql = format!("SELECT {COLS} FROM alarms WHERE id_alarm = $1");
    db.row(sqlx::AssertSqlSafe(sql), values![id]).await
}

/// A page of the alarms of the groups `args` allows.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<AlarmRow>> {
    ALARMS.scoped(db, args).await
}

/// The alarms not cleared of `devices`.
pub async fn open_of<S: AsRef<str>>(db: &Db, devices: &[S]) -> Result<Vec<AlarmRow>> {
    let mut out = Vec::new();
    for part in devices.chunks(crate::sql::lists::ROWS_PER_STATEMENT) {
        let (marks, values) = in_list(part);
        let sql = format!("SELECT {COLS} FROM alarms WHERE open_key IS NOT NULL AND source_device IN ({marks})");
        out.extend(db.rows::<AlarmRow>(sqlx::AssertSqlSafe(sql), values).await?);
    }
    Ok(out)
}

/// The alarms not cleared of the rules `rules`.
pub async fn open_of_rules<S: AsRef<str>>(db: &Db, rules: &[S]) -> Result<Vec<AlarmRow>> {
    let mut out = Vec::new();
    for part in rules.chunks(crate::sql::lists::ROWS_PER_STATEMENT) {
        let (marks, values) = in_list(part);
        let sql = format!("SELECT {COLS} FROM alarms WHERE open_key IS NOT NULL AND id_alarm_rule IN ({marks})");
        out.extend(db.rows::<AlarmRow>(sqlx::AssertSqlSafe(sql), values).await?);
    }
    Ok(out)
}

/// The event of a change of `alarm`.
fn event_of<'a>(alarm: &'a AlarmRow, code: i64, at: i64, label: Option<&'a str>) -> NewEvent<'a> {
    NewEvent {
        id_group: &alarm.id_group,
        source_device: &alarm.source_device,
        from_device: Some(0),
        event_type: code,
        occurred_at: at,
        value: &alarm.severity,
        datatype: alarm.datatype,
        value_description: label,
    }
}

/// Acknowledges alarm `id` for `by` at `now`: an active alarm becomes `acknowledged`; a cleared
/// one not acknowledged yet keeps its status and notes who acknowledged it. Either records event
/// 231; an alarm acknowledged before is left as it is (no event). `None` when there is no such
/// alarm.
pub async fn acknowledge(
    db: &Db,
    routes: &Routes,
    id: &str,
    by: &str,
    now: i64,
) -> Result<Option<(AlarmRow, Option<EventRow>)>> {
    let table = routes.table(db).await?;
    let mut tx = Tx::begin(db).await?;
    let sql = format!(
        "UPDATE alarms SET status = CASE WHEN status = 'active' THEN 'acknowledged' ELSE status END, \
         acknowledged_at = $1, acknowledged_by = $2 WHERE id_alarm = $3 AND acknowledged_at IS NULL RETURNING {COLS}"
    );
    let changed: Vec<AlarmRow> = tx.rows(sql, values![now, by, id]).await?;
    let Some(alarm) = changed.into_iter().next() else {
        tx.rollback().await?;
        return Ok(get(db, id).await?.map(|a| (a, None)));
    };
    let event = event_of(&alarm, ACKNOWLEDGED, now, None);
    let ids = events::write_in(&mut tx, &table, std::slice::from_ref(&event), now).await?;
    let row = ids.first().map(|id| event.recorded(*id));
    tx.commit().await?;
    Ok(Some((alarm, row)))
}

/// Clears the open alarms of rule `rule` in `tx` at `now`, with their events 232.
pub(crate) async fn clear_rule_in(tx: &mut Tx, table: &RouteTable, rule: &str, now: i64) -> sqlx::Result<Cleared> {
    let sql = format!(
        "UPDATE alarms SET status = 'cleared', cleared_at = $1, open_key = NULL \
         WHERE id_alarm_rule = $2 AND open_key IS NOT NULL RETURNING {COLS}"
    );
    let alarms: Vec<AlarmRow> = tx.rows(sql, values![now, rule]).await?;
    let news: Vec<NewEvent<'_>> = alarms.iter().map(|a| event_of(a, CLEARED, now, None)).collect();
    let ids = events::write_in(tx, table, &news, now).await?;
    let events = news.iter().zip(&ids).map(|(e, id)| e.recorded(*id)).collect();
    Ok(Cleared { alarms, events })
}

/// An alarm to raise, or to add a match to when it is open.
#[derive(Clone, Debug, PartialEq)]
pub struct Raise {
    pub id_alarm_rule: String,
    /// The rule's label, the description of event 230.
    pub label: String,
    pub id_group: String,
    pub source_device: String,
    pub datatype: Option<i64>,
    pub severity: String,
    pub value: Option<f64>,
    /// Matches to add: 1 for a new alarm.
    pub count: i64,
    pub at: i64,
    /// Whether an open alarm takes the matches (a condition) or is left be (an inactivity).
    pub add_to_open: bool,
}

/// A change the alarm engine makes.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Raises an alarm (only for an active rule), or adds a match to the open one.
    Raise(Raise),
    /// Matches added to an alarm believed open; nothing when it cleared meanwhile.
    Count(Raise),
    Clear {
        id_alarm_rule: String,
        source_device: String,
        datatype: Option<i64>,
        at: i64,
    },
    /// Since when a rule's condition has held on a series (`for_s`).
    Hold {
        id_alarm_rule: String,
        container_key: i64,
        since_us: i64,
    },
    /// The condition stopped holding.
    Release { id_alarm_rule: String, container_key: i64 },
}

/// What [`apply`] changed: the alarms as written and the events recorded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Applied {
    pub alarms: Vec<AlarmRow>,
    pub events: Vec<EventRow>,
}

/// Applies the engine's changes in order, in one transaction, with their events.
pub async fn apply(db: &Db, routes: &Routes, changes: &[Change], now: i64) -> Result<Applied> {
    let table = routes.table(db).await?;
    let mut tx = Tx::begin(db).await?;
    let mut out = Applied::default();
    let mut news: Vec<(AlarmRow, i64, i64, Option<String>)> = Vec::new();
    for change in changes {
        match change {
            Change::Raise(r) => {
                let id = new_id();
                let on_open = if r.add_to_open {
                    "DO UPDATE SET count = alarms.count + excluded.count, value = excluded.value"
                } else {
                    "DO NOTHING"
                };
                // Only for a rule still active: a raise made before the rule was disabled or
                // deleted (and its alarms cleared) must not open one again.
                let sql = format!(
                    "INSERT INTO alarms (id_alarm, id_alarm_rule, id_group, source_device, datatype, severity, status, \
                     raised_at, value, count, open_key) SELECT $1, $2, $3, $4, $5, $6, 'active', $7, $8, $9, $10 \
                     WHERE EXISTS (SELECT 1 FROM alarm_rules WHERE id_alarm_rule = $2 AND is_active = 1) \
                     ON CONFLICT (open_key) {on_open} RETURNING {COLS}"
                );
                let key = open_key(&r.id_alarm_rule, &r.source_device, r.datatype);
                let rows: Vec<AlarmRow> = tx
                    .rows(
                        sql,
                        values![
                            id.as_str(),
                            r.id_alarm_rule.as_str(),
                            r.id_group.as_str(),
                            r.source_device.as_str(),
                            r.datatype,
                            r.severity.as_str(),
                            r.at,
                            r.value,
                            r.count,
                            key
                        ],
                    )
                    .await?;
                if let Some(alarm) = rows.into_iter().next() {
                    if alarm.id_alarm == id {
                        news.push((alarm.clone(), RAISED, r.at, Some(r.label.clone())));
                    }
                    out.alarms.push(alarm);
                }
            }
            Change::Count(r) => {
                // Only an alarm still open takes them: one cleared meanwhile (its rule changed,
                // or another node cleared it) is not raised again by matches counted before.
                let sql =
                    format!("UPDATE alarms SET count = count + $1, value = $2 WHERE open_key = $3 RETURNING {COLS}");
                let key = open_key(&r.id_alarm_rule, &r.source_device, r.datatype);
                let rows: Vec<AlarmRow> = tx.rows(sql, values![r.count, r.value, key]).await?;
                out.alarms.extend(rows);
            }
            Change::Clear {
                id_alarm_rule,
                source_device,
                datatype,
                at,
            } => {
                let sql = format!(
                    "UPDATE alarms SET status = 'cleared', cleared_at = $1, open_key = NULL WHERE open_key = $2 \
                     RETURNING {COLS}"
                );
                let key = open_key(id_alarm_rule, source_device, *datatype);
                let rows: Vec<AlarmRow> = tx.rows(sql, values![*at, key]).await?;
                if let Some(alarm) = rows.into_iter().next() {
                    news.push((alarm.clone(), CLEARED, *at, None));
                    out.alarms.push(alarm);
                }
            }
            Change::Hold {
                id_alarm_rule,
                container_key,
                since_us,
            } => {
                tx.execute(
                    "INSERT INTO alarm_holds (id_alarm_rule, container_key, since_us) VALUES ($1, $2, $3) \
                     ON CONFLICT (id_alarm_rule, container_key) DO UPDATE SET since_us = excluded.since_us"
                        .to_string(),
                    values![id_alarm_rule.as_str(), *container_key, *since_us],
                )
                .await?;
            }
            Change::Release {
                id_alarm_rule,
                container_key,
            } => {
                tx.execute(
                    "DELETE FROM alarm_holds WHERE id_alarm_rule = $1 AND container_key = $2".to_string(),
                    values![id_alarm_rule.as_str(), *container_key],
                )
                .await?;
            }
        }
    }
    let events: Vec<NewEvent<'_>> = news
        .iter()
        .map(|(alarm, code, at, label)| event_of(alarm, *code, *at, label.as_deref()))
        .collect();
    let ids = events::write_in(&mut tx, &table, &events, now).await?;
    out.events = events.iter().zip(&ids).map(|(e, id)| e.recorded(*id)).collect();
    tx.commit().await?;
    Ok(out)
}

/// What the alarm engine knows of a series when it first meets it.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct SeriesFacts {
    pub container_key: i64,
    pub id_group: String,
    pub source_device: String,
    pub datatype: i64,
    /// The source device's serial (`serial` in a condition).
    pub serial: String,
    /// The gateway whose messages bring the series' points.
    pub gateway: String,
}

/// The facts of the series `keys` that exist.
pub async fn series_facts(db: &Db, keys: &[i64]) -> Result<Vec<SeriesFacts>> {
    let mut out = Vec::with_capacity(keys.len());
    for part in keys.chunks(crate::sql::lists::ROWS_PER_STATEMENT) {
        let list = chunks::scan::key_list(part);
        let sql = format!(
            "SELECT c.container_key, c.id_group, c.source_device, c.datatype, d.serial_hardware AS serial, \
             COALESCE(d.id_parent, d.id_physical_device) AS gateway FROM containers c \
             JOIN physical_devices d ON d.id_physical_device = c.source_device WHERE c.container_key IN ({list})"
        );
        out.extend(db.rows::<SeriesFacts>(sqlx::AssertSqlSafe(sql), values![]).await?);
    }
    Ok(out)
}

/// The rules' holds of the series `keys`: (rule, series, since when in microseconds).
pub async fn holds_of(db: &Db, keys: &[i64]) -> Result<Vec<(String, i64, i64)>> {
    let mut out = Vec::new();
    for part in keys.chunks(crate::sql::lists::ROWS_PER_STATEMENT) {
        let list = chunks::scan::key_list(part);
        let sql =
            format!("SELECT id_alarm_rule, container_key, since_us FROM alarm_holds WHERE container_key IN ({list})");
        out.extend(
            db.rows::<(String, i64, i64)>(sqlx::AssertSqlSafe(sql), values![])
                .await?,
        );
    }
    Ok(out)
}

/// When each device a rule watches for silence last sent a point (Unix seconds): of
/// `datatype`, by its series' newest point, or of any datatype, by the device's last data. Only
/// devices that sent some and are not archived; `device` narrows to one.
pub async fn last_points(
    db: &Db,
    id_group: &str,
    datatype: Option<i64>,
    device: Option<&str>,
) -> Result<Vec<(String, i64)>> {
    let mut values = vec![sea_query::Value::from(id_group)];
    let mut sql = match datatype {
        Some(datatype) => {
            values.push(datatype.into());
            "SELECT c.source_device, c.latest_seconds FROM containers c \
             JOIN physical_devices d ON d.id_physical_device = c.source_device \
             WHERE c.id_group = $1 AND c.datatype = $2 AND c.latest_seconds IS NOT NULL AND d.archived_at IS NULL"
                .to_string()
        }
        None => "SELECT d.id_physical_device, d.last_data_at FROM physical_devices d \
                 WHERE d.id_group = $1 AND d.last_data_at > 0 AND d.archived_at IS NULL"
            .to_string(),
    };
    if let Some(device) = device {
        values.push(device.into());
        sql.push_str(&format!(" AND d.id_physical_device = ${}", values.len()));
    }
    let values = sea_query_sqlx::SqlxValues(sea_query::Values(values));
    db.rows(sqlx::AssertSqlSafe(sql), values).await
}
