//! The delivery state machine: the outbox rows the ingest transaction queues, the deliveries
//! (batches) cut from them, what an attempt does to a delivery (delivered, retried, failed), and
//! the pruning of what is over. Each step is one transaction, so a record is either queued or in
//! a delivery, never both or neither, and a retry sends the very same bytes.

use super::queue::Taken;
use crate::database::Result;
use crate::database::db::{Db, on_pool, values};
use crate::database::new_id;

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

/// The oldest pending delivery of a webhook other than `except` (one accepted whose record is
/// being written): a batch cut before a failure or a restart, which goes out again before
/// anything newer (order of the data, docs/api.md, "Webhooks").
pub async fn pending_delivery(db: &Db, id_webhook: &str, except: Option<&str>) -> Result<Option<DeliveryRow>> {
    let sql = "SELECT id_delivery, id_webhook, body, content_type, item_count, attempts, next_attempt_ms, created_ms \
               FROM webhook_deliveries WHERE id_webhook = $1 AND state = 'pending' AND id_delivery <> $2 \
               ORDER BY created_ms, id_delivery LIMIT 1";
    db.row::<DeliveryRow>(sql, values![id_webhook, except.unwrap_or("")])
        .await
}

/// Stores a rendered batch as a pending delivery and removes its rows from the outbox, in one
/// transaction: every record is either queued or in a delivery, never both or neither, and in
/// one delivery only. `None` (nothing stored) when some of the rows were no longer queued: another
/// node's lane took them meanwhile (a lane whose lease it lost while it worked).
///
/// `records` is how many records the body holds: fewer than `taken` when some queued points
/// belong to a series that no longer exists. With none, the taken rows are only removed.
pub async fn cut_delivery(
    db: &Db,
    id_webhook: &str,
    taken: &Taken,
    records: i64,
    body: Vec<u8>,
    content_type: &str,
    now_ms: i64,
) -> Result<Option<DeliveryRow>> {
    let delivery = DeliveryRow {
        id_delivery: new_id(),
        id_webhook: id_webhook.to_string(),
        body,
        content_type: content_type.to_string(),
        item_count: records,
        attempts: 0,
        next_attempt_ms: now_ms,
        created_ms: now_ms,
    };
    let _turn = db.write_turn().await?;
    let stored: Option<()> = on_pool!(db, |p| async {
        let mut tx = p.begin().await?;
        if records > 0 {
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
        }
        // By id, not by range: on PostgreSQL a lower id may commit after a higher one.
        let mut removed = 0;
        for chunk in taken.whole.chunks(500) {
            let list = chunk.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
            let sql = format!("DELETE FROM webhook_outbox WHERE id_outbox IN ({list})");
            removed += sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        let mut split_kept = true;
        if let Some(split) = &taken.split {
            // The row keeps the points after those taken, if nobody took them meanwhile.
            split_kept =
                sqlx::query("UPDATE webhook_outbox SET points = $1, items = $2 WHERE id_outbox = $3 AND items = $4")
                    .bind(&split.rest)
                    .bind(split.rest_items)
                    .bind(split.id_outbox)
                    .bind(split.items)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected()
                    == 1;
        }
        if removed < taken.whole.len() as u64 || !split_kept {
            tx.rollback().await?;
            return Ok::<_, sqlx::Error>(None);
        }
        tx.commit().await?;
        Ok(Some(()))
    }
    .await)?;
    Ok(stored.filter(|()| records > 0).map(|()| delivery))
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

/// Records in the outbox (all webhooks): stored but not yet cut into a delivery.
pub async fn outbox_len(db: &Db) -> Result<i64> {
    Ok(on_pool!(db, |p| sqlx::query_scalar::<_, i64>(
        "SELECT CAST(COALESCE(SUM(items), 0) AS BIGINT) FROM webhook_outbox"
    )
    .fetch_one(p)
    .await)?)
}

/// Counts of a webhook's queue: records waiting in the outbox, pending and failed deliveries.
pub async fn backlog(db: &Db, id_webhook: &str) -> Result<(i64, i64, i64)> {
    let sql = "SELECT (SELECT CAST(COALESCE(SUM(items), 0) AS BIGINT) FROM webhook_outbox WHERE id_webhook = $1), \
               (SELECT COUNT(*) FROM webhook_deliveries WHERE id_webhook = $1 AND state = 'pending'), \
               (SELECT COUNT(*) FROM webhook_deliveries WHERE id_webhook = $1 AND state = 'failed')";
    Ok(on_pool!(db, |p| sqlx::query_as::<_, (i64, i64, i64)>(sql)
        .bind(id_webhook)
        .fetch_one(p)
        .await)?)
}
