//! Running a batch's transaction: the points inserted (by `COPY` on PostgreSQL, the first try),
//! a resent point found and the transaction redone without it, then the rollups, latest values
//! and device times, and the webhook queue rows of the points that were new.

use std::collections::{BTreeSet, HashMap, HashSet};

use sea_query::Values;
use sea_query_sqlx::SqlxValues;

use super::batch::Batch;
use super::point::{Point, Written};
use super::sql::{Inserts, Statement, int, placeholders, queue_points};
use super::{copy, sql};
use crate::chunks;
use crate::database::Result;
use crate::database::StoreError;
use crate::database::db::{Db, Tx};
use crate::sql::backend::Backend;
use crate::sql::point_time;
use crate::tables::webhooks::{RouteTable, Routes};

/// Stores points in one transaction; `devices` are the devices whose `last_data_at` moves to
/// the given time (only ever forward). Nothing is queued for webhooks: this is for tools and
/// tests that fill a store directly; the service writes through [`write_slices`].
pub async fn write(db: &Db, points: &[Point], devices: &[(String, i64)]) -> Result<Written> {
    let batch = Batch::new(points.to_vec(), devices.to_vec(), db.backend());
    write_batch(db, batch, None).await.map(|(written, _, _)| written)
}

/// What a batch did, how many outbox rows it queued for webhooks, and the points it stored.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Routed {
    pub written: Written,
    /// Points queued for webhooks: each new point once per webhook of its group.
    pub queued: usize,
    /// The points stored for the first time, in the order they were sent (resent ones left
    /// out): what the live stream shows once the transaction is committed. Moved out of the
    /// batch, so handing them over costs nothing.
    pub fresh: Vec<Point>,
}

/// Stores slices of points as [`write`] does and, in the same transaction as each slice, queues
/// every newly stored point for each active measurements webhook of its group (docs/api.md,
/// "Webhooks": queued durably in the transaction that stores the data). Resent points were
/// queued when first stored and are not queued again.
///
/// The slices go in as few transactions as the other writers allow:
/// one transaction runs slice after slice while nobody else waits for the write turn, and ends
/// after the slice in progress when someone does, who then writes before the next transaction
/// begins. So a change made through the API waits for one slice, not for a whole group commit,
/// and without other writers the group is one transaction (docs/operations.md, "Storage").
///
/// A slice is atomic; slices are committed in order. When a slice meets points stored before
/// (a resend), its transaction is rolled back and the slices it held are written again one
/// transaction each, the resent points left out.
pub async fn write_slices(db: &Db, slices: Vec<Batch>, routes: &Routes) -> Result<Routed> {
    let table = routes.table(db).await?;
    let mut routed = Vec::with_capacity(slices.len());
    for slice in slices {
        let targets = targets(db, &table, routes, &slice).await?;
        routed.push((slice, targets));
    }
    let mut out = Routed::default();
    let mut left = std::collections::VecDeque::from(routed);
    while !left.is_empty() {
        let mut tx = Tx::begin_bulk(db).await?;
        // On PostgreSQL, which takes no write turn, every slice left runs in this transaction.
        lock_rows(&mut tx, left.iter().map(|(slice, _)| slice)).await?;
        let mut ran = Vec::new();
        let mut counted = Vec::new();
        let mut resent = false;
        while let Some((mut slice, targets)) = left.pop_front() {
            match run_new(&mut tx, &mut slice, targets.as_ref()).await? {
                Some(done) => counted.push(done),
                None => resent = true,
            }
            ran.push((slice, targets));
            if resent || tx.others_waiting() {
                break;
            }
        }
        if resent {
            tx.rollback().await?;
            for (slice, targets) in ran {
                // The statements were spent on the rolled back run: built again.
                let again = slice.without(&HashSet::new());
                let (written, queued, fresh) = write_batch(db, again, targets.as_ref()).await?;
                out.add(written, queued, fresh);
            }
        } else {
            tx.commit().await?;
            for ((slice, _), (written, queued)) in ran.into_iter().zip(counted) {
                out.add(written, queued, slice.sent);
            }
        }
    }
    Ok(out)
}

/// The measurements webhooks of each series a slice writes to, when any group has some.
async fn targets<'t>(
    db: &Db,
    table: &'t RouteTable,
    routes: &Routes,
    slice: &Batch,
) -> Result<Option<HashMap<i64, &'t [String]>>> {
    if !table.forwards_measurements() {
        return Ok(None);
    }
    let groups = routes.groups_of(db, &slice.series()).await?;
    Ok(Some(
        groups
            .iter()
            .filter_map(|(key, group)| {
                let hooks = table.measurements_of(group);
                (!hooks.is_empty()).then_some((*key, hooks))
            })
            .collect(),
    ))
}

