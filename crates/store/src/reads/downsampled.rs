//! Downsampled data (`GET /api/v2/data-downsampled`): per-container buckets read from the
//! minute, hour and day rollups the ingest transaction keeps, or raw points for short
//! intervals, or a data session cut into 500 equal buckets (specification; docs/api.md, "Downsampled data").
//!
//! Every variant is one inner select with the same output columns, wrapped as `t`; filters,
//! sort and pages apply to `t` through the shared collection code. Both databases inline such a
//! derived table, so a `timestamp_seconds` bound reaches the rollup's primary key
//! (container, bucket).

use devicecloud_query::{AttrKind, Attribute, CompareOp, Filter, Scalar, SortKey};
use sea_query::{Alias, Condition, Expr, ExprTrait, Query, SelectStatement};

use crate::collection::{self, Column, ListArgs, ListRequest, Listing, attributes, names};
use crate::database::Result;
use crate::database::db::{Db, on_pool};
use crate::sql::backend::Backend;
use crate::sql::point_time;

/// How finely a request is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    Day,
    Hour,
    Minute,
    Raw,
}

impl Resolution {
    /// The rollup table of this resolution (`None` for raw points).
    pub(crate) fn table(self) -> Option<&'static str> {
        match self {
            Resolution::Day => Some("rollup_day"),
            Resolution::Hour => Some("rollup_hour"),
            Resolution::Minute => Some("rollup_minute"),
            Resolution::Raw => None,
        }
    }
}

impl Resolution {
    /// The width of one bucket in seconds; `None` for raw points.
    pub fn bucket_seconds(self) -> Option<i64> {
        match self {
            Resolution::Day => Some(86_400),
            Resolution::Hour => Some(3600),
            Resolution::Minute => Some(60),
            Resolution::Raw => None,
        }
    }
}

const HOUR: f64 = 3600.0;
const DAY: f64 = 86_400.0;
/// A data session is cut into this many equal buckets (docs/api.md, "Downsampled data").
pub const SESSION_BUCKETS: i64 = 500;

/// One downsampled point.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct Bucket {
    pub id_container_data_latest: String,
    pub id_group: String,
    pub datatype: i64,
    pub source_device: String,
    /// Bucket start; fractional for session buckets and raw points with microseconds.
    #[serde(deserialize_with = "crate::collection::real")]
    pub timestamp_seconds: f64,
    #[serde(deserialize_with = "crate::collection::real")]
    pub min_val: f64,
    #[serde(deserialize_with = "crate::collection::real")]
    pub max_val: f64,
    #[serde(deserialize_with = "crate::collection::real")]
    pub avg_val: f64,
    pub count_val: i64,
}

/// The columns of a [`Bucket`], in its order: its own field names, so that the record is
/// declared once.
fn output() -> &'static [&'static str] {
    static FIELDS: std::sync::LazyLock<&[&str]> = std::sync::LazyLock::new(crate::collection::output_of::<Bucket>);
    *FIELDS
}

const fn col(attr: &'static str, kind: AttrKind) -> Column {
    collection::column(attr, "t", attr, kind)
}

/// The filterable and sortable attributes (`id_data_session` is read apart, see [`list`]).
pub const COLUMNS: [Column; 10] = [
    col("id_container_data_latest", AttrKind::String),
    col("id_group", AttrKind::String),
    col("datatype", AttrKind::Integer),
    col("source_device", AttrKind::String),
    col("timestamp_seconds", AttrKind::Number),
    col("min_val", AttrKind::Number),
    col("max_val", AttrKind::Number),
    col("avg_val", AttrKind::Number),
    col("count_val", AttrKind::Integer),
    col("id_data_session", AttrKind::String),
];

/// The filter attributes of the downsampled collection.
pub const ATTRIBUTES: [Attribute; 10] = attributes(&COLUMNS);
/// The sortable attributes (all but `id_data_session`).
pub const SORTABLE: &[&str] = NAMES.split_at(9).0;
const NAMES: [&str; 10] = names(&COLUMNS);

/// The `timestamp_seconds` interval the top-level conjunction of `filter` asks for: the
/// tightest lower and upper bounds. Bounds inside `or` / `not` are not an interval and are left
/// out (the request is then read as unbounded on that side).
pub fn time_bounds(filter: Option<&Filter>) -> (Option<f64>, Option<f64>) {
    filter.map_or((None, None), |f| f.numeric_bounds("timestamp_seconds"))
}

