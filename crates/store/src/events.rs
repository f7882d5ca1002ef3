//! Events: occurrences reported by gateways (`from_device` 1) and recorded by the cloud
//! (`from_device` 0), read through `GET /api/v2/event`.

use crate::Result;
use crate::db::{Db, on_pool};

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

/// Records events in one transaction, each queued in that transaction for the active events
/// webhooks of its group (docs/api.md, "Webhooks"); returns how many.
pub async fn insert(db: &Db, events: &[NewEvent<'_>], now: i64) -> Result<u64> {
    let sql = "INSERT INTO events (id_group, source_device, from_device, event_type, occurred_at, value, datatype, \
               value_description, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id_event";
    // Events are few (connections, rejections, device reports): one indexed look-up each.
    let queue = "INSERT INTO webhook_outbox (id_webhook, id_event) SELECT id_webhook, $1 FROM webhooks \
                 WHERE id_group = $2 AND forwarding_type = 'events' AND is_active = 1 ORDER BY id_webhook";
    let n = on_pool!(db, |p| async {
        let mut tx = p.begin().await?;
        let mut n = 0;
        for e in events {
            let id_event: i64 = sqlx::query_scalar(sql)
                .bind(e.id_group)
                .bind(e.source_device)
                .bind(e.from_device)
                .bind(e.event_type)
                .bind(e.occurred_at)
                .bind(e.value)
                .bind(e.datatype)
                .bind(e.value_description)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
            sqlx::query(queue)
                .bind(id_event)
                .bind(e.id_group)
                .execute(&mut *tx)
                .await?;
            n += 1;
        }
        tx.commit().await?;
        Ok::<_, sqlx::Error>(n)
    }
    .await)?;
    Ok(n)
}