impl Routed {
    /// Adds what one slice did, its new points after those of the slices before.
    fn add(&mut self, written: Written, queued: usize, fresh: Vec<Point>) {
        self.written.inserted += written.inserted;
        self.written.duplicates += written.duplicates;
        self.queued += queued;
        self.fresh.extend(fresh);
    }
}

/// The write of [`write`] and of a resent slice of [`write_slices`], in a transaction of its
/// own; `targets` maps a series to its webhooks. Returns what it did, the outbox rows queued,
/// and the new points in the order sent.
async fn write_batch(
    db: &Db,
    mut batch: Batch,
    targets: Option<&HashMap<i64, &[String]>>,
) -> Result<(Written, usize, Vec<Point>)> {
    let mut tx = Tx::begin_bulk(db).await?;
    lock_rows(&mut tx, [&batch]).await?;
    let mut batch = if let Some((written, queued)) = run_new(&mut tx, &mut batch, targets).await? {
        tx.commit().await?;
        return Ok((written, queued, batch.sent));
    } else {
        // Some points were stored before (a resend): start over, find them, and store only the
        // new ones. A whole new transaction rather than a savepoint, whose statement journal
        // would cost every batch.
        tx.rollback().await?;
        tx = Tx::begin_bulk(db).await?;
        lock_rows(&mut tx, [&batch]).await?;
        let mut stored = stored_keys(&mut tx, &batch.sorted).await?;
        stored.extend(chunks::stored::in_chunks(&mut tx, &batch.sorted).await?);
        let mut fresh = batch.without(&stored);
        if insert(&mut tx, std::mem::take(&mut fresh.inserts), OnStored::Skip).await? != fresh.sorted.len() as u64 {
            // Not a resend: a row the database would not take (a NaN value on SQLite).
            return Err(StoreError::Database(sqlx::Error::Protocol(
                "raw points refused by the database".into(),
            )));
        }
        fresh
    };
    let (written, queued) = finish(&mut tx, &mut batch, targets).await?;
    tx.commit().await?;
    Ok((written, queued, batch.sent))
}

/// Runs a batch's inserts in `tx` and, when every point was new, the rest of it ([`finish`]);
/// `None` when some points were stored before (a resend): the transaction must then be rolled
/// back, since the rollups were not run for them.
async fn run_new(
    tx: &mut Tx,
    batch: &mut Batch,
    targets: Option<&HashMap<i64, &[String]>>,
) -> Result<Option<(Written, usize)>> {
    // A point packed into a chunk since it was first stored is a resend the row's key cannot
    // see: found here, it takes the resend's path.
    if !chunks::stored::in_chunks(tx, &batch.sorted).await?.is_empty() {
        return Ok(None);
    }
    if insert(tx, std::mem::take(&mut batch.inserts), OnStored::Abort).await? != batch.sorted.len() as u64 {
        return Ok(None);
    }
    Ok(Some(finish(tx, batch, targets).await?))
}

/// The rollups, latest values, device times and outbox rows of a batch whose inserts all went
/// in; returns what the batch did and the outbox rows queued.
async fn finish(tx: &mut Tx, batch: &mut Batch, targets: Option<&HashMap<i64, &[String]>>) -> Result<(Written, usize)> {
    run(tx, std::mem::take(&mut batch.updates)).await?;
    let queued = match targets {
        Some(targets) if !targets.is_empty() => {
            let (statements, rows) = queue_points(&batch.sent, targets, tx.backend());
            run(tx, statements).await?;
            rows
        }
        _ => 0,
    };
    let written = Written {
        inserted: batch.sorted.len(),
        duplicates: batch.submitted - batch.sorted.len(),
    };
    Ok((written, queued))
}