/// The resolution rule (docs/api.md, "Downsampled data"): L = upper − lower; L > 21 days → day; 1
/// day < L ≤ 21 days → hour; 1 hour < L ≤ 1 day → minute; L ≤ 1 hour → raw. No lower bound → day;
/// only a lower bound → the upper bound is `now`.
pub fn resolution(filter: Option<&Filter>, now: f64) -> Resolution {
    let (lower, upper) = time_bounds(filter);
    Resolution::between(lower, upper, now)
}

impl Resolution {
    /// The resolution rule for an interval: see [`resolution`].
    pub fn between(lower: Option<f64>, upper: Option<f64>, now: f64) -> Resolution {
        let Some(lower) = lower else {
            return Resolution::Day;
        };
        let length = upper.unwrap_or(now) - lower;
        if length > 21.0 * DAY {
            Resolution::Day
        } else if length > DAY {
            Resolution::Hour
        } else if length > HOUR {
            Resolution::Minute
        } else {
            Resolution::Raw
        }
    }
}

/// The `id_data_session` a filter names by equality at its top level.
pub fn session_id(filter: Option<&Filter>) -> Option<String> {
    filter?.equal_values("id_data_session").find_map(|value| match value {
        Scalar::Str(s) => Some(s.clone()),
        Scalar::Int(i) => Some(i.to_string()),
        _ => None,
    })
}

/// `filter` without its `id_data_session` comparisons (they select the session instead).
fn without_session(filter: &Filter) -> Option<Filter> {
    filter.without_comparisons("id_data_session")
}

/// Why `filter` cannot be answered on downsampled data: a session's buckets are cut from its
/// own span, so a session is chosen by one top-level equality, and any other form over
/// `id_data_session` (`neq`, `in`, ranges, `like`, inside `or` or `not`) has no buckets to
/// give (docs/api.md, "Downsampled data").
pub fn unanswerable_session_filter(filter: Option<&Filter>) -> Option<String> {
    let filter = filter?;
    let by_equality = |part: &&Filter| {
        matches!(
            part,
            Filter::Compare {
                attr: "id_data_session",
                op: devicecloud_query::CompareOp::Eq,
                ..
            }
        )
    };
    let other = filter
        .conjuncts()
        .into_iter()
        .filter(|part| !by_equality(part))
        .any(|part| part.mentions(&|attr| attr == "id_data_session"));
    other.then(|| {
        "id_data_session selects one data session by equality (filter[id_data_session]=<id>); \
         on downsampled data it cannot be used with another operator, nor inside or/not."
            .to_string()
    })
}

/// Whether a filter mentions `id_data_session` anywhere but as a top-level comparison.
fn session_elsewhere(filter: &Filter) -> bool {
    without_session(filter)
        .as_ref()
        .is_some_and(|rest| rest.mentions(&|attr| attr == "id_data_session"))
}

/// The container columns every variant starts with.
fn container_columns(select: &mut SelectStatement) {
    select
        .column(("c", "id_container_data_latest"))
        .column(("c", "id_group"))
        .column(("c", "datatype"))
        .column(("c", "source_device"));
}

fn join_containers(select: &mut SelectStatement, from: &str) {
    select.inner_join(
        sea_query::TableRef::Table("containers".into(), Some("c".into())),
        Expr::col(("c", "container_key")).equals((Alias::new(from), Alias::new("container_key"))),
    );
}

/// Rollup buckets of one table; `timestamp_seconds` stays the integer bucket so that a bound
/// on it is a range on the primary key.
fn rollups(table: &str) -> SelectStatement {
    let mut select = Query::select();
    container_columns(&mut select);
    select
        .expr_as(Expr::col(("r", "bucket")), "timestamp_seconds")
        .column(("r", "min_val"))
        .column(("r", "max_val"))
        .expr_as(Expr::cust("r.sum_val / r.count_val"), "avg_val")
        .column(("r", "count_val"))
        .from_as(Alias::new(table), "r");
    join_containers(&mut select, "r");
    select
}

