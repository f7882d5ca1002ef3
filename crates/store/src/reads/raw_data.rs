//! Raw data points (`GET /api/v2/data`): every stored point of the groups asked for, latest
//! first, fast on large data.
//!
//! The series (containers) a request covers are chosen in SQL, with the parts of the filter
//! that name only series attributes (group, device, datatype, container). Their points are read
//! through [`chunks::scan`], which merges packed chunks with the rows not packed yet, and the
//! rest of the filter is applied to them in memory ([`Filter::matches_fields`]).
//!
//! Sorted by time (the default, latest first), the page is looked for in a time window that
//! grows from the newest point backwards (doubling) until it holds enough points, so the cost
//! follows the page asked for, not the size of the group. The total of a filter that names only
//! series attributes comes from the day rollups, which count every stored point exactly once.
//! Any other filter or sort reads the range the filter allows, a week at a time, keeping only
//! the points the page needs.

use std::cmp::Ordering;
use std::collections::HashMap;

use devicecloud_query::{AttrKind, Attribute, CompareOp, Filter, Scalar, SortKey};
use sea_query::{Condition, Expr, ExprTrait, Query, SelectStatement};
use serde_json::Value;

use crate::chunks::{self, Range};
use crate::collection::{self, Column, ListArgs, Listing, attributes, filter_cond, names};
use crate::database::Result;
use crate::database::db::Db;
use crate::reads::series::Series;
use crate::sql::point_time::{MICROS, TimePart};
use crate::sql::scope::GroupScope;

/// A raw data point with every field of the specification; it serializes as the API's record.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize, serde::Serialize)]
pub struct RawPoint {
    pub id_container_data_latest: String,
    pub id_group: String,
    pub datatype: i64,
    pub source_device: String,
    pub timestamp_seconds: i64,
    pub microseconds: i64,
    #[serde(deserialize_with = "crate::collection::real")]
    pub value: f64,
}

const fn col(attr: &'static str, kind: AttrKind) -> Column {
    collection::column(attr, "c", attr, kind)
}

/// A part of the point's time (`point_time`): `column` names SQLite's column.
const fn time(attr: &'static str, column: &'static str, part: TimePart) -> Column {
    Column {
        time: Some(part),
        ..collection::column(attr, "r", column, AttrKind::Integer)
    }
}

/// The filterable and sortable attributes; `c` is the container, `r` the point.
pub const COLUMNS: [Column; 7] = [
    col("id_container_data_latest", AttrKind::String),
    col("id_group", AttrKind::String),
    col("datatype", AttrKind::Integer),
    col("source_device", AttrKind::String),
    time("timestamp_seconds", "seconds", TimePart::Seconds),
    time("microseconds", "microseconds", TimePart::Micros),
    collection::column("value", "r", "value", AttrKind::Number),
];

/// The filter attributes of the raw data collection.
pub const ATTRIBUTES: [Attribute; 7] = attributes(&COLUMNS);
/// The sortable attributes of the raw data collection.
pub const SORTABLE: [&str; 7] = names(&COLUMNS);

/// Attributes of the container rather than of the point.
const CONTAINER_ATTRS: [&str; 4] = ["id_container_data_latest", "id_group", "datatype", "source_device"];

/// The first window holds this many times the points needed, by the average density, so that
/// one probe usually suffices; the window doubles until the page fits.
const FIRST_WINDOW_MARGIN: f64 = 1.25;

/// About how many points one read of the chunks and rows brings into memory.
const PIECE_POINTS: f64 = 1_000_000.0;

/// The columns of a [`Series`], in its order.
pub(crate) const SERIES_OUTPUT: [&str; 5] = [
    "container_key",
    "id_container_data_latest",
    "id_group",
    "datatype",
    "source_device",
];

/// The filter split into what SQL applies to the series (the top-level conjuncts that name only
/// series attributes) and what is applied to each point in memory (the rest).
pub(crate) fn split(filter: Option<&Filter>) -> (Option<Filter>, Option<Filter>) {
    filter.map_or((None, None), |f| {
        f.partition_conjuncts(&|attr| CONTAINER_ATTRS.contains(&attr))
    })
}

