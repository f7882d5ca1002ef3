//! Raw data points (`GET /api/v2/data`): every stored point of the groups asked for, latest
//! first, fast on large data.
//!
//! A plain `ORDER BY time LIMIT 500` over a group would read every point of the group to find
//! the newest ones. Instead the page is looked for in a time window that grows from the newest
//! point backwards (doubling) until it holds enough rows; each probe is an index range scan per
//! container of the primary key (container, time), so the cost follows the page asked for, not
//! the size of the group. The total count of a filter that only names container attributes
//! (group, device, datatype, container) comes from the day rollups, which count every stored
//! point exactly once.

use devicecloud_query::{AttrKind, Attribute, CompareOp, Filter, Page, SortKey};
use sea_query::{Condition, Expr, ExprTrait, Func, Order, Query, SelectStatement};

use crate::collection::{self, Column, ListArgs, ListRequest, Listing, attributes, filter_cond, names};
use crate::database::Result;
use crate::database::db::Db;
use crate::sql::point_time::{self, TimePart};
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

/// The columns of a [`RawPoint`], in its order: its own field names, so that the record is
/// declared once.
fn output() -> &'static [&'static str] {
    static FIELDS: std::sync::LazyLock<&[&str]> = std::sync::LazyLock::new(crate::collection::output_of::<RawPoint>);
    *FIELDS
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

/// Ties of equal times are broken by container, so that pages never overlap.
const TIE_BREAK: [Column; 3] = [
    COLUMNS[4],
    COLUMNS[5],
    collection::column("container_key", "r", "container_key", AttrKind::Integer),
];

/// The first window holds this many times the rows needed, by the average density, so that
/// one probe usually suffices; the window doubles until the page fits.
const FIRST_WINDOW_MARGIN: f64 = 1.25;

/// Whether every comparison of `filter` names a container attribute.
fn names_only_containers(filter: &Filter) -> bool {
    filter.mentions_only(&|attr| CONTAINER_ATTRS.contains(&attr))
}

/// The containers a request covers: visible to the caller and, when the filter names only
/// container attributes, matching it.
fn containers(scope: &GroupScope<'_>, filter: Option<&Filter>, db: &Db) -> SelectStatement {
    let mut select = Query::select();
    select.column(("c", "container_key")).from_as("containers", "c");
    let mut cond = Condition::all();
    if let Some(visible) = scope.condition("c", "id_group") {
        cond = cond.add(visible);
    }
    if let Some(filter) = filter.filter(|f| names_only_containers(f)) {
        cond = cond.add(filter_cond(filter, &COLUMNS, db.backend()));
    }
    select.cond_where(cond);
    select
}

/// Points joined to their container, restricted to `containers` and, unless the filter was
/// already applied to the containers, to the filter.
fn points(db: &Db, containers: SelectStatement, filter: Option<&Filter>) -> SelectStatement {
    let mut select = Query::select();
    select
        .column(("c", "id_container_data_latest"))
        .column(("c", "id_group"))
        .column(("c", "datatype"))
        .column(("c", "source_device"))
        .expr_as(COLUMNS[4].expr(db.backend()), "timestamp_seconds")
        .expr_as(COLUMNS[5].expr(db.backend()), "microseconds")
        .column(("r", "value"))
        .from_as("raw_points", "r")
        .inner_join(
            sea_query::TableRef::Table("containers".into(), Some("c".into())),
            Expr::col(("c", "container_key")).equals(("r", "container_key")),
        );
    let mut cond = Condition::all().add(Expr::col(("r", "container_key")).in_subquery(containers));
    if let Some(filter) = filter.filter(|f| !names_only_containers(f)) {
        cond = cond.add(filter_cond(filter, &COLUMNS, db.backend()));
    }
    select.cond_where(cond);
    select
}

/// A page of raw points; default order latest first.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<RawPoint>> {
    let (filter, sort) = (args.filter, args.sort);
    let keys = containers(&args.scope, filter, db);
    let base = points(db, keys.clone(), filter);
    let by_time = sort.is_none_or(|s| s.attr == "timestamp_seconds");
    if !by_time {
        let req = ListRequest {
            filter: None,
            sort,
            default_sort: SortKey {
                attr: "timestamp_seconds",
                descending: true,
            },
            primary_key: &TIE_BREAK,
            page: args.page,
            count_only: args.count_only,
            count: None,
        };
        return collection::list(db, base, output(), &COLUMNS, req).await;
    }
    let descending = sort.is_none_or(|s| s.descending);

    let total = if filter.is_none_or(names_only_containers) {
        // Exact: every stored point is counted once in the day rollups.
        let mut sum = Query::select();
        sum.expr(Expr::cust("CAST(COALESCE(SUM(count_val), 0) AS BIGINT)"))
            .from("rollup_day")
            .and_where(Expr::col("container_key").in_subquery(keys.clone()));
        collection::scalar_i64(db, &sum).await?
    } else {
        let mut count = base.clone();
        count.clear_selects().expr(Func::count(Expr::col(sea_query::Asterisk)));
        i64::try_from(collection::count_rows(db, &count).await?).unwrap_or(i64::MAX)
    };
    let page = args.page.resolve(u64::try_from(total).unwrap_or(0));
    if args.count_only || page.total == 0 {
        return Ok(Listing {
            page,
            items: Vec::new(),
        });
    }
    let window = window(db, &keys, &base, &page, descending).await?;
    let mut select = base;
    if let Some(bound) = window {
        select.and_where(within(db, descending, bound));
    }
    let order = if descending { Order::Desc } else { Order::Asc };
    for time in point_time::order(db.backend(), "r") {
        select.order_by_expr(time, order.clone());
    }
    select.order_by(("r", "container_key"), order.clone());
    select.limit(page.per_page).offset(page.offset);
    let items = collection::fetch(db, &select, output()).await?;
    Ok(Listing { page, items })
}

