//! Events: occurrences reported by gateways (`from_device` 1) and recorded by the cloud
//! (`from_device` 0), read through `GET /api/v2/event`.
//!
//! An event is queued for the events webhooks of its group in the transaction that records it,
//! routed like measurements by the route table (`webhooks::Routes`, docs/api.md, "Webhooks").

use crate::database::Result;
use crate::database::db::{Db, Tx, values};
use crate::sql::lists::ROWS_PER_STATEMENT;
use crate::tables::webhooks::{RouteTable, Routes};

/// A stored event.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct EventRow {
    pub id_event: i64,
    pub id_group: String,
    pub source_device: String,
    pub from_device: Option<i64>,
    pub event_type: i64,
    pub occurred_at: i64,
    pub value: String,
    pub datatype: Option<i64>,
    pub value_description: Option<String>,
}

/// `SELECT <every column of EventRow> FROM events`.
pub const SELECT: &str = "SELECT id_event, id_group, source_device, from_device, event_type, occurred_at, value, \
                          datatype, value_description FROM events";

/// An event to record.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent<'a> {
    pub id_group: &'a str,
    pub source_device: &'a str,
    /// 1 from the device, 0 from the cloud.
    pub from_device: Option<i64>,
    pub event_type: i64,
    pub occurred_at: i64,
    pub value: &'a str,
    pub datatype: Option<i64>,
    /// Why, for cloud events such as a rejected message (`event_value_description`).
    pub value_description: Option<&'a str>,
}

impl NewEvent<'_> {
    /// The event as recorded under `id_event`: the record the `event` endpoint reads back.
    pub fn recorded(&self, id_event: i64) -> EventRow {
        EventRow {
            id_event,
            id_group: self.id_group.to_string(),
            source_device: self.source_device.to_string(),
            from_device: self.from_device,
            event_type: self.event_type,
            occurred_at: self.occurred_at,
            value: self.value.to_string(),
            datatype: self.datatype,
            value_description: self.value_description.map(str::to_string),
        }
    }
}

/// Records events in one transaction, each queued in it for the active events webhooks of its
/// group as the service's cached route table names them (the table that routes measurements);
/// returns their ids, in the order of `events`.
pub async fn insert_routed(db: &Db, routes: &Routes, events: &[NewEvent<'_>], now: i64) -> Result<Vec<i64>> {
    let table = routes.table(db).await?;
    write(db, Some(&table), events, now).await
}

/// [`insert_routed`] for callers without the service's route cache (the command log, tools):
/// the route table is read in the transaction itself. Returns the events' ids.
pub async fn insert(db: &Db, events: &[NewEvent<'_>], now: i64) -> Result<Vec<i64>> {
    write(db, None, events, now).await
}

/// Records `events` and their outbox rows in `tx`, the transaction of the change they tell of
/// (a twin's), routed by `table`; returns their ids.
pub(crate) async fn write_in(
    tx: &mut Tx,
    table: &RouteTable,
    events: &[NewEvent<'_>],
    now: i64,
) -> sqlx::Result<Vec<i64>> {
    let ids = insert_in(tx, events, now).await?;
    queue_in(tx, table, events, &ids).await?;
    Ok(ids)
}

/// Inserts `events` in `tx`, many a statement; their ids, in order. The ids a statement returns
/// are sorted: both databases give the rows of one multi-row `INSERT` ascending ids in the order
/// of its values (SQLite's rowids, PostgreSQL's sequence), though neither promises the order in
/// which `RETURNING` lists them.
async fn insert_in(tx: &mut Tx, events: &[NewEvent<'_>], now: i64) -> sqlx::Result<Vec<i64>> {
    let mut ids = Vec::with_capacity(events.len());
    for chunk in events.chunks(ROWS_PER_STATEMENT) {
        let mut insert = sea_query::Query::insert();
        insert.into_table("events").columns([
            "id_group",
            "source_device",
            "from_device",
            "event_type",
            "occurred_at",
            "value",
            "datatype",
            "value_description",
            "created_at",
        ]);
        for e in chunk {
            insert.values_panic([
                e.id_group.into(),
                e.source_device.into(),
                e.from_device.into(),
                e.event_type.into(),
                e.occurred_at.into(),
                e.value.into(),
                e.datatype.into(),
                e.value_description.into(),
                now.into(),
            ]);
        }
        insert.returning_col("id_event");
        let (sql, values) = tx.build(&insert);
        let mut returned: Vec<(i64,)> = tx.rows(sql, values).await?;
        returned.sort_unstable();
        ids.extend(returned.into_iter().map(|(id,)| id));
    }
    Ok(ids)
}

/// Queues the events `ids` for the events webhooks `table` names for their groups (most groups
/// have none: no statement at all).
async fn queue_in(tx: &mut Tx, table: &RouteTable, events: &[NewEvent<'_>], ids: &[i64]) -> sqlx::Result<()> {
    const QUEUE: &str = "INSERT INTO webhook_outbox (id_webhook, id_event) VALUES ($1, $2)";
    for (e, id_event) in events.iter().zip(ids) {
        for id_webhook in table.events_of(e.id_group) {
            tx.execute(QUEUE.to_string(), values![id_webhook.as_str(), *id_event])
                .await?;
        }
    }
    Ok(())
}

/// Records `events` and their outbox rows in one transaction, routed by `table` (read in the
/// transaction when `None`); returns their ids.
async fn write(db: &Db, table: Option<&RouteTable>, events: &[NewEvent<'_>], now: i64) -> Result<Vec<i64>> {
    let mut tx = Tx::begin(db).await?;
    // The events are written first: on SQLite a transaction that reads before its first write
    // cannot wait for the write lock (another writer between its read and its write fails it at
    // once with SQLITE_BUSY), while one that starts with a write waits its turn.
    let ids = insert_in(&mut tx, events, now).await?;
    let read;
    let table = match table {
        Some(table) => table,
        None => {
            read = RouteTable::from_rows(tx.rows(RouteTable::SELECT.to_string(), values![]).await?);
            &read
        }
    };
    queue_in(&mut tx, table, events, &ids).await?;
    tx.commit().await?;
    Ok(ids)
}
