//! The attempt log: one row per delivery attempt, listed per webhook so a client can see why its
//! receiver gets nothing. Written by [`super::record_attempt`] in the transaction that moves the
//! delivery on.

use devicecloud_query::{AttrKind, Attribute, Filter, PageRequest, SortKey};
use sea_query::{Condition, Expr, ExprTrait, Query};

use super::records::col;
use crate::Result;
use crate::collection::{self, Column, ListRequest, Listing, attributes, names};
use crate::db::Db;

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
/// The columns of a [`AttemptRow`], in its order: its own field names, so that the record is
/// declared once.
fn attempt_output() -> &'static [&'static str] {
    static FIELDS: std::sync::LazyLock<&[&str]> = std::sync::LazyLock::new(crate::collection::output_of::<AttemptRow>);
    *FIELDS
}

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
        .columns(attempt_output().iter().map(|c| (ATTEMPTS, *c)))
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
    collection::list(db, select, attempt_output(), &ATTEMPT_COLUMNS, req).await
}
