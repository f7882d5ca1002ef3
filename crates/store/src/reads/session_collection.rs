//! Reading data sessions (`GET /api/v2/data-session`, its expands and the CSV download).

use std::collections::HashMap;

use devicecloud_query::{AttrKind, Attribute, SortKey};
use sea_query::{Expr, ExprTrait};

use crate::chunks::{self, Ordered, Point, Range};

use crate::collection::{self, Column, GROUP, GROUP_LABEL, ListArgs, Listing, Table, attributes, names, same_name};
use crate::database::Result;
use crate::database::db::{Db, values};
use crate::sql::point_time::{self, MICROS};

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
/// least one point of it, as a row or in a chunk.
pub async fn series(db: &Db, session: &SessionRow) -> Result<Vec<SessionSeries>> {
    let sql = "SELECT c.id_container_data_latest, c.datatype, c.source_device FROM containers c \
               JOIN physical_devices d ON d.id_physical_device = c.source_device \
               WHERE (d.id_physical_device = $1 OR d.id_parent = $1) \
               AND (EXISTS (SELECT 1 FROM raw_points r WHERE r.container_key = c.container_key AND r.session_key = $2) \
               OR EXISTS (SELECT 1 FROM point_chunks k WHERE k.container_key = c.container_key AND k.session_key = $2)) \
               ORDER BY c.source_device, c.datatype";
    db.rows::<SessionSeries>(sql, values![&session.id_physical_device, session.session_key])
        .await
}

/// The series that may hold points of a session: those of its gateway and the gateway's assets
/// (a look-up of a few rows, where finding the series that do hold some would read the whole
/// session).
pub(crate) async fn series_keys(db: &Db, session_key: i64) -> Result<Vec<i64>> {
    let sql = "SELECT c.container_key FROM data_sessions s \
               JOIN physical_devices d ON d.id_physical_device = s.id_physical_device OR d.id_parent = s.id_physical_device \
               JOIN containers c ON c.source_device = d.id_physical_device \
               WHERE s.session_key = $1";
    let rows: Vec<(i64,)> = db.rows(sql, values![session_key]).await?;
    Ok(rows.into_iter().map(|(key,)| key).collect())
}

/// The first and last whole second of a session's points, if it has any.
pub async fn time_range(db: &Db, session_key: i64) -> Result<Option<(i64, i64)>> {
    let (first, last) = (
        point_time::seconds_of_aggregate(db.backend(), "MIN", "r"),
        point_time::seconds_of_aggregate(db.backend(), "MAX", "r"),
    );
    // Each bound its own select, so that each is one step in the session's index.
    let sql = format!(
        "SELECT (SELECT {first} FROM raw_points r WHERE session_key = $1), \
         (SELECT {last} FROM raw_points r WHERE session_key = $1) \
         UNION ALL SELECT (SELECT MIN(first_us) / {MICROS} FROM point_chunks WHERE session_key = $1), \
         (SELECT MAX(last_us) / {MICROS} FROM point_chunks WHERE session_key = $1)"
    );
    let rows: Vec<(Option<i64>, Option<i64>)> = db.rows(sqlx::AssertSqlSafe(sql), values![session_key]).await?;
    let first = rows.iter().filter_map(|r| r.0).min();
    let last = rows.iter().filter_map(|r| r.1).max();
    Ok(first.zip(last))
}

/// What a line of a session's CSV shows of its series.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct CsvSeries {
    pub container_key: i64,
    pub source_device: String,
    pub serial_hardware: String,
    pub datatype: i64,
}

/// A session's points being read for its CSV, oldest first (ties by series), a batch at a
/// time in flat memory, also when many points share one second ([`Ordered`]).
pub struct SessionPoints {
    series: HashMap<i64, CsvSeries>,
    ordered: Option<Ordered>,
}

/// The points of session `session_key`, in batches of about `batch`.
pub async fn points(db: &Db, session_key: i64, batch: usize) -> Result<SessionPoints> {
    let keys = series_keys(db, session_key).await?;
    let mut series = HashMap::new();
    for part in keys.chunks(500) {
        let list = chunks::scan::key_list(part);
        let sql = format!(
            "SELECT c.container_key, c.source_device, d.serial_hardware, c.datatype FROM containers c \
             JOIN physical_devices d ON d.id_physical_device = c.source_device WHERE c.container_key IN ({list})"
        );
        let rows = db.rows::<CsvSeries>(sqlx::AssertSqlSafe(sql), values![]).await?;
        series.extend(rows.into_iter().map(|s| (s.container_key, s)));
    }
    let ordered = time_range(db, session_key).await?.map(|(first, last)| {
        Ordered::new(
            db.clone(),
            &keys,
            Range::seconds(Some(first), Some(last)),
            Some(session_key),
            batch,
        )
    });
    Ok(SessionPoints { series, ordered })
}

impl SessionPoints {
    /// The next points in time order, never empty; `None` at the end.
    pub async fn next_batch(&mut self) -> Result<Option<Vec<Point>>> {
        match self.ordered.as_mut() {
            Some(ordered) => ordered.next_batch().await,
            None => Ok(None),
        }
    }

    /// The series of a point's `key`.
    pub fn series(&self, key: i64) -> Option<&CsvSeries> {
        self.series.get(&key)
    }
}