/// The series a request covers: visible to the caller and matching `filter`.
pub(crate) fn containers(scope: &GroupScope<'_>, filter: Option<&Filter>, db: &Db) -> SelectStatement {
    let mut select = Query::select();
    select.column(("c", "container_key")).from_as("containers", "c");
    let mut cond = Condition::all();
    if let Some(visible) = scope.condition("c", "id_group") {
        cond = cond.add(visible);
    }
    if let Some(filter) = filter {
        cond = cond.add(filter_cond(filter, &COLUMNS, db.backend()));
    }
    select.cond_where(cond);
    select
}

/// A point found for a page: its time, its series and its value.
#[derive(Clone, Copy, Debug)]
struct Hit {
    time_us: i64,
    key: i64,
    value: f64,
}

/// What a list request is about: its series and the filter left for the points.
struct Request<'a> {
    db: &'a Db,
    series: HashMap<i64, Series>,
    /// The keys of `series`, in order.
    keys: Vec<i64>,
    points: Option<Filter>,
    range: Range,
    /// The newest point's whole second and the oldest day's start ([`span`]).
    span: Option<(i64, i64)>,
    /// Points a microsecond over the span, from the day rollups.
    density: f64,
}

impl Request<'_> {
    /// Whether point `i` of series `key` passes the filter left for the points.
    fn matches(&self, key: i64, time_us: i64, value: f64) -> bool {
        let Some(filter) = &self.points else {
            return true;
        };
        let series = &self.series[&key];
        filter.matches_fields(&|attr| field(series, time_us, value, attr))
    }

    /// Every point in `window` (within the request's range) that passes the filter; `keep`
    /// receives them. The window is read in pieces of about [`PIECE_POINTS`] points by the
    /// average density, so that memory stays bounded whatever the window.
    async fn each_hit(&self, window: Range, keep: &mut impl FnMut(Hit)) -> Result<()> {
        let window = Range {
            from_us: Ord::max(window.from_us, self.range.from_us),
            to_us: Ord::min(window.to_us, self.range.to_us),
        };
        let piece = (PIECE_POINTS / self.density.max(1e-18)).clamp(MICROS as f64, 1e18) as i64;
        let mut from = window.from_us;
        while from < window.to_us {
            let to = Ord::min(from.saturating_add(piece), window.to_us);
            let range = Range {
                from_us: from,
                to_us: to,
            };
            for series in chunks::scan(self.db, &self.keys, range, None).await? {
                let p = &series.points;
                for i in 0..p.len() {
                    if self.matches(series.container_key, p.times_us[i], p.values[i]) {
                        keep(Hit {
                            time_us: p.times_us[i],
                            key: series.container_key,
                            value: p.values[i],
                        });
                    }
                }
            }
            from = to;
        }
        Ok(())
    }

    /// The newest point's whole second and the oldest day's start, if there are points: the
    /// newest from the series' latest values (the last second of the newest day in the rollups
    /// for series that have none, as a store filled by hand), the oldest from the day rollups.
    async fn span(db: &Db, keys: &SelectStatement) -> Result<Option<(i64, i64)>> {
        let mut newest = Query::select();
        newest
            .expr(Expr::cust("MAX(latest_seconds)"))
            .from("containers")
            .and_where(Expr::col("container_key").in_subquery(keys.clone()));
        let mut days = Query::select();
        days.expr(Expr::cust("MIN(bucket)"))
            .expr(Expr::cust("MAX(bucket)"))
            .from("rollup_day")
            .and_where(Expr::col("container_key").in_subquery(keys.clone()));
        let latest = nullable_i64(db, &newest).await?;
        let (sql, values) = db.build(&days);
        let days: Option<(Option<i64>, Option<i64>)> = db.row(sqlx::AssertSqlSafe(sql), values).await?;
        let Some((Some(oldest), Some(last_day))) = days else {
            return Ok(latest.map(|n| (n, n)));
        };
        let newest = latest.unwrap_or(last_day + 86_399);
        Ok(Some((newest, Ord::min(oldest, newest))))
    }

    /// Every point the filter allows, from the oldest.
    async fn each_in_range(&self, keep: &mut impl FnMut(Hit)) -> Result<()> {
        let Some((newest, oldest)) = self.span else {
            return Ok(());
        };
        let window = Range {
            from_us: oldest.saturating_mul(MICROS),
            to_us: newest.saturating_add(1).saturating_mul(MICROS),
        };
        self.each_hit(window, keep).await
    }
}

