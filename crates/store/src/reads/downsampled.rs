//! Downsampled data (`GET /api/v2/data-downsampled`): per-container buckets read from the
//! minute, hour and day rollups the ingest transaction keeps, or raw points for short
//! intervals, or a data session cut into 500 equal buckets (specification; docs/api.md, "Downsampled data").
//!
//! Every variant is one inner select with the same output columns, wrapped as `t`; filters,
//! sort and pages apply to `t` through the shared collection code. Both databases inline such a
//! derived table, so a `timestamp_seconds` bound reaches the rollup's primary key
//! (container, bucket).

use std::collections::HashMap;

use devicecloud_query::{AttrKind, Attribute, Filter, PageRequest, Scalar, SortKey};
use sea_query::{Alias, Condition, Expr, ExprTrait, Query, SelectStatement};
use serde_json::Value;

use crate::chunks::{self, Range};
use crate::collection::{self, Column, ListArgs, ListRequest, Listing, attributes, memory, names};
use crate::database::Result;
use crate::database::db::{Db, on_pool};
use crate::reads::raw_data::SERIES_OUTPUT;
use crate::reads::series::Series;
use crate::sql::backend::Backend;
use crate::sql::point_time::MICROS;
use crate::sql::scope::GroupScope;

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
    let computed = ComputedArgs {
        scope: &scope,
        filter: rest.as_ref(),
        sort,
        page,
        count_only,
    };
    let inner = match (&named, &session) {
        (_, Some(span)) => return computed.list(db, Source::Session(span)).await,
        // A session named but not found: nothing (below), whatever the resolution.
        (Some(_), None) => rollups("rollup_day"),
        (None, None) => match resolution(rest.as_ref(), now as f64).table() {
            Some(table) => rollups(table),
            None => return computed.list(db, Source::Raw(time_bounds(rest.as_ref()))).await,
        },
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

/// Where buckets computed from the points come from.
enum Source<'a> {
    /// Raw points as buckets of one, between the whole seconds of these bounds.
    Raw((Option<f64>, Option<f64>)),
    /// A data session: its points as buckets of one when it has fewer than
    /// [`SESSION_BUCKETS`], else [`SESSION_BUCKETS`] equal buckets of its span.
    Session(&'a SessionSpan),
}

/// The arguments of a downsampled list answered from the points themselves, read through
/// [`chunks::scan`] (packed chunks and rows alike); the page is cut in memory.
struct ComputedArgs<'a> {
    scope: &'a GroupScope<'a>,
    filter: Option<&'a Filter>,
    sort: Option<&'a SortKey>,
    page: PageRequest,
    count_only: bool,
}

/// Attributes of the series rather than of the bucket.
const SERIES_ATTRS: [&str; 4] = ["id_container_data_latest", "id_group", "datatype", "source_device"];

