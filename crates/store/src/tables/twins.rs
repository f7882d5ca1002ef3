//! Device twins (docs/api.md, "Twins"): one row per physical device (made with it by a trigger,
//! migration 0017), its desired and reported documents as JSON text, and the collection that
//! finds devices out of sync.
//!
//! A desired change is computed by the caller from the row it read and written only over that
//! row's `revision` (compare and set); a batch of reports is merged into the twins as locked in
//! its own transaction. Either way the event that tells of a change is in the same transaction:
//! two changes at once through two nodes never lose one another, and `in_sync` always matches
//! both documents.

use devicecloud_query::{AttrKind, Attribute, SortKey};

use crate::collection::{Column, ListArgs, Listing, Table, attributes, names, same_name};
use crate::database::Result;
use crate::database::db::{Db, Tx, values};
use crate::sql::lists::{ROWS_PER_STATEMENT, in_list, update_from_values};
use crate::tables::events::{self, EventRow, NewEvent};
use crate::tables::jobs;
use crate::tables::webhooks::Routes;

/// A stored twin.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct TwinRow {
    pub id_physical_device: String,
    pub id_group: String,
    /// The desired document, JSON object text.
    pub desired: String,
    /// The reported document, JSON object text.
    pub reported: String,
    pub version: i64,
    pub reported_version: Option<i64>,
    pub desired_updated_at: Option<i64>,
    pub reported_updated_at: Option<i64>,
    pub in_sync: i64,
    /// Changes of either document so far (compare and set).
    pub revision: i64,
}

const TABLE: &str = "twins";

/// The filterable and sortable attributes of the twin collection.
pub const COLUMNS: [Column; 7] = [
    same_name(TABLE, "id_physical_device", AttrKind::String),
    same_name(TABLE, "id_group", AttrKind::String),
    same_name(TABLE, "version", AttrKind::Integer),
    same_name(TABLE, "reported_version", AttrKind::Integer),
    same_name(TABLE, "in_sync", AttrKind::Integer),
    same_name(TABLE, "desired_updated_at", AttrKind::Integer),
    same_name(TABLE, "reported_updated_at", AttrKind::Integer),
];
/// The filter attributes of the twin collection.
pub const ATTRIBUTES: [Attribute; 7] = attributes(&COLUMNS);
/// The sortable attributes of the twin collection.
pub const SORTABLE: [&str; 7] = names(&COLUMNS);

/// The twins, by device.
static TWINS: Table<TwinRow> = Table::new(TABLE, &COLUMNS, &[], SortKey::asc("id_physical_device"), &[COLUMNS[0]]);

const SELECT: &str = "SELECT id_physical_device, id_group, desired, reported, version, reported_version, \
                      desired_updated_at, reported_updated_at, in_sync, revision FROM twins";

/// The twin of a device (every device has one).
pub async fn get(db: &Db, id_physical_device: &str) -> Result<Option<TwinRow>> {
    let sql = format!("{SELECT} WHERE id_physical_device = $1");
    db.row(sqlx::AssertSqlSafe(sql), values![id_physical_device]).await
}

/// A page of the twins of the groups `args` allows.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<TwinRow>> {
    TWINS.scoped(db, args).await
}

/// A new desired document over the revision it was computed from: `$1` the document, `$2` now,
/// `$3` in sync, `$4` the device, `$5` the revision.
const DESIRED_UPDATE: &str = "UPDATE twins SET desired = $1, version = version + 1, desired_updated_at = $2, \
                              in_sync = $3, revision = revision + 1 WHERE id_physical_device = $4 AND revision = $5";

