//! The delivery state machine: the outbox rows the ingest transaction queues, the deliveries
//! (batches) cut from them, what an attempt does to a delivery (delivered, retried, failed), and
//! the pruning of what is over. Each step is one transaction, so a record is either queued or in
//! a delivery, never both or neither, and a retry sends the very same bytes.

use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::database::Result;
use crate::database::db::{Db, on_pool, values};
use crate::database::new_id;
use crate::tables::events::EventRow;

/// A queued measurement with the series fields the `data` endpoint shows.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct QueuedPoint {
    pub id_outbox: i64,
    pub id_container_data_latest: String,
    pub id_group: String,
    pub datatype: i64,
    pub source_device: String,
    pub seconds: i64,
    pub microseconds: i64,
    pub value: f64,
}

/// A queued event: the stored event and its outbox row.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct QueuedEvent {
    pub id_outbox: i64,
    #[sqlx(flatten)]
    pub event: EventRow,
}

/// The oldest queued measurements of a webhook, at most `limit`, in queue order.
pub async fn queued_points(db: &Db, id_webhook: &str, limit: i64) -> Result<Vec<QueuedPoint>> {
    let sql = "SELECT o.id_outbox, c.id_container_data_latest, c.id_group, c.datatype, c.source_device, \
               o.seconds, o.microseconds, o.value FROM webhook_outbox o \
               JOIN containers c ON c.container_key = o.container_key \
               WHERE o.id_webhook = $1 ORDER BY o.id_outbox LIMIT $2";
    queued(db, sql, id_webhook, limit).await
}

/// The oldest queued events of a webhook, at most `limit`, in queue order.
pub async fn queued_events(db: &Db, id_webhook: &str, limit: i64) -> Result<Vec<QueuedEvent>> {
    let sql = "SELECT o.id_outbox, e.id_event, e.id_group, e.source_device, e.from_device, e.event_type, \
               e.occurred_at, e.value, e.datatype, e.value_description FROM webhook_outbox o \
               JOIN events e ON e.id_event = o.id_event \
               WHERE o.id_webhook = $1 ORDER BY o.id_outbox LIMIT $2";
    queued(db, sql, id_webhook, limit).await
}

/// The rows `sql` selects from a webhook's queue (`$1` the webhook, `$2` the most rows).
async fn queued<T>(db: &Db, sql: &'static str, id_webhook: &str, limit: i64) -> Result<Vec<T>>
where
    T: for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin,
{
    db.rows::<T>(sql, values![id_webhook, limit]).await
}

/// A batch waiting to be delivered (or given up on).
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct DeliveryRow {
    pub id_delivery: String,
    pub id_webhook: String,
    pub body: Vec<u8>,
    pub content_type: String,
    pub item_count: i64,
    pub attempts: i64,
    pub next_attempt_ms: i64,
    pub created_ms: i64,
}

/// The oldest pending delivery of a webhook: a batch cut before a failure or a restart, which
/// goes out again before anything newer (order of the data, docs/api.md, "Webhooks").
pub async fn pending_delivery(db: &Db, id_webhook: &str) -> Result<Option<DeliveryRow>> {
    let sql = "SELECT id_delivery, id_webhook, body, content_type, item_count, attempts, next_attempt_ms, created_ms \
               FROM webhook_deliveries WHERE id_webhook = $1 AND state = 'pending' \
               ORDER BY created_ms, id_delivery LIMIT 1";
    db.row::<DeliveryRow>(sql, values![id_webhook]).await
}

/// Stores a rendered batch as a pending delivery and removes its rows from the outbox, in one
/// transaction: every record is either queued or in a delivery, never both or neither, and in
/// one delivery only. `None` (nothing stored) when some of the rows were no longer queued: another
/// node's lane took them meanwhile (a lane whose lease it lost while it worked).
pub async fn cut_delivery(
    db: &Db,
    id_webhook: &str,
    outbox_ids: &[i64],
    body: Vec<u8>,
    content_type: &str,
    now_ms: i64,
) -> Result<Option<DeliveryRow>> {
    let delivery = DeliveryRow {
        id_delivery: new_id(),
        id_webhook: id_webhook.to_string(),
        body,
        content_type: content_type.to_string(),
        item_count: outbox_ids.len() as i64,
        attempts: 0,
        next_attempt_ms: now_ms,
        created_ms: now_ms,
    };
    let _turn = db.write_turn().await?;
    let stored: Option<()> = on_pool!(db, |p| async {
        let mut tx = p.begin().await?;
        sqlx::query(
            "INSERT INTO webhook_deliveries (id_delivery, id_webhook, body, content_type, item_count, state, \
             attempts, next_attempt_ms, created_ms) VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6)",
        )
        .bind(&delivery.id_delivery)
        .bind(id_webhook)
        .bind(&delivery.body)
        .bind(content_type)
        .bind(delivery.item_count)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        // By id, not by range: on PostgreSQL a lower id may commit after a higher one.
        let mut removed = 0;
        for chunk in outbox_ids.chunks(500) {
            let list = chunk.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
            let sql = format!("DELETE FROM webhook_outbox WHERE id_outbox IN ({list})");
            removed += sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        if removed < outbox_ids.len() as u64 {
            tx.rollback().await?;
            return Ok::<_, sqlx::Error>(None);
        }
        tx.commit().await?;
        Ok(Some(()))
    }
    .await)?;
    Ok(stored.map(|()| delivery))
}

/// The result of one delivery attempt, as logged.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempt<'a> {
    pub attempted_at: i64,
    pub status_code: Option<i64>,
    pub duration_ms: i64,
    pub error: Option<&'a str>,
    /// 1 for the first try.
    pub attempt: i64,
}

/// What becomes of a delivery after an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted by the receiver: the delivery is done and removed.
    Delivered,
    /// Tried again at this time (Unix milliseconds).
    RetryAt(i64),
    /// The retry window is over: kept as `failed`, visible in the attempt log.
    Failed,
}