/// The whole seconds (first, last, both included) that `filter` allows when it is a
/// conjunction of comparisons of `timestamp_seconds` with integers, which the range then holds
/// exactly; `None` for any other filter.
pub(crate) fn exact_seconds(filter: &Filter) -> Option<(Option<i64>, Option<i64>)> {
    let (mut first, mut last): (Option<i64>, Option<i64>) = (None, None);
    for part in filter.conjuncts() {
        let Filter::Compare {
            attr: "timestamp_seconds",
            op,
            value: Scalar::Int(v),
        } = part
        else {
            return None;
        };
        let (lo, hi) = match op {
            CompareOp::Gt => (Some(v.saturating_add(1)), None),
            CompareOp::Gte => (Some(*v), None),
            CompareOp::Lt => (None, Some(v.saturating_sub(1))),
            CompareOp::Lte => (None, Some(*v)),
            CompareOp::Eq => (Some(*v), Some(*v)),
            CompareOp::Neq => return None,
        };
        if let Some(lo) = lo {
            first = Some(first.map_or(lo, |f| Ord::max(f, lo)));
        }
        if let Some(hi) = hi {
            last = Some(last.map_or(hi, |l| Ord::min(l, hi)));
        }
    }
    Some((first, last))
}

/// The times the filter left for the points allows, as a range: exact for whole-second bounds,
/// else the whole seconds around its bounds (the filter itself then decides each point).
pub(crate) fn time_range(points: Option<&Filter>) -> Range {
    let (lower, upper) = points.map_or((None, None), |f| f.numeric_bounds("timestamp_seconds"));
    match points.and_then(exact_seconds) {
        Some((first, last)) => Range::seconds(first, last),
        None => Range::seconds(lower.map(|l| l.floor() as i64), upper.map(|u| u.ceil() as i64)),
    }
}

/// The attribute `attr` of a point of `series`, as the API shows it.
pub(crate) fn field(series: &Series, time_us: i64, value: f64, attr: &str) -> Option<Value> {
    Some(match attr {
        "id_container_data_latest" => Value::from(series.id_container_data_latest.clone()),
        "id_group" => Value::from(series.id_group.clone()),
        "datatype" => Value::from(series.datatype),
        "source_device" => Value::from(series.source_device.clone()),
        "timestamp_seconds" => Value::from(time_us.div_euclid(MICROS)),
        "microseconds" => Value::from(time_us.rem_euclid(MICROS)),
        "value" => Value::from(serde_json::Number::from_f64(value)?),
        _ => return None,
    })
}

async fn nullable_i64(db: &Db, select: &SelectStatement) -> Result<Option<i64>> {
    let (sql, values) = db.build(select);
    let row: Option<(Option<i64>,)> = db.row(sqlx::AssertSqlSafe(sql), values).await?;
    Ok(row.and_then(|(v,)| v))
}