/// Raw points as buckets of one, between whole-second bounds (keeps the primary key usable).
fn raw(lower: Option<f64>, upper: Option<f64>, session_key: Option<i64>, backend: Backend) -> SelectStatement {
    let mut select = Query::select();
    container_columns(&mut select);
    select
        .expr_as(
            Expr::cust(format!(
                "CAST({} AS DOUBLE PRECISION)",
                point_time::seconds_since(backend, "r", 0)
            )),
            "timestamp_seconds",
        )
        .expr_as(Expr::col(("r", "value")), "min_val")
        .expr_as(Expr::col(("r", "value")), "max_val")
        .expr_as(Expr::col(("r", "value")), "avg_val")
        .expr_as(Expr::cust("CAST(1 AS BIGINT)"), "count_val")
        .from_as("raw_points", "r");
    join_containers(&mut select, "r");
    for (bound, op) in [(lower, CompareOp::Gte), (upper, CompareOp::Lte)] {
        if let Some(bound) = bound {
            select.and_where(point_time::compare_seconds(backend, "r", op, bound.floor() as i64));
        }
    }
    if let Some(key) = session_key {
        select.and_where(Expr::col(("r", "session_key")).eq(key));
    }
    select
}

/// A session's points in `SESSION_BUCKETS` equal buckets of its span (start → end, or now
/// while active); a point whose time falls outside the span is counted in the nearest bucket.
fn session_buckets(session: &SessionSpan, backend: Backend) -> SelectStatement {
    let width = Ord::max(session.end - session.start, 1) as f64 / SESSION_BUCKETS as f64;
    let offset = format!("{} / {width:?}", point_time::seconds_since(backend, "r", session.start));
    let last = SESSION_BUCKETS - 1;
    let index = match backend {
        Backend::Sqlite => format!("MAX(0, MIN({last}, CAST({offset} AS INTEGER)))"),
        Backend::Postgres => format!("GREATEST(0, LEAST({last}, CAST(FLOOR({offset}) AS BIGINT)))"),
    };
    let mut inner = Query::select();
    inner
        .column(("r", "container_key"))
        .expr_as(Expr::cust(index), "idx")
        .expr_as(Expr::cust("MIN(r.value)"), "min_val")
        .expr_as(Expr::cust("MAX(r.value)"), "max_val")
        .expr_as(Expr::cust("CAST(AVG(r.value) AS DOUBLE PRECISION)"), "avg_val")
        .expr_as(Expr::cust("CAST(COUNT(*) AS BIGINT)"), "count_val")
        .from_as("raw_points", "r")
        .and_where(Expr::col(("r", "session_key")).eq(session.key))
        .group_by_col(("r", "container_key"))
        .group_by_col("idx");
    let mut select = Query::select();
    container_columns(&mut select);
    select
        .expr_as(
            Expr::cust(format!(
                "CAST({start} + b.idx * {width:?} AS DOUBLE PRECISION)",
                start = session.start
            )),
            "timestamp_seconds",
        )
        .column(("b", "min_val"))
        .column(("b", "max_val"))
        .column(("b", "avg_val"))
        .column(("b", "count_val"))
        .from_subquery(inner, "b");
    join_containers(&mut select, "b");
    select
}

/// What bucketing a session needs.
#[derive(Clone, Debug, sqlx::FromRow)]
struct SessionSpan {
    key: i64,
    id_group: String,
    start: i64,
    end: i64,
    datapoint_count: i64,
}

async fn session_span(db: &Db, id_data_session: &str, now: i64) -> Result<Option<SessionSpan>> {
    let sql = "SELECT session_key AS key, id_group, start, COALESCE(\"end\", $2) AS \"end\", datapoint_count \
               FROM data_sessions WHERE id_data_session = $1";
    Ok(on_pool!(db, |p| sqlx::query_as::<_, SessionSpan>(sql)
        .bind(id_data_session)
        .bind(now)
        .fetch_optional(p)
        .await)?)
}

