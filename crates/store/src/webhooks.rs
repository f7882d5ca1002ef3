//! Webhooks (docs/api.md, "Webhooks"): the webhook records, the durable outbox the ingest transaction
//! writes, the deliveries (batches) cut from it, and the log of delivery attempts.
//!
//! The outbox holds compact rows (a point, or a reference to an event), written in the
//! transaction that stores the record: a record committed is a record queued. The worker reads
//! them in order, renders one body per batch, and stores that body as a delivery in the same
//! transaction that removes the rows, so a retry (or a restart) sends the very same bytes.

mod routes;

use devicecloud_query::{AttrKind, Attribute, Filter, PageRequest, SortKey};
use sea_query::{Condition, Expr, ExprTrait, Query};

use crate::collection::{self, Column, ListArgs, ListRequest, Listing, attributes, names};
use crate::db::{Db, Tx, on_pool};
use crate::{Result, new_id};

pub use routes::{RouteTable, Routes};

/// The two forwarding types (specification, Events: Measurements or Events).
pub const FORWARDING_TYPES: [&str; 2] = ["measurements", "events"];

/// A stored webhook. `secret` is the HMAC key; it never leaves the service after creation.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct WebhookRow {
    pub id_webhook: String,
    pub id_group: String,
    pub label: String,
    pub forwarding_type: String,
    pub formatter: String,
    pub url: String,
    pub authorization_header: Option<String>,
    pub secret: String,
    pub is_active: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub created_by: Option<String>,
}

/// Fields of a new webhook.
#[derive(Clone, Debug)]
pub struct NewWebhook<'a> {
    pub id_group: &'a str,
    pub label: &'a str,
    pub forwarding_type: &'a str,
    pub formatter: &'a str,
    pub url: &'a str,
    pub authorization_header: Option<&'a str>,
    pub secret: &'a str,
    pub is_active: bool,
    pub created_by: &'a str,
}

/// Changes to a webhook; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct WebhookChanges<'a> {
    pub label: Option<&'a str>,
    pub formatter: Option<&'a str>,
    pub url: Option<&'a str>,
    /// `Some(None)` removes the header.
    pub authorization_header: Option<Option<&'a str>>,
    pub is_active: Option<bool>,
}

const TABLE: &str = "webhooks";
const OUTPUT: [&str; 12] = [
    "id_webhook",
    "id_group",
    "label",
    "forwarding_type",
    "formatter",
    "url",
    "authorization_header",
    "secret",
    "is_active",
    "created_at",
    "updated_at",
    "created_by",
];
const SELECT: &str = "SELECT id_webhook, id_group, label, forwarding_type, formatter, url, authorization_header, \
                      secret, is_active, created_at, updated_at, created_by FROM webhooks";

/// The filterable and sortable attributes of the webhook collection.
pub const COLUMNS: [Column; 10] = [
    col(TABLE, "id", "id_webhook", AttrKind::String),
    col(TABLE, "id_webhook", "id_webhook", AttrKind::String),
    col(TABLE, "id_group", "id_group", AttrKind::String),
    col(TABLE, "label", "label", AttrKind::String),
    col(TABLE, "forwarding_type", "forwarding_type", AttrKind::String),
    col(TABLE, "formatter", "formatter", AttrKind::String),
    col(TABLE, "url", "url", AttrKind::String),
    col(TABLE, "is_active", "is_active", AttrKind::Integer),
    col(TABLE, "created_at", "created_at", AttrKind::Integer),
    col(TABLE, "updated_at", "updated_at", AttrKind::Integer),
];
/// The filter attributes of the webhook collection.
pub const ATTRIBUTES: [Attribute; 10] = attributes(&COLUMNS);
/// The sortable attributes of the webhook collection.
pub const SORTABLE: [&str; 10] = names(&COLUMNS);

const fn col(table: &'static str, attr: &'static str, column: &'static str, kind: AttrKind) -> Column {
    Column {
        attr,
        table,
        column,
        kind,
    }
}

/// Creates a webhook and returns it.
pub async fn create(db: &Db, new: &NewWebhook<'_>, now: i64) -> Result<WebhookRow> {
    let id = new_id();
    on_pool!(db, |p| {
        sqlx::query(
        "INSERT INTO webhooks (id_webhook, id_group, label, forwarding_type, formatter, url, authorization_header, \
         secret, is_active, created_at, updated_at, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11)"
    )
    .bind(&id)
    .bind(new.id_group)
    .bind(new.label)
    .bind(new.forwarding_type)
    .bind(new.formatter)
    .bind(new.url)
    .bind(new.authorization_header)
    .bind(new.secret)
    .bind(i64::from(new.is_active))
    .bind(now)
    .bind(new.created_by)
    .execute(p)
    .await
    .map(|r| r.rows_affected())
    })?;
    Ok(WebhookRow {
        id_webhook: id,
        id_group: new.id_group.into(),
        label: new.label.into(),
        forwarding_type: new.forwarding_type.into(),
        formatter: new.formatter.into(),
        url: new.url.into(),
        authorization_header: new.authorization_header.map(str::to_string),
        secret: new.secret.into(),
        is_active: i64::from(new.is_active),
        created_at: now,
        updated_at: now,
        created_by: Some(new.created_by.into()),
    })
}