/// The order of two points under `sort`: its attribute, then time and series (the tie-breaks
/// that keep pages from overlapping), all in the sort's direction. Text orders as the SQL
/// collections order it, by its lower case.
fn order(sort: &SortKey, series: &HashMap<i64, Series>, a: &Hit, b: &Hit) -> Ordering {
    let text = |hit: &Hit, f: fn(&Series) -> &str| f(&series[&hit.key]).to_ascii_lowercase();
    let first = match sort.attr {
        "value" => a.value.partial_cmp(&b.value).unwrap_or(Ordering::Equal),
        "datatype" => series[&a.key].datatype.cmp(&series[&b.key].datatype),
        "microseconds" => a.time_us.rem_euclid(MICROS).cmp(&b.time_us.rem_euclid(MICROS)),
        "id_container_data_latest" => {
            text(a, |s| &s.id_container_data_latest).cmp(&text(b, |s| &s.id_container_data_latest))
        }
        "id_group" => text(a, |s| &s.id_group).cmp(&text(b, |s| &s.id_group)),
        "source_device" => text(a, |s| &s.source_device).cmp(&text(b, |s| &s.source_device)),
        _ => Ordering::Equal,
    };
    let ordering = first.then(a.time_us.cmp(&b.time_us)).then(a.key.cmp(&b.key));
    if sort.descending { ordering.reverse() } else { ordering }
}

/// Keeps the first `needed` hits by `cmp` of a stream of them, in memory of at most twice that.
struct Best<'a, F: Fn(&Hit, &Hit) -> Ordering> {
    needed: usize,
    cmp: &'a F,
    hits: Vec<Hit>,
}

impl<F: Fn(&Hit, &Hit) -> Ordering> Best<'_, F> {
    fn push(&mut self, hit: Hit) {
        self.hits.push(hit);
        if self.hits.len() >= self.needed.saturating_mul(2).max(1024) {
            self.trim();
        }
    }

    fn trim(&mut self) {
        if self.hits.len() > self.needed {
            self.hits.select_nth_unstable_by(self.needed, |a, b| (self.cmp)(a, b));
            self.hits.truncate(self.needed);
        }
    }

    fn into_sorted(mut self) -> Vec<Hit> {
        self.trim();
        self.hits.sort_unstable_by(|a, b| (self.cmp)(a, b));
        self.hits
    }
}

/// A page of raw points; default order latest first.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<RawPoint>> {
    let (series_filter, points) = split(args.filter);
    let keys = containers(&args.scope, series_filter.as_ref(), db);
    let mut select = keys.clone();
    select.clear_selects().columns(SERIES_OUTPUT.map(|c| ("c", c)));
    let series: Vec<Series> = collection::fetch(db, &select, &SERIES_OUTPUT).await?;
    let range = time_range(points.as_ref());
    // Exact: every stored point is counted once in the day rollups.
    let mut sum = Query::select();
    sum.expr(Expr::cust("CAST(COALESCE(SUM(count_val), 0) AS BIGINT)"))
        .from("rollup_day")
        .and_where(Expr::col("container_key").in_subquery(keys.clone()));
    let stored = u64::try_from(collection::scalar_i64(db, &sum).await?).unwrap_or(0);
    let span = Request::span(db, &keys).await?;
    let density = span.map_or(0.0, |(newest, oldest)| {
        stored as f64 / (Ord::max(newest.saturating_add(1).saturating_sub(oldest), 1) as f64 * MICROS as f64)
    });
    let mut keys: Vec<i64> = series.iter().map(|s| s.container_key).collect();
    keys.sort_unstable();
    let request = Request {
        db,
        keys,
        series: series.into_iter().map(|s| (s.container_key, s)).collect(),
        points,
        range,
        span,
        density,
    };
    let total = match &request.points {
        None => stored,
        // A time range alone: counted from the chunks' own counts, decoding only the chunks
        // cut by the range's ends, and the rows in it.
        Some(filter) if exact_seconds(filter).is_some() => chunks::count(db, &request.keys, request.range).await?,
        Some(_) => {
            let mut count = 0u64;
            request.each_in_range(&mut |_| count += 1).await?;
            count
        }
    };
    let page = args.page.resolve(total);
    if args.count_only || page.total == 0 {
        return Ok(Listing {
            page,
            items: Vec::new(),
        });
    }
    let needed = usize::try_from(page.offset.saturating_add(page.per_page)).unwrap_or(usize::MAX);
    let sort = args.sort.cloned().unwrap_or(SortKey {
        attr: "timestamp_seconds",
        descending: true,
    });
    let cmp = |a: &Hit, b: &Hit| order(&sort, &request.series, a, b);
    let mut best = Best {
        needed,
        cmp: &cmp,
        hits: Vec::new(),
    };
    if sort.attr == "timestamp_seconds" {
        by_time_windows(&request, &page, sort.descending, &mut best).await?;
    } else {
        request.each_in_range(&mut |hit| best.push(hit)).await?;
    }
    let offset = usize::try_from(page.offset).unwrap_or(usize::MAX);
    let items = best
        .into_sorted()
        .into_iter()
        .skip(offset)
        .map(|hit| {
            let s = &request.series[&hit.key];
            RawPoint {
                id_container_data_latest: s.id_container_data_latest.clone(),
                id_group: s.id_group.clone(),
                datatype: s.datatype,
                source_device: s.source_device.clone(),
                timestamp_seconds: hit.time_us.div_euclid(MICROS),
                microseconds: hit.time_us.rem_euclid(MICROS),
                value: hit.value,
            }
        })
        .collect();
    Ok(Listing { page, items })
}

