//! Reading data sessions (`GET /api/v2/data-session`, its expands and the CSV download).

use devicecloud_query::{AttrKind, Attribute, SortKey};
use sea_query::{Expr, ExprTrait, Query};

use crate::Result;
use crate::collection::{self, Column, ListArgs, Listing, Relation, attributes, names};
use crate::db::{Db, on_pool, values};

const TABLE: &str = "data_sessions";

/// A stored data session.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct SessionRow {
    pub session_key: i64,
    pub id_data_session: String,
    pub id_group: String,
    /// The GO gateway the session belongs to (`fromDevice`).
    pub id_physical_device: String,
    pub id_person: Option<String>,
    pub label: String,
    pub start: i64,
    pub end: Option<i64>,
    pub created_at: i64,
    pub created_by: Option<String>,
    pub updated_at: i64,
    pub updated_by: Option<String>,
    pub archived_at: Option<i64>,
    pub datapoint_count: i64,
}

/// The columns of a [`SessionRow`], in its order: its own field names, so that the record is
/// declared once.
fn output() -> &'static [&'static str] {
    static FIELDS: std::sync::LazyLock<&[&str]> = std::sync::LazyLock::new(crate::collection::output_of::<SessionRow>);
    *FIELDS
}

const fn col(attr: &'static str, kind: AttrKind) -> Column {
    Column {
        attr,
        table: TABLE,
        column: attr,
        kind,
    }
}

/// The filterable attributes: every stored field of the specification (all of them sortable),
/// then the group's label (docs/api.md, "Filters on related records").
pub const COLUMNS: [Column; 13] = [
    col("id_data_session", AttrKind::String),
    col("id_group", AttrKind::String),
    col("id_person", AttrKind::String),
    col("label", AttrKind::String),
    col("start", AttrKind::Integer),
    col("end", AttrKind::Integer),
    col("created_at", AttrKind::Integer),
    col("created_by", AttrKind::String),
    col("updated_at", AttrKind::Integer),
    col("updated_by", AttrKind::String),
    col("archived_at", AttrKind::Integer),
    col("datapoint_count", AttrKind::Integer),
    Column {
        attr: "group.label",
        table: "rel_group",
        column: "label",
        kind: AttrKind::String,
    },
];

/// The session's group, joined when a filter names its label.
const RELATIONS: [Relation; 1] = [Relation {
    alias: "rel_group",
    table: "groups",
    key: "id_group",
    via: "id_group",
}];

/// The filter attributes of the data-session collection.
pub const ATTRIBUTES: [Attribute; 13] = attributes(&COLUMNS);
/// The sortable attributes of the data-session collection: its own fields.
pub const SORTABLE: &[&str] = NAMES.split_at(12).0;
const NAMES: [&str; 13] = names(&COLUMNS);

fn select() -> sea_query::SelectStatement {
    let mut select = Query::select();
    select.columns(output().iter().map(|c| (TABLE, *c))).from(TABLE);
    select
}

/// A page of the sessions of the groups `scope` allows; default order creation time.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<SessionRow>> {
    let oldest_first = SortKey {
        attr: "created_at",
        descending: false,
    };
    const KEY: [Column; 1] = [col("session_key", AttrKind::Integer)];
    collection::scoped_list(db, TABLE, output(), &COLUMNS, &RELATIONS, args, oldest_first, &KEY).await
}

/// One session by its identifier.
pub async fn get(db: &Db, id_data_session: &str) -> Result<Option<SessionRow>> {
    let mut select = select();
    select.and_where(Expr::col((TABLE, "id_data_session")).eq(id_data_session));
    Ok(collection::fetch(db, &select, output()).await?.into_iter().next())
}

/// A series (container) that has points in a session.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct SessionSeries {
    pub id_container_data_latest: String,
    pub datatype: i64,
    pub source_device: String,
}

/// The series with points in the session: containers of the gateway and its assets holding at
/// least one point of it.
pub async fn series(db: &Db, session: &SessionRow) -> Result<Vec<SessionSeries>> {
    let sql = "SELECT c.id_container_data_latest, c.datatype, c.source_device FROM containers c \
               JOIN physical_devices d ON d.id_physical_device = c.source_device \
               WHERE (d.id_physical_device = $1 OR d.id_parent = $1) \
               AND EXISTS (SELECT 1 FROM raw_points r WHERE r.container_key = c.container_key AND r.session_key = $2) \
               ORDER BY c.source_device, c.datatype";
    Ok(db
        .rows::<SessionSeries>(sql, values![&session.id_physical_device, session.session_key])
        .await?)
}

/// The first and last whole second of a session's points, if it has any.
pub async fn time_range(db: &Db, session_key: i64) -> Result<Option<(i64, i64)>> {
    let sql = "SELECT MIN(seconds), MAX(seconds) FROM raw_points WHERE session_key = $1";
    let (first, last): (Option<i64>, Option<i64>) =
        on_pool!(db, |p| sqlx::query_as(sql).bind(session_key).fetch_one(p).await)?;
    Ok(first.zip(last))
}

/// One line of a session's CSV download.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct CsvPoint {
    pub seconds: i64,
    pub microseconds: i64,
    pub source_device: String,
    pub serial_hardware: String,
    pub datatype: i64,
    #[serde(deserialize_with = "crate::collection::real")]
    pub value: f64,
}

const CSV_OUTPUT: [&str; 6] = [
    "seconds",
    "microseconds",
    "source_device",
    "serial_hardware",
    "datatype",
    "value",
];

/// The session's points with `from <= seconds < to`, time ascending (ties by series). The CSV
/// is streamed window by window, so memory stays flat whatever the session's size.
pub async fn points_between(db: &Db, session_key: i64, from: i64, to: i64) -> Result<Vec<CsvPoint>> {
    let mut select = Query::select();
    select
        .columns([("r", "seconds"), ("r", "microseconds")])
        .column(("c", "source_device"))
        .column(("d", "serial_hardware"))
        .column(("c", "datatype"))
        .column(("r", "value"))
        .from_as("raw_points", "r")
        .inner_join(
            sea_query::TableRef::Table("containers".into(), Some("c".into())),
            Expr::col(("c", "container_key")).equals(("r", "container_key")),
        )
        .inner_join(
            sea_query::TableRef::Table("physical_devices".into(), Some("d".into())),
            Expr::col(("d", "id_physical_device")).equals(("c", "source_device")),
        )
        .and_where(Expr::col(("r", "session_key")).eq(session_key))
        .and_where(Expr::col(("r", "seconds")).gte(from))
        .and_where(Expr::col(("r", "seconds")).lt(to))
        .order_by(("r", "seconds"), sea_query::Order::Asc)
        .order_by(("r", "microseconds"), sea_query::Order::Asc)
        .order_by(("r", "container_key"), sea_query::Order::Asc);
    collection::fetch(db, &select, &CSV_OUTPUT).await
}
