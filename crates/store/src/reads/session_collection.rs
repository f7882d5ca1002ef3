//! Reading data sessions (`GET /api/v2/data-session`, its expands and the CSV download).

use devicecloud_query::{AttrKind, Attribute, CompareOp, SortKey};
use sea_query::{Expr, ExprTrait, Query};

use crate::collection::{self, Column, GROUP, GROUP_LABEL, ListArgs, Listing, Table, attributes, names, same_name};
use crate::database::Result;
use crate::database::db::{Db, on_pool, values};
use crate::sql::point_time::{self, TimePart};

const TABLE: &str = "data_sessions";

/// A stored data session; serialised, the API record's stored fields.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize, serde::Serialize)]
pub struct SessionRow {
    #[serde(skip_serializing)]
    pub session_key: i64,
    pub id_data_session: String,
    pub id_group: String,
    /// The GO gateway the session belongs to (`fromDevice`).
    #[serde(skip_serializing)]
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

/// The filterable attributes: every stored field of the specification (all of them sortable),
/// then the group's label (docs/api.md, "Filters on related records").
pub const COLUMNS: [Column; 13] = [
    same_name(TABLE, "id_data_session", AttrKind::String),
    same_name(TABLE, "id_group", AttrKind::String),
    same_name(TABLE, "id_person", AttrKind::String),
    same_name(TABLE, "label", AttrKind::String),
    same_name(TABLE, "start", AttrKind::Integer),
    same_name(TABLE, "end", AttrKind::Integer),
    same_name(TABLE, "created_at", AttrKind::Integer),
    same_name(TABLE, "created_by", AttrKind::String),
    same_name(TABLE, "updated_at", AttrKind::Integer),
    same_name(TABLE, "updated_by", AttrKind::String),
    same_name(TABLE, "archived_at", AttrKind::Integer),
    same_name(TABLE, "datapoint_count", AttrKind::Integer),
    GROUP_LABEL,
];

/// The filter attributes of the data-session collection.
pub const ATTRIBUTES: [Attribute; 13] = attributes(&COLUMNS);
/// The sortable attributes of the data-session collection: its own fields.
pub const SORTABLE: &[&str] = NAMES.split_at(12).0;
const NAMES: [&str; 13] = names(&COLUMNS);

/// The data sessions of the groups a caller may see, oldest first.
static SESSIONS: Table<SessionRow> = Table::new(
    TABLE,
    &COLUMNS,
    &[GROUP],
    SortKey::asc("created_at"),
    &[same_name(TABLE, "session_key", AttrKind::Integer)],
);

/// A page of the sessions of the groups `scope` allows; default order creation time.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<SessionRow>> {
    SESSIONS.scoped(db, args).await
}

/// One session by its identifier.
pub async fn get(db: &Db, id_data_session: &str) -> Result<Option<SessionRow>> {
    let mut select = SESSIONS.select();
    select.and_where(Expr::col((TABLE, "id_data_session")).eq(id_data_session));
    Ok(collection::fetch(db, &select, SESSIONS.output())
        .await?
        .into_iter()
        .next())
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
    db.rows::<SessionSeries>(sql, values![&session.id_physical_device, session.session_key])
        .await
}

/// The first and last whole second of a session's points, if it has any.
pub async fn time_range(db: &Db, session_key: i64) -> Result<Option<(i64, i64)>> {
    let (first, last) = (
        point_time::seconds_of_aggregate(db.backend(), "MIN", "r"),
        point_time::seconds_of_aggregate(db.backend(), "MAX", "r"),
    );
    let sql = format!("SELECT {first}, {last} FROM raw_points r WHERE session_key = $1");
    let (first, last): (Option<i64>, Option<i64>) =
        on_pool!(db, |p| sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(session_key)
            .fetch_one(p)
            .await)?;
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
    /// The series, for the keyset of the next page.
    pub container_key: i64,
}

impl CsvPoint {
    /// Where the page after this point starts.
    pub fn cursor(&self) -> CsvCursor {
        CsvCursor {
            seconds: self.seconds,
            microseconds: self.microseconds,
            container_key: self.container_key,
        }
    }
}

/// The last point of a page of a session's CSV: the next page starts after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CsvCursor {
    pub seconds: i64,
    pub microseconds: i64,
    pub container_key: i64,
}

const CSV_OUTPUT: [&str; 7] = [
    "seconds",
    "microseconds",
    "source_device",
    "serial_hardware",
    "datatype",
    "value",
    "container_key",
];

/// At most `limit` of the session's points with `from <= seconds < to`, after `after` when
/// given, time ascending (ties by series). The CSV is streamed page by page, so memory stays
/// flat whatever the session's size, also when one second holds millions of points.
pub async fn points_between(
    db: &Db,
    session_key: i64,
    (from, to): (i64, i64),
    after: Option<CsvCursor>,
    limit: u64,
) -> Result<Vec<CsvPoint>> {
    let mut select = Query::select();
    select
        .expr_as(TimePart::Seconds.expr(db.backend(), "r"), "seconds")
        .expr_as(TimePart::Micros.expr(db.backend(), "r"), "microseconds")
        .column(("c", "source_device"))
        .column(("d", "serial_hardware"))
        .column(("c", "datatype"))
        .column(("r", "value"))
        .column(("r", "container_key"))
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
        .and_where(point_time::compare_seconds(db.backend(), "r", CompareOp::Gte, from))
        .and_where(point_time::compare_seconds(db.backend(), "r", CompareOp::Lt, to));
    if let Some(c) = after {
        select.and_where(point_time::after(
            db.backend(),
            "r",
            c.seconds,
            c.microseconds,
            c.container_key,
        ));
    }
    for time in point_time::order(db.backend(), "r") {
        select.order_by_expr(time, sea_query::Order::Asc);
    }
    select
        .order_by(("r", "container_key"), sea_query::Order::Asc)
        .limit(limit);
    collection::fetch(db, &select, &CSV_OUTPUT).await
}