/// One webhook; visibility is the caller's business.
pub async fn get(db: &Db, id_webhook: &str) -> Result<Option<WebhookRow>> {
    let sql = format!("{SELECT} WHERE id_webhook = $1");
    Ok(on_pool!(db, |p| sqlx::query_as::<_, WebhookRow>(sqlx::AssertSqlSafe(
        sql
    ))
    .bind(id_webhook)
    .fetch_optional(p)
    .await)?)
}

/// Every active webhook, for the delivery worker.
pub async fn active(db: &Db) -> Result<Vec<WebhookRow>> {
    let sql = format!("{SELECT} WHERE is_active = 1 ORDER BY created_at, id_webhook");
    Ok(on_pool!(db, |p| sqlx::query_as::<_, WebhookRow>(sqlx::AssertSqlSafe(
        sql
    ))
    .fetch_all(p)
    .await)?)
}

/// A page of the webhooks of the groups `scope` allows.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<WebhookRow>> {
    let oldest_first = SortKey {
        attr: "created_at",
        descending: false,
    };
    const KEY: [Column; 1] = [col(TABLE, "id_webhook", "id_webhook", AttrKind::String)];
    collection::scoped_list(db, TABLE, &OUTPUT, &COLUMNS, &[], args, oldest_first, &KEY).await
}