/// On PostgreSQL, locks the rows a transaction of `batches` will update before it writes
/// anything, each table in key order (`Tx::lock_in_order`): its series, which stand for
/// everything under them (raw points, rollups, latest values, data sessions), then its devices,
/// which departures lock in the same order. Two transactions writing one series (one gateway's
/// messages committed by two nodes around a take-over) then take their turns at the first row
/// they share instead of deadlocking. The ingest writers of one node never share a series (a
/// gateway's messages go to one writer). On SQLite, with one writer at a time, nothing.
async fn lock_rows<'b>(tx: &mut Tx, batches: impl IntoIterator<Item = &'b Batch>) -> Result<()> {
    if tx.backend() == Backend::Sqlite {
        return Ok(());
    }
    let (mut series, mut devices) = (BTreeSet::new(), BTreeSet::new());
    for batch in batches {
        series.extend(batch.series());
        devices.extend(batch.devices());
    }
    let series: Vec<i64> = series.into_iter().collect();
    let devices: Vec<&str> = devices.into_iter().collect();
    tx.lock_in_order("containers", "container_key", &series).await?;
    tx.lock_in_order("physical_devices", "id_physical_device", &devices)
        .await?;
    Ok(())
}

/// What an insert does with a point stored before (a resend).
#[derive(Clone, Copy, PartialEq, Eq)]
enum OnStored {
    /// Skips it: fewer rows go in than were given.
    Skip,
    /// On PostgreSQL, stops: no row goes in, and the transaction must be rolled back. A plain
    /// `COPY` (`copy`) checks the key once, as it adds it to the index; an insert that skips
    /// stored points (`ON CONFLICT DO NOTHING`) looks the key up first, inserts speculatively
    /// and logs a confirmation of every row, which cost PostgreSQL's ingest more than a resend
    /// ever saves (docs/benchmarks.md, "Ingest"). So the first try of a batch stops at a stored
    /// point and the retry, knowing the batch holds some, skips them. On SQLite the same as
    /// `Skip` (`INSERT OR IGNORE` spares SQLite its statement journal).
    Abort,
}

/// Inserts a batch's raw points; returns how many went in.
async fn insert(tx: &mut Tx, inserts: Inserts, on_stored: OnStored) -> sqlx::Result<u64> {
    match (inserts, tx) {
        (Inserts::Statements(statements), tx) => run(tx, statements).await,
        (Inserts::Columns(c), Tx::Postgres(tx)) => {
            let done = match on_stored {
                OnStored::Abort => copy_points(tx, &c).await,
                OnStored::Skip => sqlx::query(
                    "INSERT INTO raw_points (container_key, time_us, value, session_key) \
                     SELECT * FROM unnest($1::int8[], $2::int8[], $3::float8[], $4::int8[]) \
                     ON CONFLICT (container_key, time_us) DO NOTHING",
                )
                .bind(&c.keys)
                .bind(&c.times)
                .bind(&c.values)
                .bind(&c.sessions)
                .execute(&mut **tx)
                .await
                .map(|done| done.rows_affected()),
            };
            match done {
                Err(sqlx::Error::Database(e)) if on_stored == OnStored::Abort && e.is_unique_violation() => Ok(0),
                done => done,
            }
        }
        (Inserts::Columns(_), Tx::Sqlite(..)) => {
            Err(sqlx::Error::Protocol("points as columns are for PostgreSQL".into()))
        }
    }
}

/// Copies points into PostgreSQL (`copy`); returns how many went in.
async fn copy_points(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    points: &sql::PointColumns,
) -> sqlx::Result<u64> {
    let mut copy = tx.copy_in_raw(copy::STATEMENT).await?;
    copy.send(copy::binary(points)).await?;
    copy.finish().await
}

/// Runs statements in order; returns the rows they affected.
async fn run(tx: &mut Tx, statements: Vec<Statement>) -> sqlx::Result<u64> {
    let mut affected = 0;
    for statement in statements {
        affected += tx.execute(statement.sql, statement.values).await?;
    }
    Ok(affected)
}

/// Which of `points` are stored already.
async fn stored_keys(tx: &mut Tx, points: &[Point]) -> sqlx::Result<HashSet<(i64, i64, i64)>> {
    let mut stored = HashSet::new();
    for chunk in points.chunks(sql::CHUNK) {
        let same_time = point_time::at_sql(tx.backend(), "r", "v.column2", "v.column3");
        let sql = format!(
            "SELECT v.column1 AS a, v.column2 AS b, v.column3 AS c FROM raw_points r \
             JOIN (VALUES {}) AS v ON r.container_key = v.column1 AND {same_time}",
            placeholders(chunk.len(), 3, tx.backend())
        );
        let values = chunk
            .iter()
            .flat_map(|p| [int(p.container_key), int(p.seconds), int(p.microseconds)])
            .collect();
        stored.extend(tx.triples(sql, SqlxValues(Values(values))).await?);
    }
    Ok(stored)
}