/// Writes one desired change ([`DesiredWrite`], with a document) over the twin if it is still at
/// the revision it was computed from, with its event 215 routed to the group's events webhooks,
/// in one transaction; returns the twin as written and the event's id, or `None` when another
/// change came first (read again and retry). A job's changes are written in batches
/// ([`write_desired_many`]), gateways' reports too ([`write_reported_many`]).
pub async fn write_desired(
    db: &Db,
    routes: &Routes,
    write: &DesiredWrite<'_>,
    now: i64,
) -> Result<Option<(TwinRow, i64)>> {
    let table = routes.table(db).await?;
    let id = write.id;
    let values = values![write.document, now, i64::from(write.in_sync), id, write.revision];
    let event = &write.event;
    let mut tx = Tx::begin(db).await?;
    if tx.execute(DESIRED_UPDATE.to_string(), values).await? == 0 {
        tx.rollback().await?;
        return Ok(None);
    }
    let ids = events::write_in(&mut tx, &table, std::slice::from_ref(event), now).await?;
    let rows: Vec<TwinRow> = tx
        .rows(format!("{SELECT} WHERE id_physical_device = $1"), values![id])
        .await?;
    tx.commit().await?;
    Ok(rows.into_iter().next().zip(ids.first().copied()))
}

/// The twins of `ids` (those that exist), in one query.
pub async fn get_many(db: &Db, ids: &[String]) -> Result<Vec<TwinRow>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let (marks, values) = in_list(ids);
    let sql = format!("{SELECT} WHERE id_physical_device IN ({marks})");
    db.rows(sqlx::AssertSqlSafe(sql), values).await
}

/// One desired change of a batch ([`write_desired_many`]), computed from the row of `revision`
/// (`document: None`: the patch changed nothing, the twin stays at `version`).
#[derive(Clone, Debug)]
pub struct DesiredWrite<'a> {
    pub id: &'a str,
    pub revision: i64,
    pub version: i64,
    pub document: Option<&'a str>,
    pub in_sync: bool,
    /// Its event 215 (when `document` is some).
    pub event: NewEvent<'a>,
}

