//! The attempt log: one row per delivery attempt, listed per webhook so a client can see why its
//! receiver gets nothing. Written by [`super::record_attempt`] in the transaction that moves the
//! delivery on.

use devicecloud_query::{AttrKind, Attribute, SortKey};
use sea_query::{Condition, Expr, ExprTrait};

use crate::collection::{Column, ListArgs, Listing, Table, attributes, names, same_name};
use crate::database::Result;
use crate::database::db::Db;

/// One logged delivery attempt (docs/api.md, "Webhooks"); it serializes as the API's record.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize, serde::Serialize)]
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
/// The filterable and sortable attributes of the attempt log.
pub const ATTEMPT_COLUMNS: [Column; 9] = [
    same_name(ATTEMPTS, "id_attempt", AttrKind::Integer),
    same_name(ATTEMPTS, "id_webhook", AttrKind::String),
    same_name(ATTEMPTS, "id_delivery", AttrKind::String),
    same_name(ATTEMPTS, "attempted_at", AttrKind::Integer),
    same_name(ATTEMPTS, "status_code", AttrKind::Integer),
    same_name(ATTEMPTS, "duration_ms", AttrKind::Integer),
    same_name(ATTEMPTS, "error", AttrKind::String),
    same_name(ATTEMPTS, "item_count", AttrKind::Integer),
    same_name(ATTEMPTS, "attempt", AttrKind::Integer),
];
/// The filter attributes of the attempt log.
pub const ATTEMPT_ATTRIBUTES: [Attribute; 9] = attributes(&ATTEMPT_COLUMNS);
/// The sortable attributes of the attempt log.
pub const ATTEMPT_SORTABLE: [&str; 9] = names(&ATTEMPT_COLUMNS);

/// The attempt log, oldest first.
static ATTEMPT_LOG: Table<AttemptRow> = Table::new(
    ATTEMPTS,
    &ATTEMPT_COLUMNS,
    &[],
    SortKey::asc("id_attempt"),
    &[ATTEMPT_COLUMNS[0]],
);

/// A page of the attempts of one webhook; oldest first unless sorted otherwise.
pub async fn attempts(db: &Db, id_webhook: &str, args: ListArgs<'_>) -> Result<Listing<AttemptRow>> {
    let mut select = ATTEMPT_LOG.select();
    select.cond_where(Condition::all().add(Expr::col((ATTEMPTS, "id_webhook")).eq(id_webhook)));
    ATTEMPT_LOG.list(db, select, &args).await
}