/// Collects the points of a page sorted by time: windows from the newest point backwards (or,
/// ascending, from the oldest forwards), the first sized by the average density of the points,
/// then doubling, until they hold every point up to the end of the page.
async fn by_time_windows<F: Fn(&Hit, &Hit) -> Ordering>(
    request: &Request<'_>,
    page: &devicecloud_query::Page,
    descending: bool,
    best: &mut Best<'_, F>,
) -> Result<()> {
    let Some((newest, oldest)) = request.span else {
        return Ok(());
    };
    // The windows start where the filter's time range does, not at the newest point.
    let (first, end) = (
        Ord::max(oldest.saturating_mul(MICROS), request.range.from_us),
        Ord::min(newest.saturating_add(1).saturating_mul(MICROS), request.range.to_us),
    );
    if first >= end {
        return Ok(());
    }
    let needed = best.needed as u64;
    let density = page.total as f64 / Ord::max(end - first, 1) as f64;
    let mut width = ((needed as f64 / density.max(1e-18)) * FIRST_WINDOW_MARGIN)
        .ceil()
        .clamp(1.0, 1e18) as i64;
    let mut found = 0u64;
    let mut edge = if descending { end } else { first };
    loop {
        let window = if descending {
            Range {
                from_us: Ord::max(edge.saturating_sub(width), first),
                to_us: edge,
            }
        } else {
            Range {
                from_us: edge,
                to_us: Ord::min(edge.saturating_add(width), end),
            }
        };
        request
            .each_hit(window, &mut |hit| {
                found += 1;
                best.push(hit);
            })
            .await?;
        let exhausted = if descending {
            window.from_us <= first
        } else {
            window.to_us >= end
        };
        if found >= needed || exhausted {
            return Ok(());
        }
        edge = if descending { window.from_us } else { window.to_us };
        width = width.saturating_mul(2);
    }
}

/// One day of a series computed straight from its points: (day start, count, min, max, avg).
pub type DayFromRaw = (i64, i64, f64, f64, f64);

/// The daily downsampled answer of a series computed from its points, packed or not, a day at
/// a time: the reference the day rollups are measured against (`devicecloud-bench read`).
pub async fn daily_from_raw(db: &Db, container_key: i64) -> Result<Vec<DayFromRaw>> {
    let days: Vec<(i64,)> = db
        .rows(
            "SELECT bucket FROM rollup_day WHERE container_key = $1 ORDER BY bucket",
            crate::database::db::values![container_key],
        )
        .await?;
    let mut out = Vec::with_capacity(days.len());
    for (day,) in days {
        let range = Range::seconds(Some(day), Some(day + 86_399));
        for series in chunks::scan(db, &[container_key], range, None).await? {
            let p = &series.points;
            let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
            for &v in &p.values {
                min = min.min(v);
                max = max.max(v);
                sum += v;
            }
            if !p.is_empty() {
                out.push((day, p.len() as i64, min, max, sum / p.len() as f64));
            }
        }
    }
    Ok(out)
}