impl ComputedArgs<'_> {
    async fn list(self, db: &Db, source: Source<'_>) -> Result<Listing<Bucket>> {
        let backend = db.backend();
        // The conjuncts on series attributes choose the series in SQL; the rest apply to buckets.
        let (on_series, on_buckets) = self.filter.map_or((None, None), |f| {
            f.partition_conjuncts(&|attr| SERIES_ATTRS.contains(&attr))
        });
        let mut select = Query::select();
        select
            .columns(SERIES_OUTPUT.map(|c| (Alias::new("t"), Alias::new(c))))
            .from_as("containers", "t");
        let mut cond = Condition::all();
        if let Some(visible) = self.scope.condition("t", "id_group") {
            cond = cond.add(visible);
        }
        if let Some(filter) = &on_series {
            cond = cond.add(collection::filter_cond(filter, &COLUMNS, backend));
        }
        if let Source::Session(span) = source {
            cond = cond.add(Expr::col(("t", "id_group")).eq(span.id_group.clone()));
        }
        select.cond_where(cond);
        let series: Vec<Series> = collection::fetch(db, &select, &SERIES_OUTPUT).await?;
        let by_key: HashMap<i64, &Series> = series.iter().map(|s| (s.container_key, s)).collect();
        let keys: Vec<i64> = by_key.keys().copied().collect();
        let (range, session) = match source {
            Source::Raw((lower, upper)) => (
                Range::seconds(lower.map(|l| l.floor() as i64), upper.map(|u| u.floor() as i64)),
                None,
            ),
            Source::Session(span) => (Range::ALL, Some(span)),
        };
        let mut buckets = Vec::new();
        for points in chunks::scan(db, &keys, range, session.map(|s| s.key)).await? {
            let s = by_key[&points.container_key];
            let bucket = |timestamp_seconds: f64, min_val: f64, max_val: f64, avg_val: f64, count_val: i64| Bucket {
                id_container_data_latest: s.id_container_data_latest.clone(),
                id_group: s.id_group.clone(),
                datatype: s.datatype,
                source_device: s.source_device.clone(),
                timestamp_seconds,
                min_val,
                max_val,
                avg_val,
                count_val,
            };
            let p = &points.points;
            match session {
                Some(span) if span.datapoint_count >= SESSION_BUCKETS => {
                    for (idx, (min, max, sum, count)) in span.buckets(p, backend) {
                        let start = span.start as f64 + idx as f64 * span.width();
                        buckets.push(bucket(start, min, max, sum / count as f64, count));
                    }
                }
                _ => {
                    for i in 0..p.len() {
                        let at = seconds_since(p.times_us[i], 0, backend);
                        buckets.push(bucket(at, p.values[i], p.values[i], p.values[i], 1));
                    }
                }
            }
        }
        let default_sort = SortKey {
            attr: "timestamp_seconds",
            descending: false,
        };
        Ok(memory::list(
            buckets,
            memory::Request {
                filter: on_buckets.as_ref(),
                sort: self.sort.unwrap_or(&default_sort),
                ties: &["id_container_data_latest", "timestamp_seconds"],
                page: self.page,
                count_only: self.count_only,
                field: &bucket_field,
            },
        ))
    }
}

/// A bucket's attribute as the API shows it.
fn bucket_field(b: &Bucket, attr: &str) -> Option<Value> {
    let number = |v: f64| serde_json::Number::from_f64(v).map(Value::Number);
    match attr {
        "id_container_data_latest" => Some(Value::from(b.id_container_data_latest.clone())),
        "id_group" => Some(Value::from(b.id_group.clone())),
        "datatype" => Some(Value::from(b.datatype)),
        "source_device" => Some(Value::from(b.source_device.clone())),
        "timestamp_seconds" => number(b.timestamp_seconds),
        "min_val" => number(b.min_val),
        "max_val" => number(b.max_val),
        "avg_val" => number(b.avg_val),
        "count_val" => Some(Value::from(b.count_val)),
        _ => None,
    }
}

/// A point's time in seconds since the whole second `start`, with its fraction, as each
/// database computed it when these buckets were SQL: SQLite added the fraction to the seconds,
/// PostgreSQL divided the microseconds; the two may differ in the last bit, and each store's
/// answers stay what they were.
fn seconds_since(time_us: i64, start: i64, backend: Backend) -> f64 {
    match backend {
        Backend::Sqlite => {
            (time_us.div_euclid(MICROS) - start) as f64 + time_us.rem_euclid(MICROS) as f64 / 1_000_000.0
        }
        Backend::Postgres => (time_us - start.saturating_mul(MICROS)) as f64 / 1_000_000.0,
    }
}

impl SessionSpan {
    /// The width of one of the session's [`SESSION_BUCKETS`] buckets, in seconds.
    fn width(&self) -> f64 {
        Ord::max(self.end - self.start, 1) as f64 / SESSION_BUCKETS as f64
    }

    /// A series' points in the session's buckets: (index, (min, max, sum, count)), in index
    /// order; a point whose time falls outside the span counts in the nearest bucket.
    fn buckets(&self, points: &chunks::Columns, backend: Backend) -> Vec<(i64, (f64, f64, f64, i64))> {
        let width = self.width();
        let mut out: std::collections::BTreeMap<i64, (f64, f64, f64, i64)> = std::collections::BTreeMap::new();
        for i in 0..points.len() {
            let offset = seconds_since(points.times_us[i], self.start, backend) / width;
            let idx = (offset.floor() as i64).clamp(0, SESSION_BUCKETS - 1);
            let v = points.values[i];
            let b = out.entry(idx).or_insert((v, v, 0.0, 0));
            b.0 = b.0.min(v);
            b.1 = b.1.max(v);
            b.2 += v;
            b.3 += 1;
        }
        out.into_iter().collect()
    }
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
