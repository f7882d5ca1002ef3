//! The webhook records: what a client creates, reads, changes and deletes, and the collection
//! that lists them. Kept apart from the outbox and the attempt log, which only the delivery
//! worker writes.

use devicecloud_query::{AttrKind, Attribute, SortKey};
use sea_query::{Expr, ExprTrait, Query};

use crate::collection::{self, Column, ListArgs, Listing, attributes, names};
use crate::db::{Db, Tx, on_pool};
use crate::{Result, new_id};

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
/// The columns of a [`WebhookRow`], in its order: its own field names, so that the record is
/// declared once.
fn output() -> &'static [&'static str] {
    static FIELDS: std::sync::LazyLock<&[&str]> = std::sync::LazyLock::new(crate::collection::output_of::<WebhookRow>);
    *FIELDS
}
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

pub(super) const fn col(table: &'static str, attr: &'static str, column: &'static str, kind: AttrKind) -> Column {
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
    collection::scoped_list(db, TABLE, output(), &COLUMNS, &[], args, oldest_first, &KEY).await
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