/// Applies `changes` and returns the webhook (`None` if it does not exist).
pub async fn update(db: &Db, id_webhook: &str, changes: &WebhookChanges<'_>, now: i64) -> Result<Option<WebhookRow>> {
    let mut update = Query::update();
    update
        .table(TABLE)
        .and_where(Expr::col("id_webhook").eq(id_webhook))
        .value("updated_at", now);
    for (column, value) in [
        ("label", changes.label),
        ("formatter", changes.formatter),
        ("url", changes.url),
    ] {
        if let Some(value) = value {
            update.value(column, value);
        }
    }
    if let Some(header) = changes.authorization_header {
        update.value("authorization_header", header.map(str::to_string));
    }
    if let Some(active) = changes.is_active {
        update.value("is_active", i64::from(active));
    }
    let (sql, values) = db.build(&update);
    on_pool!(db, |p| sqlx::query_with(sqlx::AssertSqlSafe(sql), values)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    get(db, id_webhook).await
}

/// Deletes a webhook with its queue, deliveries and attempts; returns whether it existed.
pub async fn delete(db: &Db, id_webhook: &str) -> Result<bool> {
    let mut tx = Tx::begin(db).await?;
    let bind = |s: &str| sea_query_sqlx::SqlxValues(sea_query::Values(vec![s.into()]));
    tx.execute(
        "DELETE FROM webhook_outbox WHERE id_webhook = $1".into(),
        bind(id_webhook),
    )
    .await?;
    let n = tx
        .execute("DELETE FROM webhooks WHERE id_webhook = $1".into(), bind(id_webhook))
        .await?;
    tx.commit().await?;
    Ok(n > 0)
}

/// One logged delivery attempt (docs/api.md, "Webhooks").
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct AttemptRow {
    pub id_attempt: i64,
    pub id_webhook: String,
    pub id_delivery: String,
    pub attempted_at: i64,
    pub status_code: Option<i64>,
    pub duration_ms: i64,
    pub error: Option<String>,
    pub item_count: i64,
    pub attempt: i64,
}

const ATTEMPTS: &str = "webhook_attempts";
const ATTEMPT_OUTPUT: [&str; 9] = [
    "id_attempt",
    "id_webhook",
    "id_delivery",
    "attempted_at",
    "status_code",
    "duration_ms",
    "error",
    "item_count",
    "attempt",
];

/// The filterable and sortable attributes of the attempt log.
pub const ATTEMPT_COLUMNS: [Column; 9] = [
    col(ATTEMPTS, "id_attempt", "id_attempt", AttrKind::Integer),
    col(ATTEMPTS, "id_webhook", "id_webhook", AttrKind::String),
    col(ATTEMPTS, "id_delivery", "id_delivery", AttrKind::String),
    col(ATTEMPTS, "attempted_at", "attempted_at", AttrKind::Integer),
    col(ATTEMPTS, "status_code", "status_code", AttrKind::Integer),
    col(ATTEMPTS, "duration_ms", "duration_ms", AttrKind::Integer),
    col(ATTEMPTS, "error", "error", AttrKind::String),
    col(ATTEMPTS, "item_count", "item_count", AttrKind::Integer),
    col(ATTEMPTS, "attempt", "attempt", AttrKind::Integer),
];
/// The filter attributes of the attempt log.
pub const ATTEMPT_ATTRIBUTES: [Attribute; 9] = attributes(&ATTEMPT_COLUMNS);
/// The sortable attributes of the attempt log.
pub const ATTEMPT_SORTABLE: [&str; 9] = names(&ATTEMPT_COLUMNS);

/// A page of the attempts of one webhook; oldest first unless sorted otherwise.
pub async fn attempts(
    db: &Db,
    id_webhook: &str,
    filter: Option<&Filter>,
    sort: Option<&SortKey>,
    page: PageRequest,
    count_only: bool,
) -> Result<Listing<AttemptRow>> {
    let mut select = Query::select();
    select
        .columns(ATTEMPT_OUTPUT.map(|c| (ATTEMPTS, c)))
        .from(ATTEMPTS)
        .cond_where(Condition::all().add(Expr::col((ATTEMPTS, "id_webhook")).eq(id_webhook)));
    let req = ListRequest {
        filter,
        sort,
        default_sort: SortKey {
            attr: "id_attempt",
            descending: false,
        },
        primary_key: &[col(ATTEMPTS, "id_attempt", "id_attempt", AttrKind::Integer)],
        page,
        count_only,
    };
    collection::list(db, select, &ATTEMPT_OUTPUT, &ATTEMPT_COLUMNS, req).await
}

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

/// A queued event with its stored fields.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct QueuedEvent {
    pub id_outbox: i64,
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

/// The oldest queued measurements of a webhook, at most `limit`, in queue order.
pub async fn queued_points(db: &Db, id_webhook: &str, limit: i64) -> Result<Vec<QueuedPoint>> {
    let sql = "SELECT o.id_outbox, c.id_container_data_latest, c.id_group, c.datatype, c.source_device, \
               o.seconds, o.microseconds, o.value FROM webhook_outbox o \
               JOIN containers c ON c.container_key = o.container_key \
               WHERE o.id_webhook = $1 ORDER BY o.id_outbox LIMIT $2";
    Ok(on_pool!(db, |p| sqlx::query_as::<_, QueuedPoint>(sql)
        .bind(id_webhook)
        .bind(limit)
        .fetch_all(p)
        .await)?)
}

/// The oldest queued events of a webhook, at most `limit`, in queue order.
pub async fn queued_events(db: &Db, id_webhook: &str, limit: i64) -> Result<Vec<QueuedEvent>> {
    let sql = "SELECT o.id_outbox, e.id_event, e.id_group, e.source_device, e.from_device, e.event_type, \
               e.occurred_at, e.value, e.datatype, e.value_description FROM webhook_outbox o \
               JOIN events e ON e.id_event = o.id_event \
               WHERE o.id_webhook = $1 ORDER BY o.id_outbox LIMIT $2";
    Ok(on_pool!(db, |p| sqlx::query_as::<_, QueuedEvent>(sql)
        .bind(id_webhook)
        .bind(limit)
        .fetch_all(p)
        .await)?)
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
    Ok(on_pool!(db, |p| sqlx::query_as::<_, DeliveryRow>(sql)
        .bind(id_webhook)
        .fetch_optional(p)
        .await)?)
}

/// Stores a rendered batch as a pending delivery and removes its rows from the outbox, in one
/// transaction: every record is either queued or in a delivery, never both or neither.
pub async fn cut_delivery(
    db: &Db,
    id_webhook: &str,
    outbox_ids: &[i64],
    body: Vec<u8>,
    content_type: &str,
    now_ms: i64,
) -> Result<DeliveryRow> {
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
    on_pool!(db, |p| async {
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
        for chunk in outbox_ids.chunks(500) {
            let list = chunk.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
            let sql = format!("DELETE FROM webhook_outbox WHERE id_outbox IN ({list})");
            sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *tx).await?;
        }
        tx.commit().await
    }
    .await)?;
    Ok(delivery)
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
/// of webhooks that no longer exist; returns how many rows went.
pub async fn prune(db: &Db, before: i64) -> Result<u64> {
    let statements = [
        "DELETE FROM webhook_attempts WHERE attempted_at < $1",
        "DELETE FROM webhook_deliveries WHERE state = 'failed' AND finished_at < $1",
    ];
    let mut removed = 0;
    for sql in statements {
        removed += on_pool!(db, |p| sqlx::query(sql)
            .bind(before)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
    }
    let orphans = "DELETE FROM webhook_outbox WHERE id_webhook NOT IN (SELECT id_webhook FROM webhooks)";
    removed += on_pool!(db, |p| sqlx::query(orphans).execute(p).await.map(|r| r.rows_affected()))?;
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