/// Logs an attempt and moves the delivery on, in one transaction.
pub async fn record_attempt(db: &Db, delivery: &DeliveryRow, attempt: &Attempt<'_>, outcome: Outcome) -> Result<()> {
    let _turn = db.write_turn().await?;
    on_pool!(db, |p| {
        async {
        let mut tx = p.begin().await?;
        sqlx::query(
            "INSERT INTO webhook_attempts (id_webhook, id_delivery, attempted_at, status_code, duration_ms, error, \
             item_count, attempt) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&delivery.id_webhook)
        .bind(&delivery.id_delivery)
        .bind(attempt.attempted_at)
        .bind(attempt.status_code)
        .bind(attempt.duration_ms)
        .bind(attempt.error)
        .bind(delivery.item_count)
        .bind(attempt.attempt)
        .execute(&mut *tx)
        .await?;
        // `$1` is the delivery in every statement, bound first.
        let id = &delivery.id_delivery;
        let query = match outcome {
            Outcome::Delivered => sqlx::query("DELETE FROM webhook_deliveries WHERE id_delivery = $1").bind(id),
            Outcome::RetryAt(at) => {
                sqlx::query("UPDATE webhook_deliveries SET attempts = $2, next_attempt_ms = $3 WHERE id_delivery = $1")
                    .bind(id)
                    .bind(attempt.attempt)
                    .bind(at)
            }
            Outcome::Failed => sqlx::query(
                "UPDATE webhook_deliveries SET attempts = $2, state = 'failed', finished_at = $3 WHERE id_delivery = $1",
            )
            .bind(id)
            .bind(attempt.attempt)
            .bind(attempt.attempted_at),
        };
        let updated = query.execute(&mut *tx).await?.rows_affected();
        if updated != 1 {
            // The webhook was deleted meanwhile (its deliveries with it): nothing to move on.
            tracing::debug!(delivery = %id, "delivery gone before its attempt was recorded");
        }
        tx.commit().await
    }
    .await
    })?;
    Ok(())
}

/// Removes attempts and failed deliveries older than `before` (Unix seconds), and queued rows
/// of webhooks that no longer exist or are inactive (routed to them by a route table that had
/// not seen the change yet: an inactive webhook starts from new data when activated again);
/// returns how many rows went.
pub async fn prune(db: &Db, before: i64) -> Result<u64> {
    let statements = [
        "DELETE FROM webhook_attempts WHERE attempted_at < $1",
        "DELETE FROM webhook_deliveries WHERE state = 'failed' AND finished_at < $1",
    ];
    let mut removed = 0;
    for sql in statements {
        removed += db.execute(sql, values![before]).await?;
    }
    let orphans =
        "DELETE FROM webhook_outbox WHERE id_webhook NOT IN (SELECT id_webhook FROM webhooks WHERE is_active = 1)";
    removed += db.execute(orphans, values![]).await?;
    Ok(removed)
}

/// Rows in the outbox (all webhooks): records stored but not yet cut into a delivery.
pub async fn outbox_len(db: &Db) -> Result<i64> {
    Ok(on_pool!(db, |p| sqlx::query_scalar::<_, i64>(
        "SELECT COUNT(*) FROM webhook_outbox"
    )
    .fetch_one(p)
    .await)?)
}

/// Counts of a webhook's queue: rows waiting in the outbox, pending and failed deliveries.
pub async fn backlog(db: &Db, id_webhook: &str) -> Result<(i64, i64, i64)> {
    let sql = "SELECT (SELECT COUNT(*) FROM webhook_outbox WHERE id_webhook = $1), \
               (SELECT COUNT(*) FROM webhook_deliveries WHERE id_webhook = $1 AND state = 'pending'), \
               (SELECT COUNT(*) FROM webhook_deliveries WHERE id_webhook = $1 AND state = 'failed')";
    Ok(on_pool!(db, |p| sqlx::query_as::<_, (i64, i64, i64)>(sql)
        .bind(id_webhook)
        .fetch_one(p)
        .await)?)
}
