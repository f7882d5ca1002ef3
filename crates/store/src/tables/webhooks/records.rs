//! The webhook records: what a client creates, reads, changes and deletes, and the collection
//! that lists them. Kept apart from the outbox and the attempt log, which only the delivery
//! worker writes.

use devicecloud_query::{AttrKind, Attribute, SortKey};
use sea_query::{Expr, ExprTrait, Query};

use crate::collection::{Column, ListArgs, Listing, Table, attributes, column, names, same_name};
use crate::database::Result;
use crate::database::db::{Db, Tx, on_pool, values};
use crate::database::new_id;

/// The two forwarding types (specification, Events: Measurements or Events).
pub const FORWARDING_TYPES: [&str; 2] = ["measurements", "events"];

/// A stored webhook. `secret` (the HMAC key) and `authorization_header` are kept as the service
/// hands them over: sealed (encrypted) by the server before they reach the store. Serialised in
/// the API record's order, without the secret; the server shows `authorization` opened and
/// masked.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize, serde::Serialize)]
pub struct WebhookRow {
    pub id_webhook: String,
    pub id_group: String,
    pub label: String,
    pub forwarding_type: String,
    pub formatter: String,
    pub url: String,
    #[serde(rename(serialize = "authorization"))]
    pub authorization_header: Option<String>,
    #[serde(skip_serializing)]
    pub secret: String,
    pub is_active: i64,
    /// Why the service set the webhook inactive (`retry_window`, `backlog`); cleared when a
    /// client activates it again.
    pub disabled_reason: Option<String>,
    /// When the service set it inactive (Unix seconds).
    pub disabled_at: Option<i64>,
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
const SELECT: &str = "SELECT id_webhook, id_group, label, forwarding_type, formatter, url, authorization_header, \
                      secret, is_active, created_at, updated_at, created_by, disabled_reason, disabled_at FROM webhooks";

/// The filterable and sortable attributes of the webhook collection.
pub const COLUMNS: [Column; 12] = [
    column("id", TABLE, "id_webhook", AttrKind::String),
    same_name(TABLE, "id_webhook", AttrKind::String),
    same_name(TABLE, "id_group", AttrKind::String),
    same_name(TABLE, "label", AttrKind::String),
    same_name(TABLE, "forwarding_type", AttrKind::String),
    same_name(TABLE, "formatter", AttrKind::String),
    same_name(TABLE, "url", AttrKind::String),
    same_name(TABLE, "is_active", AttrKind::Integer),
    same_name(TABLE, "created_at", AttrKind::Integer),
    same_name(TABLE, "updated_at", AttrKind::Integer),
    same_name(TABLE, "disabled_reason", AttrKind::String),
    same_name(TABLE, "disabled_at", AttrKind::Integer),
];
/// The filter attributes of the webhook collection.
pub const ATTRIBUTES: [Attribute; 12] = attributes(&COLUMNS);
/// The sortable attributes of the webhook collection.
pub const SORTABLE: [&str; 12] = names(&COLUMNS);

/// Creates a webhook and returns it, or `None` when its group already holds `per_group`
/// webhooks (docs/operations.md, "Limits"). The count and the insert are one transaction that
/// starts by writing the group's row: that takes SQLite's write lock and PostgreSQL's lock on
/// the row, so concurrent creations in one group are serialised and the limit holds.
pub async fn create(db: &Db, new: &NewWebhook<'_>, per_group: u64, now: i64) -> Result<Option<WebhookRow>> {
    let id = new_id();
    let per_group = i64::try_from(per_group).unwrap_or(i64::MAX);
    let _turn = db.write_turn().await?;
    let created = on_pool!(db, |p| {
        async {
        let mut tx = p.begin().await?;
        sqlx::query("UPDATE groups SET id_group = id_group WHERE id_group = $1")
            .bind(new.id_group)
            .execute(&mut *tx)
            .await?;
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM webhooks WHERE id_group = $1")
            .bind(new.id_group)
            .fetch_one(&mut *tx)
            .await?;
        if count >= per_group {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO webhooks (id_webhook, id_group, label, forwarding_type, formatter, url, authorization_header, \
             secret, is_active, created_at, updated_at, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11)",
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
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok::<_, sqlx::Error>(true)
    }
    .await
    })?;
    Ok(created.then(|| WebhookRow {
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
        disabled_reason: None,
        disabled_at: None,
    }))
}

/// One webhook; visibility is the caller's business.
pub async fn get(db: &Db, id_webhook: &str) -> Result<Option<WebhookRow>> {
    let sql = format!("{SELECT} WHERE id_webhook = $1");
    db.row::<WebhookRow>(sqlx::AssertSqlSafe(sql), values![id_webhook])
        .await
}

/// Every active webhook, for the delivery worker.
pub async fn active(db: &Db) -> Result<Vec<WebhookRow>> {
    let sql = format!("{SELECT} WHERE is_active = 1 ORDER BY created_at, id_webhook");
    db.rows::<WebhookRow>(sqlx::AssertSqlSafe(sql), values![]).await
}

/// The active webhooks of one group.
pub async fn active_of_group(db: &Db, id_group: &str) -> Result<Vec<WebhookRow>> {
    let sql = format!("{SELECT} WHERE id_group = $1 AND is_active = 1 ORDER BY created_at, id_webhook");
    db.rows::<WebhookRow>(sqlx::AssertSqlSafe(sql), values![id_group]).await
}

/// The webhooks of the groups a caller may see, oldest first.
static WEBHOOKS: Table<WebhookRow> = Table::new(TABLE, &COLUMNS, &[], SortKey::asc("created_at"), &[COLUMNS[0]]);

/// A page of the webhooks of the groups `scope` allows.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<WebhookRow>> {
    WEBHOOKS.scoped(db, args).await
}

/// Applies `changes` and returns the webhook (`None` if it does not exist). Activating an
/// inactive webhook starts it from new data: its `disabled_*` fields are cleared and whatever
/// it still had queued (rows routed to it by a stale route table, batches pending from before)
/// is dropped in the same transaction; the second value counts the records dropped.
pub async fn update(
    db: &Db,
    id_webhook: &str,
    changes: &WebhookChanges<'_>,
    now: i64,
) -> Result<Option<(WebhookRow, u64)>> {
    let Some(before) = get(db, id_webhook).await? else {
        return Ok(None);
    };
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
    let reactivated = changes.is_active == Some(true) && before.is_active != 1;
    if reactivated {
        update
            .value("disabled_reason", Option::<String>::None)
            .value("disabled_at", Option::<i64>::None);
    }
    let (sql, values) = db.build(&update);
    let mut tx = Tx::begin(db).await?;
    tx.execute(sql, values).await?;
    let dropped = if reactivated {
        drop_queue(&mut tx, id_webhook).await?
    } else {
        0
    };
    tx.commit().await?;
    Ok(get(db, id_webhook).await?.map(|row| (row, dropped)))
}

/// Removes what a webhook has queued, rows in the outbox and pending batches, in `tx`; returns
/// the records removed. Failed batches stay, for the attempt log's sake, until pruned.
pub(super) async fn drop_queue(tx: &mut Tx, id_webhook: &str) -> sqlx::Result<u64> {
    let bind = || sea_query_sqlx::SqlxValues(sea_query::Values(vec![id_webhook.into()]));
    let pending = tx
        .scalar(
            "SELECT CAST(COALESCE(SUM(item_count), 0) AS BIGINT) FROM webhook_deliveries \
             WHERE id_webhook = $1 AND state = 'pending'"
                .into(),
            bind(),
        )
        .await?;
    tx.execute(
        "DELETE FROM webhook_deliveries WHERE id_webhook = $1 AND state = 'pending'".into(),
        bind(),
    )
    .await?;
    let queued = tx
        .scalar(
            "SELECT CAST(COALESCE(SUM(items), 0) AS BIGINT) FROM webhook_outbox WHERE id_webhook = $1".into(),
            bind(),
        )
        .await?;
    tx.execute("DELETE FROM webhook_outbox WHERE id_webhook = $1".into(), bind())
        .await?;
    Ok(u64::try_from(queued).unwrap_or(0) + u64::try_from(pending).unwrap_or(0))
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

/// The stored `secret` and `authorization_header` of every webhook, for the service's start,
/// which seals those still kept in clear text by an older version.
pub async fn stored_secrets(db: &Db) -> Result<Vec<(String, String, Option<String>)>> {
    let sql = "SELECT id_webhook, secret, authorization_header FROM webhooks ORDER BY id_webhook";
    db.rows(sql, values![]).await
}

/// Replaces a webhook's stored `secret` and `authorization_header` with `new` if they still are
/// `old` (a client may have changed them meanwhile); returns whether they were replaced.
pub async fn replace_secrets(
    db: &Db,
    id_webhook: &str,
    old: (&str, Option<&str>),
    new: (&str, Option<&str>),
) -> Result<bool> {
    let sql = "UPDATE webhooks SET secret = $2, authorization_header = $3 \
               WHERE id_webhook = $1 AND secret = $4 AND authorization_header IS NOT DISTINCT FROM $5";
    let n = db.execute(sql, values![id_webhook, new.0, new.1, old.0, old.1]).await?;
    Ok(n == 1)
}