/// The time bound (inclusive) that holds the rows up to the end of `page`, or `None` when the
/// whole range is needed. Probes windows from the newest (or, ascending, the oldest) point,
/// the first sized by the average density of the rows, then doubling; each probe counts at most
/// the rows it needs.
async fn window(
    db: &Db,
    keys: &SelectStatement,
    base: &SelectStatement,
    page: &Page,
    descending: bool,
) -> Result<Option<i64>> {
    let needed = page.offset.saturating_add(page.per_page);
    let mut newest = Query::select();
    newest
        .expr(Expr::cust("MAX(latest_seconds)"))
        .from("containers")
        .and_where(Expr::col("container_key").in_subquery(keys.clone()));
    let mut oldest = Query::select();
    oldest
        .expr(Expr::cust("MIN(bucket)"))
        .from("rollup_day")
        .and_where(Expr::col("container_key").in_subquery(keys.clone()));
    let (newest, oldest) = (
        collection::scalar_i64(db, &newest).await?,
        collection::scalar_i64(db, &oldest).await?,
    );
    let density = page.total as f64 / Ord::max(newest - oldest, 1) as f64;
    let mut width = ((needed as f64 / density.max(1e-9)) * FIRST_WINDOW_MARGIN)
        .ceil()
        .clamp(1.0, 1e15) as i64;
    loop {
        let bound = if descending {
            newest.saturating_sub(width)
        } else {
            oldest.saturating_add(width)
        };
        if (descending && bound <= oldest) || (!descending && bound >= newest) {
            return Ok(None);
        }
        let mut probe = base.clone();
        probe
            .clear_selects()
            .expr(Expr::val(1))
            .and_where(within(db, descending, bound))
            .limit(needed);
        let mut count = Query::select();
        count
            .expr(Func::count(Expr::col(sea_query::Asterisk)))
            .from_subquery(probe, "w");
        if collection::count_rows(db, &count).await? >= needed {
            return Ok(Some(bound));
        }
        width = width.saturating_mul(2);
    }
}

/// The points from `bound` (whole seconds, inclusive) towards the newest when `descending`,
/// else towards the oldest.
fn within(db: &Db, descending: bool, bound: i64) -> Expr {
    let op = if descending { CompareOp::Gte } else { CompareOp::Lte };
    point_time::compare_seconds(db.backend(), "r", op, bound)
}

/// One day of a series computed straight from its raw rows: (day start, count, min, max, avg).
pub type DayFromRaw = (i64, i64, f64, f64, f64);

/// The daily downsampled answer of a series by a plain `GROUP BY` over its raw rows: the
/// reference the day rollups are measured against (`devicecloud-bench read`).
pub async fn daily_from_raw(db: &Db, container_key: i64) -> Result<Vec<DayFromRaw>> {
    let seconds = TimePart::Seconds.sql(db.backend(), "r");
    let sql = format!(
        "SELECT ({seconds} / 86400) * 86400 AS day, COUNT(*) AS n, MIN(value), MAX(value), AVG(value) \
         FROM raw_points r WHERE container_key = $1 GROUP BY ({seconds} / 86400) * 86400 ORDER BY day"
    );
    Ok(crate::database::db::on_pool!(db, |p| sqlx::query_as::<_, DayFromRaw>(
        sqlx::AssertSqlSafe(sql.as_str())
    )
    .bind(container_key)
    .fetch_all(p)
    .await)?)
}