/// Writes a batch of desired changes of one job in one transaction — each only over the
/// revision it was computed from, with its event — and records the version each execution of
/// `id_job` waits for (unchanged twins: the version they are at). Returns, in order, the twin as
/// written and its event's id, or `None` for a twin another change came first to (not written;
/// its execution's version is not recorded either). The changes are a few statements however
/// many they are, not a few each: on SQLite every statement is a round trip to the connection's
/// thread, which a fleet's job would otherwise pay tens of thousands of times.
pub async fn write_desired_many(
    db: &Db,
    routes: &Routes,
    id_job: &str,
    writes: &[DesiredWrite<'_>],
    now: i64,
) -> Result<Vec<Option<(TwinRow, Option<i64>)>>> {
    if writes.is_empty() {
        return Ok(Vec::new());
    }
    let table = routes.table(db).await?;
    let mut tx = Tx::begin_patient(db).await?;
    let changes: Vec<&DesiredWrite> = writes.iter().filter(|w| w.document.is_some()).collect();
    let mut changed: std::collections::HashSet<String> = std::collections::HashSet::new();
    for chunk in changes.chunks(ROWS_PER_STATEMENT) {
        let rows: Vec<[sea_query::Value; 4]> = chunk
            .iter()
            .map(|w| {
                [
                    w.id.into(),
                    w.document.into(),
                    i64::from(w.in_sync).into(),
                    w.revision.into(),
                ]
            })
            .collect();
        let (sql, values) = update_from_values(
            "twins",
            "id_physical_device",
            "desired = v.column2, version = twins.version + 1, desired_updated_at = $now, \
             in_sync = v.column3, revision = twins.revision + 1",
            "AND twins.revision = v.column4 RETURNING twins.id_physical_device",
            &rows,
            now,
        );
        let done: Vec<(String,)> = tx.rows(sql, values).await?;
        changed.extend(done.into_iter().map(|(id,)| id));
    }
    // In order: written (with an event) or unchanged (without), or lost to another change.
    let kept: Vec<&DesiredWrite> = writes
        .iter()
        .filter(|w| w.document.is_none() || changed.contains(w.id))
        .collect();
    let events: Vec<NewEvent> = kept
        .iter()
        .filter(|w| w.document.is_some())
        .map(|w| w.event.clone())
        .collect();
    let mut event_ids = events::write_in(&mut tx, &table, &events, now).await?.into_iter();
    let ids: Vec<&str> = kept.iter().map(|w| w.id).collect();
    let mut rows: Vec<TwinRow> = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(ROWS_PER_STATEMENT) {
        let (marks, mut values) = in_list(chunk);
        values.0.0.push(id_job.into());
        let job = chunk.len() + 1;
        // Each execution waits for the version its twin is at now: the one just written, or
        // the one it already was at.
        tx.execute(
            format!(
                "UPDATE job_executions SET twin_version = (SELECT t.version FROM twins t \
                 WHERE t.id_physical_device = job_executions.id_physical_device) \
                 WHERE id_job = ${job} AND id_physical_device IN ({marks})"
            ),
            values,
        )
        .await?;
        let (marks, values) = in_list(chunk);
        rows.extend(
            tx.rows::<TwinRow>(format!("{SELECT} WHERE id_physical_device IN ({marks})"), values)
                .await?,
        );
    }
    tx.commit().await?;
    let mut by_id: std::collections::HashMap<String, TwinRow> =
        rows.into_iter().map(|r| (r.id_physical_device.clone(), r)).collect();
    Ok(writes
        .iter()
        .map(|w| {
            if w.document.is_some() && !changed.contains(w.id) {
                return None;
            }
            let row = by_id.remove(w.id)?;
            let event = if w.document.is_some() { event_ids.next() } else { None };
            Some((row, event))
        })
        .collect())
}

/// A reported change of a batch ([`write_reported_many`]), computed from the twin as locked in
/// its transaction.
#[derive(Clone, Debug)]
pub struct ReportedWrite {
    /// The new reported document, JSON object text.
    pub document: String,
    /// The desired version the device says it applied, if it said.
    pub version: Option<i64>,
    pub in_sync: bool,
}

/// What one device's report of a batch came to.
#[derive(Clone, Debug)]
pub struct ReportedOutcome {
    /// The twin as written.
    pub twin: TwinRow,
    /// Its event (`event_type`), as recorded.
    pub event: EventRow,
}

/// Writes the reports of a batch of devices (each once) in one transaction: their twins are read
/// and locked there (PostgreSQL: `FOR UPDATE`, in id order, so two nodes' batches never deadlock
/// each other; SQLite: the one write turn), so no other change comes between what `compute`
/// merged a report into and the write. `compute` returns the device's new reported document, or
/// `None` to leave it (a report that would make it invalid). Each written twin gets its event
/// (the applied version as its value) routed to the group's events webhooks, and the twin job
/// executions waiting for a version it now applied succeed. Returns, for each of `ids`, what
/// was written (`None`: no such twin, or `compute` left it).
pub async fn write_reported_many<F>(
    db: &Db,
    routes: &Routes,
    ids: &[&str],
    event_type: i64,
    now: i64,
    mut compute: F,
) -> Result<Vec<Option<ReportedOutcome>>>
where
    F: FnMut(&TwinRow) -> Option<ReportedWrite>,
{
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let table = routes.table(db).await?;
    let mut tx = Tx::begin_patient(db).await?;
    let (marks, values) = in_list(ids);
    let lock = db.row_lock(" ORDER BY id_physical_device FOR UPDATE");
    let rows: Vec<TwinRow> = tx
        .rows(format!("{SELECT} WHERE id_physical_device IN ({marks}){lock}"), values)
        .await?;
    let changes: Vec<(TwinRow, ReportedWrite)> = rows
        .into_iter()
        .filter_map(|row| compute(&row).map(|change| (row, change)))
        .collect();
    for chunk in changes.chunks(ROWS_PER_STATEMENT) {
        let rows: Vec<[sea_query::Value; 4]> = chunk
            .iter()
            .map(|(row, change)| {
                [
                    row.id_physical_device.as_str().into(),
                    change.document.as_str().into(),
                    change.version.into(),
                    i64::from(change.in_sync).into(),
                ]
            })
            .collect();
        let (sql, values) = update_from_values(
            "twins",
            "id_physical_device",
            "reported = v.column2, reported_version = COALESCE(v.column3, twins.reported_version), \
             reported_updated_at = $now, in_sync = v.column4, revision = twins.revision + 1",
            "",
            &rows,
            now,
        );
        tx.execute(sql, values).await?;
    }
    let mut written: Vec<TwinRow> = Vec::with_capacity(changes.len());
    let mut applied: Vec<String> = Vec::with_capacity(changes.len());
    for (row, change) in changes {
        let version = change.version.or(row.reported_version);
        applied.push(version.map_or(String::new(), |v| v.to_string()));
        written.push(TwinRow {
            reported: change.document,
            reported_version: version,
            reported_updated_at: Some(now),
            in_sync: i64::from(change.in_sync),
            revision: row.revision + 1,
            ..row
        });
    }
    let events: Vec<NewEvent<'_>> = written
        .iter()
        .zip(&applied)
        .map(|(twin, value)| NewEvent {
            id_group: &twin.id_group,
            source_device: &twin.id_physical_device,
            from_device: Some(1),
            event_type,
            occurred_at: now,
            value,
            datatype: None,
            value_description: None,
        })
        .collect();
    let event_ids = events::write_in(&mut tx, &table, &events, now).await?;
    let recorded: Vec<EventRow> = events.iter().zip(&event_ids).map(|(e, id)| e.recorded(*id)).collect();
    drop(events);
    let applied: Vec<&str> = written
        .iter()
        .filter(|t| t.reported_version.is_some())
        .map(|t| t.id_physical_device.as_str())
        .collect();
    jobs::runs::end_applied_in(&mut tx, &applied, now).await?;
    tx.commit().await?;
    let mut by_id: std::collections::HashMap<String, ReportedOutcome> = written
        .into_iter()
        .zip(recorded)
        .map(|(twin, event)| (twin.id_physical_device.clone(), ReportedOutcome { twin, event }))
        .collect();
    Ok(ids.iter().map(|id| by_id.remove(*id)).collect())
}

/// A desired document on its way to a gateway (docs/gateway-protocol.md, "Twin").
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct DesiredOf {
    /// The device whose document it is.
    pub device: String,
    /// The gateway whose connection carries it.
    pub gateway: String,
    /// The asset's serial; `None` for the gateway's own document.
    pub serial: Option<String>,
    pub version: i64,
    pub desired: String,
}

const DESIRED_OF: &str = "SELECT d.id_physical_device AS device, COALESCE(d.id_parent, d.id_physical_device) AS gateway, \
                          CASE WHEN d.id_parent IS NULL THEN NULL ELSE d.serial_hardware END AS serial, \
                          t.version, t.desired FROM twins t \
                          JOIN physical_devices d ON d.id_physical_device = t.id_physical_device";

/// The desired document of a device (not archived) as its gateway gets it.
pub async fn desired_of(db: &Db, id_physical_device: &str) -> Result<Option<DesiredOf>> {
    let sql = format!("{DESIRED_OF} WHERE d.id_physical_device = $1 AND d.archived_at IS NULL");
    db.row(sqlx::AssertSqlSafe(sql), values![id_physical_device]).await
}

/// The desired documents of `ids` (not archived), in one query: [`desired_of`] for many.
pub async fn desired_of_many<S: AsRef<str>>(db: &Db, ids: &[S]) -> Result<Vec<DesiredOf>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let (marks, values) = in_list(ids);
    let sql = format!("{DESIRED_OF} WHERE d.id_physical_device IN ({marks}) AND d.archived_at IS NULL");
    db.rows(sqlx::AssertSqlSafe(sql), values).await
}

/// The desired documents of a gateway and of its assets (not archived) whose version is above
/// what the device last said it applied: what the gateway gets right after its hello.
pub async fn behind(db: &Db, gateway: &str) -> Result<Vec<DesiredOf>> {
    let sql = format!(
        "{DESIRED_OF} WHERE (d.id_physical_device = $1 OR d.id_parent = $1) AND d.archived_at IS NULL \
         AND t.version > COALESCE(t.reported_version, 0) ORDER BY d.id_parent IS NOT NULL, d.serial_hardware"
    );
    db.rows(sqlx::AssertSqlSafe(sql), values![gateway]).await
}