/// A page of downsampled points of the groups `scope` allows; default order ascending time.
pub async fn list(db: &Db, args: ListArgs<'_>, now: i64) -> Result<Listing<Bucket>> {
    let ListArgs {
        scope,
        filter,
        sort,
        page,
        count_only,
    } = args;
    let named = session_id(filter);
    let session = match &named {
        Some(id) => session_span(db, id, now).await?,
        None => None,
    };
    // Sessions are chosen by one top-level equality; any other mention of `id_data_session`
    // matches nothing rather than everything.
    let rest = if filter.is_some_and(session_elsewhere) {
        Some(Filter::Never)
    } else {
        filter.and_then(without_session)
    };
    let inner = match &session {
        Some(span) if span.datapoint_count < SESSION_BUCKETS => raw(None, None, Some(span.key), db.backend()),
        Some(span) => session_buckets(span, db.backend()),
        None => {
            let (lower, upper) = time_bounds(rest.as_ref());
            match resolution(rest.as_ref(), now as f64).table() {
                Some(table) => rollups(table),
                None => raw(lower, upper, None, db.backend()),
            }
        }
    };
    let mut select = Query::select();
    select
        .columns(
            ["id_container_data_latest", "id_group", "datatype", "source_device"]
                .map(|c| (Alias::new("t"), Alias::new(c))),
        )
        // PostgreSQL decodes the column as a float only if it is one; SQLite's JSON page takes
        // an integer bucket as it is (no text conversion).
        .expr_as(
            match db.backend() {
                Backend::Postgres => Expr::cust("CAST(t.timestamp_seconds AS DOUBLE PRECISION)"),
                Backend::Sqlite => Expr::col(("t", "timestamp_seconds")),
            },
            "timestamp_seconds",
        )
        .columns(["min_val", "max_val", "avg_val", "count_val"].map(|c| (Alias::new("t"), Alias::new(c))))
        .from_subquery(inner, "t");
    let mut cond = Condition::all();
    if let Some(visible) = scope.condition("t", "id_group") {
        cond = cond.add(visible);
    }
    match (&named, &session) {
        (Some(_), None) => cond = cond.add(Expr::val(1).eq(0)),
        (_, Some(span)) => cond = cond.add(Expr::col(("t", "id_group")).eq(span.id_group.clone())),
        (None, None) => {}
    }
    select.cond_where(cond);
    let req = ListRequest {
        filter: rest.as_ref(),
        sort,
        default_sort: SortKey {
            attr: "timestamp_seconds",
            descending: false,
        },
        // A bucket is one series at one start: ties in any sort key fall back to both, so that
        // pages never overlap or skip (docs/api.md "Sorting").
        primary_key: &[
            col("id_container_data_latest", AttrKind::String),
            col("timestamp_seconds", AttrKind::Number),
        ],
        page,
        count_only,
        count: None,
    };
    collection::list(db, select, output(), &COLUMNS, req).await
}

#[cfg(test)]
mod tests {
    use devicecloud_query::CompareOp;

    use super::*;

    fn cmp(op: CompareOp, v: i64) -> Filter {
        Filter::Compare {
            attr: "timestamp_seconds",
            op,
            value: Scalar::Int(v),
        }
    }

    #[test]
    fn the_resolution_follows_the_interval_length() {
        let between = |lo: i64, hi: i64| Filter::And(vec![cmp(CompareOp::Gt, lo), cmp(CompareOp::Lt, hi)]);
        let now = 10_000_000.0;
        assert_eq!(resolution(None, now), Resolution::Day);
        assert_eq!(resolution(Some(&cmp(CompareOp::Lt, 5)), now), Resolution::Day);
        assert_eq!(resolution(Some(&between(0, 21 * 86_400 + 1)), now), Resolution::Day);
        assert_eq!(resolution(Some(&between(0, 21 * 86_400)), now), Resolution::Hour);
        assert_eq!(resolution(Some(&between(0, 86_401)), now), Resolution::Hour);
        assert_eq!(resolution(Some(&between(0, 86_400)), now), Resolution::Minute);
        assert_eq!(resolution(Some(&between(0, 3601)), now), Resolution::Minute);
        assert_eq!(resolution(Some(&between(0, 3600)), now), Resolution::Raw);
        // Only a lower bound: the upper one is now.
        assert_eq!(
            resolution(Some(&cmp(CompareOp::Gte, 10_000_000 - 600)), now),
            Resolution::Raw
        );
        assert_eq!(
            resolution(Some(&cmp(CompareOp::Gte, 10_000_000 - 7200)), now),
            Resolution::Minute
        );
    }

    #[test]
    fn bounds_come_from_the_top_level_conjunction_only() {
        let or = Filter::Or(vec![cmp(CompareOp::Gt, 1), cmp(CompareOp::Lt, 2)]);
        assert_eq!(time_bounds(Some(&or)), (None, None));
        let tight = Filter::And(vec![
            cmp(CompareOp::Gt, 1),
            cmp(CompareOp::Gte, 5),
            cmp(CompareOp::Lt, 9),
        ]);
        assert_eq!(time_bounds(Some(&tight)), (Some(5.0), Some(9.0)));
    }
}
