//! What the service does by itself to a webhook that keeps failing (docs/api.md, "Failing
//! webhooks"): it measures the webhook's backlog within a bound, and sets the webhook inactive
//! with its queue dropped and a cloud event recording why, all in one transaction, so that a
//! webhook is never found inactive without its event or with its old queue.

use sea_query::Values;
use sea_query_sqlx::SqlxValues;

use super::records::{drop_queue, get};
use crate::database::Result;
use crate::database::db::{Db, Tx, on_pool};
use crate::tables::events::EventRow;
use crate::tables::events::NewEvent;

/// The records a webhook has waiting (rows in the outbox and the items of its pending batches),
/// counted no further than `cap` + 1 outbox rows: it is asked of queues that may be huge.
pub async fn backlog_items(db: &Db, id_webhook: &str, cap: u64) -> Result<u64> {
    // Rows hold one record or more, so at most `cap + 1` rows are summed.
    let sql = "SELECT (SELECT CAST(COALESCE(SUM(items), 0) AS BIGINT) FROM \
               (SELECT items FROM webhook_outbox WHERE id_webhook = $1 LIMIT $2) q) \
               + (SELECT CAST(COALESCE(SUM(item_count), 0) AS BIGINT) FROM webhook_deliveries \
               WHERE id_webhook = $1 AND state = 'pending')";
    let limit = i64::try_from(cap.saturating_add(1)).unwrap_or(i64::MAX);
    let n: i64 = on_pool!(db, |p| sqlx::query_scalar(sql)
        .bind(id_webhook)
        .bind(limit)
        .fetch_one(p)
        .await)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Why the service set a webhook inactive, and the cloud event that records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deactivation<'a> {
    /// `disabled_reason`, also the event's value.
    pub reason: &'a str,
    /// The event code (214).
    pub event_type: i64,
    /// Unix seconds: `disabled_at` and the event's time.
    pub now: i64,
}

/// What a deactivation did.
#[derive(Clone, Debug, PartialEq)]
pub struct Deactivated {
    /// Queued records dropped.
    pub dropped: u64,
    /// The event recorded.
    pub event: EventRow,
}

/// Sets an active webhook inactive with `disabled_reason` and `disabled_at`, drops its queue and
/// records the event on the webhook (`source_device` is its id, `from_device` 0), routed to the
/// active events webhooks of its group like any event. Returns what it did, or `None` when the
/// webhook was already inactive or gone (another node, or a client, was first).
pub async fn deactivate(db: &Db, id_webhook: &str, how: &Deactivation<'_>) -> Result<Option<Deactivated>> {
    let Some(row) = get(db, id_webhook).await? else {
        return Ok(None);
    };
    let values = |v: Vec<sea_query::Value>| SqlxValues(Values(v));
    let mut tx = Tx::begin(db).await?;
    let changed = tx
        .execute(
            "UPDATE webhooks SET is_active = 0, disabled_reason = $2, disabled_at = $3, updated_at = $3 \
             WHERE id_webhook = $1 AND is_active = 1"
                .into(),
            values(vec![id_webhook.into(), how.reason.into(), how.now.into()]),
        )
        .await?;
    if changed == 0 {
        tx.rollback().await?;
        return Ok(None);
    }
    let dropped = drop_queue(&mut tx, id_webhook).await?;
    let description = format!("{dropped} queued records dropped");
    let id_event = tx
        .scalar(
            "INSERT INTO events (id_group, source_device, from_device, event_type, occurred_at, value, datatype, \
             value_description, created_at) VALUES ($1, $2, 0, $3, $4, $5, NULL, $6, $4) RETURNING id_event"
                .into(),
            values(vec![
                row.id_group.as_str().into(),
                id_webhook.into(),
                how.event_type.into(),
                how.now.into(),
                how.reason.into(),
                description.as_str().into(),
            ]),
        )
        .await?;
    // The routing of `RouteTable`, read in this transaction: the group's active events webhooks.
    tx.execute(
        "INSERT INTO webhook_outbox (id_webhook, id_event) SELECT id_webhook, $2 FROM webhooks \
         WHERE id_group = $1 AND forwarding_type = 'events' AND is_active = 1 ORDER BY id_webhook"
            .into(),
        values(vec![row.id_group.as_str().into(), id_event.into()]),
    )
    .await?;
    tx.commit().await?;
    let event = NewEvent {
        id_group: &row.id_group,
        source_device: id_webhook,
        from_device: Some(0),
        event_type: how.event_type,
        occurred_at: how.now,
        value: how.reason,
        datatype: None,
        value_description: Some(&description),
    };
    Ok(Some(Deactivated {
        dropped,
        event: event.recorded(id_event),
    }))
}
