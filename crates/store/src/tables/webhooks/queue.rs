//! Reading a webhook's queue: the oldest queued records, at most a batch of them, and what
//! taking them does to the outbox (the rows taken whole, and the row split when the batch ends
//! inside it). [`super::cut_delivery`] then stores the batch and applies that in one
//! transaction.

use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use super::packed::{self, PackedPoint};
use crate::database::Result;
use crate::database::db::{Db, values};
use crate::sql::point_time::MICROS;
use crate::tables::events::EventRow;

/// Outbox rows read at a time while a batch is gathered: a packed row holds up to a couple of
/// thousand points, so one or two reads make a batch.
const ROWS_PER_READ: i64 = 32;

/// A queued event: the stored event and its outbox row.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct QueuedEvent {
    pub id_outbox: i64,
    #[sqlx(flatten)]
    pub event: EventRow,
}

/// What a batch takes from the outbox.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Taken {
    /// Rows whose records are all in the batch: removed.
    pub whole: Vec<i64>,
    /// The row whose first records end the batch: it keeps the rest.
    pub split: Option<Split>,
    /// Records in the batch.
    pub items: i64,
}

/// A packed row of which the batch takes the first points.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    pub id_outbox: i64,
    /// Its points before the batch (the cut checks nobody changed it meanwhile).
    pub items: i64,
    /// The points it keeps, packed, and how many.
    pub rest: Vec<u8>,
    pub rest_items: i64,
}

/// A row of the queue as stored: a packed row (`points`), or one point in its columns (rows
/// queued before packed rows existed).
#[derive(sqlx::FromRow)]
struct PointRow {
    id_outbox: i64,
    items: i64,
    container_key: Option<i64>,
    seconds: Option<i64>,
    microseconds: Option<i64>,
    value: Option<f64>,
    points: Option<Vec<u8>>,
}

/// The oldest queued measurements of a webhook, at most `limit`, in queue order, and what
/// taking them does to the outbox.
pub async fn queued_points(db: &Db, id_webhook: &str, limit: i64) -> Result<(Vec<PackedPoint>, Taken)> {
    let limit = limit.max(1);
    let mut taken = Taken::default();
    let mut points: Vec<PackedPoint> = Vec::new();
    let mut after = i64::MIN;
    'reading: while taken.items < limit {
        let sql = "SELECT id_outbox, items, container_key, seconds, microseconds, value, points FROM webhook_outbox \
                   WHERE id_webhook = $1 AND id_event IS NULL AND id_outbox > $2 ORDER BY id_outbox LIMIT $3";
        let rows: Vec<PointRow> = db.rows(sql, values![id_webhook, after, ROWS_PER_READ]).await?;
        let last_read = rows.len() < ROWS_PER_READ as usize;
        for row in rows {
            after = row.id_outbox;
            let mut row_points = match &row.points {
                Some(bytes) => packed::unpack(bytes)?,
                None => vec![PackedPoint {
                    container_key: row.container_key.unwrap_or(0),
                    time_us: row.seconds.unwrap_or(0) * MICROS + row.microseconds.unwrap_or(0),
                    value: row.value.unwrap_or(0.0),
                }],
            };
            let room = usize::try_from(limit - taken.items).unwrap_or(0);
            if row_points.len() > room {
                let rest = row_points.split_off(room);
                taken.items += row_points.len() as i64;
                points.append(&mut row_points);
                taken.split = Some(Split {
                    id_outbox: row.id_outbox,
                    items: row.items,
                    rest_items: rest.len() as i64,
                    rest: packed::pack(rest.into_iter()),
                });
                break 'reading;
            }
            taken.items += row_points.len() as i64;
            points.append(&mut row_points);
            taken.whole.push(row.id_outbox);
            if taken.items >= limit {
                break 'reading;
            }
        }
        if last_read {
            break;
        }
    }
    Ok((points, taken))
}

/// The oldest queued events of a webhook, at most `limit`, in queue order, and what taking
/// them does to the outbox.
pub async fn queued_events(db: &Db, id_webhook: &str, limit: i64) -> Result<(Vec<QueuedEvent>, Taken)> {
    let sql = "SELECT o.id_outbox, e.id_event, e.id_group, e.source_device, e.from_device, e.event_type, \
               e.occurred_at, e.value, e.datatype, e.value_description FROM webhook_outbox o \
               JOIN events e ON e.id_event = o.id_event \
               WHERE o.id_webhook = $1 ORDER BY o.id_outbox LIMIT $2";
    let events: Vec<QueuedEvent> = rows(db, sql, id_webhook, limit).await?;
    let taken = Taken {
        whole: events.iter().map(|e| e.id_outbox).collect(),
        split: None,
        items: events.len() as i64,
    };
    Ok((events, taken))
}

async fn rows<T>(db: &Db, sql: &'static str, id_webhook: &str, limit: i64) -> Result<Vec<T>>
where
    T: for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin,
{
    db.rows::<T>(sql, values![id_webhook, limit]).await
}
