//! Collections: the `query` crate's filter, sort and page applied to a SQL select, for both
//! databases at once (sea-query renders the dialect).
//!
//! One translation serves every collection of the API. Each resource describes its filterable
//! attributes as [`Column`]s and hands a base select (its table, its columns and the caller's
//! visibility scope) to [`list`]; ties are always broken by the primary key so that pages never
//! overlap (docs/api.md, "Collections").

use devicecloud_query::{AttrKind, Attribute, Filter, Page, PageRequest, Scalar, SortKey};
use sea_query::{Condition, Expr, ExprTrait, Func, LikeExpr, Order, SelectStatement};
use sea_query_sqlx::SqlxValues;
use serde::de::DeserializeOwned;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::database::db::{Db, on_pool};
use crate::sql::backend::Backend;
use crate::sql::comparison::compare;

pub(crate) mod memory;
mod table;

use crate::database::Result;
use crate::database::StoreError;
use crate::sql::point_time::{self, TimePart};
use crate::sql::scope::GroupScope;
pub(crate) use table::{GROUP, GROUP_LABEL, Table};

/// One attribute of a collection and the SQL column behind it. The attribute's kind types its
/// filter values; text (`AttrKind::String`) sorts case-insensitively ("strings sort naturally",
/// docs/api.md, "Collections").
#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub attr: &'static str,
    pub table: &'static str,
    pub column: &'static str,
    pub kind: AttrKind,
    /// A part of a raw point's time, which the databases store differently (`point_time`):
    /// `column` then names SQLite's column.
    pub time: Option<TimePart>,
}

/// The attribute `attr`, read from `column` of `table`.
pub(crate) const fn column(attr: &'static str, table: &'static str, column: &'static str, kind: AttrKind) -> Column {
    Column {
        attr,
        table,
        column,
        kind,
        time: None,
    }
}

/// A column of `table` whose attribute has the column's own name.
pub(crate) const fn same_name(table: &'static str, attr: &'static str, kind: AttrKind) -> Column {
    column(attr, table, attr, kind)
}

/// The filter attributes of a collection's columns, so that one table of columns is the single
/// description of a collection (the server hands these to the `query` parser).
pub const fn attributes<const N: usize>(columns: &[Column; N]) -> [Attribute; N] {
    let mut out = [Attribute::new("", AttrKind::String); N];
    let mut i = 0;
    while i < N {
        out[i] = Attribute::new(columns[i].attr, columns[i].kind);
        i += 1;
    }
    out
}

/// The attribute names of a collection's columns: all of them are sortable.
pub const fn names<const N: usize>(columns: &[Column; N]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = columns[i].attr;
        i += 1;
    }
    out
}

impl Column {
    pub(crate) fn expr(&self, backend: Backend) -> Expr {
        match self.time {
            Some(part) => part.expr(backend, self.table),
            None => Expr::col((self.table, self.column)),
        }
    }

    /// The expression to order by: text is compared lower-cased on both databases; a point's
    /// whole seconds are ordered by its stored time, which the key serves.
    fn sort_expr(&self, backend: Backend) -> Expr {
        match (self.kind, self.time) {
            (AttrKind::String, _) => Func::lower(self.expr(backend)).into(),
            (_, Some(part)) => part.sort_expr(backend, self.table),
            _ => self.expr(backend),
        }
    }
}

/// What a caller asks of a scoped collection: whose view, which rows, in which order, which
/// page (HEAD: `count_only`). Every resource's `list` takes it as it comes from the request.
#[derive(Clone, Debug)]
pub struct ListArgs<'a> {
    pub scope: GroupScope<'a>,
    pub filter: Option<&'a Filter>,
    pub sort: Option<&'a SortKey>,
    pub page: PageRequest,
    pub count_only: bool,
}

impl<'a> ListArgs<'a> {
    /// The arguments of a collection no group owns (accounts, a webhook's attempts): every row
    /// the select keeps is the caller's to see.
    pub fn unscoped(
        filter: Option<&'a Filter>,
        sort: Option<&'a SortKey>,
        page: PageRequest,
        count_only: bool,
    ) -> ListArgs<'a> {
        ListArgs {
            scope: GroupScope::All,
            filter,
            sort,
            page,
            count_only,
        }
    }

    /// The request for [`list`]: these arguments with the resource's default order and primary
    /// key.
    pub(crate) fn request(&self, default_sort: SortKey, primary_key: &'a [Column]) -> ListRequest<'a> {
        ListRequest {
            filter: self.filter,
            sort: self.sort,
            default_sort,
            primary_key,
            page: self.page,
            count_only: self.count_only,
            count: None,
        }
    }
}

/// What a caller asks of a collection.
#[derive(Clone, Debug)]
pub struct ListRequest<'a> {
    pub filter: Option<&'a Filter>,
    /// The client's sort; `None` applies `default_sort`.
    pub sort: Option<&'a SortKey>,
    pub default_sort: SortKey,
    /// The primary-key columns, the final tie-breakers (in the sort's direction).
    pub primary_key: &'a [Column],
    pub page: PageRequest,
    /// Count only (HEAD): the rows are not fetched.
    pub count_only: bool,
    /// A statement that gives the number of rows, for a collection that knows a cheaper way
    /// than counting the page's select (a request without a filter); `None` counts that select.
    pub count: Option<SelectStatement>,
}

/// One page of a collection with its pagination facts.
#[derive(Debug)]
pub struct Listing<T> {
    pub page: Page,
    pub items: Vec<T>,
}

/// A record related to each row of a collection (its group, its parent device) whose fields the
/// collection can be filtered on, as Yii filters on a joined relation (`filter[group.label]`).
/// Its columns are [`Column`]s whose `table` is the relation's `alias`.
pub(crate) struct Relation {
    /// The alias the relation's columns name, such as `rel_group`.
    pub alias: &'static str,
    /// The related table.
    pub table: &'static str,
    /// The related table's key.
    pub key: &'static str,
    /// The collection's column holding that key.
    pub via: &'static str,
}

/// The field names of a record type, in declaration order, as its derived `Deserialize` knows
/// them: the columns a collection selects (and, on SQLite, the keys of its JSON page) come from
/// the record struct itself instead of a second list. Each collection keeps the answer in a
/// static, so it is worked out once per process, not per request.
pub(crate) fn output_of<T: DeserializeOwned>() -> &'static [&'static str] {
    serde_aux::serde_introspection::serde_introspect::<T>()
}

/// Runs a collection query: the `COUNT(*)` of the filtered base and the requested page.
///
/// On SQLite both travel in one statement and the page comes back as one JSON array
/// (`json_group_array`): sqlx hands every SQLite row from its worker thread to the async side
/// separately, and that hand-off, not SQLite, dominated the cost of a page. The page is asked
/// for optimistically; only a page past the end (clamped to the last one, Yii's rule) costs a
/// second round trip. PostgreSQL rows stream over the socket cheaply and are decoded directly.
///
/// `output` names the columns `base` selects, in order: they become the keys of the JSON page.
pub(crate) async fn list<T>(
    db: &Db,
    mut base: SelectStatement,
    output: &[&str],
    columns: &[Column],
    req: ListRequest<'_>,
) -> Result<Listing<T>>
where
    T: for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow> + DeserializeOwned + Send + Unpin,
{
    if let Some(filter) = req.filter {
        base.cond_where(filter_cond(filter, columns, db.backend()));
    }
    let count = req.count.clone().unwrap_or_else(|| count_of(&base));
    if req.count_only {
        let total = count_rows(db, &count).await?;
        return Ok(Listing {
            page: req.page.resolve(total),
            items: Vec::new(),
        });
    }

    let sort = req.sort.unwrap_or(&req.default_sort);
    let order = if sort.descending { Order::Desc } else { Order::Asc };
    if let Some(column) = columns.iter().find(|c| c.attr == sort.attr) {
        base.order_by_expr(column.sort_expr(db.backend()), order.clone());
    }
    for key in req.primary_key {
        base.order_by_expr(key.expr(db.backend()), order.clone());
    }

    if let Db::Sqlite(pool, quick) = db {
        // The page asked for; a page past the end is clamped after the count is known.
        let requested = u64::try_from(Ord::max(req.page.page, 1) - 1).unwrap_or(0);
        // Kept within SQLite's signed 64-bit integers.
        let mut offset = Ord::min(requested.saturating_mul(req.page.per_page), i64::MAX as u64);
        loop {
            let (count_sql, count_values) = db.build(&count);
            let (page_sql, page_values) = db.build(&base);
            let pairs = json_pairs(output, columns);
            // LIMIT and OFFSET are written as literals (they are integers of ours): SQLite
            // re-prepares a statement whose bound LIMIT changes, on every step.
            let (limit, page_sql) = (req.page.per_page, page_sql);
            let sql = format!(
                "SELECT ({count_sql}), (SELECT json_group_array(json_object({pairs})) FROM ({page_sql} LIMIT {limit} OFFSET {offset}) AS t)"
            );
            // `?` placeholders are positional: the count's values come first, as in the text.
            let values = SqlxValues(sea_query::Values([count_values.0.0, page_values.0.0].concat()));
            let quick = quick
                .as_deref()
                .and_then(|q| q.read(&sql, &values.0.0, first_row::<(i64, String)>));
            let (total, items): (i64, String) = match quick {
                Some(row) => row,
                None => {
                    sqlx::query_as_with(sqlx::AssertSqlSafe(sql), values)
                        .fetch_one(pool)
                        .await?
                }
            };
            let page = req.page.resolve(u64::try_from(total).unwrap_or(0));
            if page.offset == offset || page.total == 0 {
                let items = serde_json::from_str(&items).map_err(|e| StoreError::Decode(e.to_string()))?;
                return Ok(Listing { page, items });
            }
            offset = page.offset;
        }
    }

    let page = req.page.resolve(count_rows(db, &count).await?);
    if page.total == 0 {
        return Ok(Listing {
            page,
            items: Vec::new(),
        });
    }
    base.limit(page.per_page).offset(page.offset);
    let (sql, values) = db.build(&base);
    let items = on_pool!(db, |p| sqlx::query_as_with::<_, T, _>(sqlx::AssertSqlSafe(sql), values)
        .fetch_all(p)
        .await)?;
    Ok(Listing { page, items })
}

/// `SELECT COUNT(*)` of the rows `select` keeps.
fn count_of(select: &SelectStatement) -> SelectStatement {
    let mut count = select.clone();
    count.clear_selects().expr(Func::count(Expr::col(sea_query::Asterisk)));
    count
}

/// Fetches the rows of a finished select (ordered and limited by the caller). On SQLite they
/// come back as one JSON array, for the reason given at [`list`].
pub(crate) async fn fetch<T>(db: &Db, select: &SelectStatement, output: &[&str]) -> Result<Vec<T>>
where
    T: for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow> + DeserializeOwned + Send + Unpin,
{
    let (sql, values) = db.build(select);
    match db {
        Db::Sqlite(pool, quick) => {
            let pairs = json_pairs(output, &[]);
            let sql = format!("SELECT json_group_array(json_object({pairs})) FROM ({sql}) AS t");
            let quick = quick
                .as_deref()
                .and_then(|q| q.read(&sql, &values.0.0, first_row::<(String,)>));
            let items: String = match quick {
                Some((items,)) => items,
                None => {
                    sqlx::query_scalar_with(sqlx::AssertSqlSafe(sql), values)
                        .fetch_one(pool)
                        .await?
                }
            };
            serde_json::from_str(&items).map_err(|e| StoreError::Decode(e.to_string()))
        }
        Db::Postgres(pool) => Ok(sqlx::query_as_with::<_, T, _>(sqlx::AssertSqlSafe(sql), values)
            .fetch_all(pool)
            .await?),
    }
}

/// The first row of a short read (`quick_read`), as a tuple of its columns.
fn first_row<T: for<'a> TryFrom<&'a rusqlite::Row<'a>, Error = rusqlite::Error>>(
    rows: &mut rusqlite::Rows<'_>,
) -> rusqlite::Result<T> {
    let row = rows.next()?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
    T::try_from(row)
}

/// The `json_object` arguments of a row of `t` on SQLite. SQLite writes a REAL into JSON with
/// 15 significant digits, which does not give back every double; a REAL is therefore written
/// as text with 17 digits (`%!.17g`: the `!` lifts SQLite's cap of 16 digits), which [`real`]
/// reads back. SQLite's decimal conversion is exact for magnitudes from about 1e-70 to 1e100,
/// which is where measurements live; beyond that the 17th digit may differ (docs/api.md).
///
/// A column that `columns` declares as text or integer holds no REAL (its record field is a
/// string or an integer, which a REAL could not fill anyway) and is written as it is: the
/// type test and its branch were a third of SQLite's work for a page of groups.
fn json_pairs(output: &[&str], columns: &[Column]) -> String {
    let plain = |name: &str| {
        columns
            .iter()
            .any(|c| c.column == name && c.time.is_none() && matches!(c.kind, AttrKind::String | AttrKind::Integer))
    };
    output
        .iter()
        .map(|name| {
            if plain(name) {
                format!("'{name}', t.\"{name}\"")
            } else {
                format!(
                    "'{name}', CASE WHEN typeof(t.\"{name}\") = 'real' THEN printf('%!.17g', t.\"{name}\") ELSE t.\"{name}\" END"
                )
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Writes an integer flag column (0 or 1, as both databases store booleans here) as the JSON
/// boolean the API shows.
pub(crate) fn flag<S: serde::Serializer>(value: &i64, serializer: S) -> std::result::Result<S::Ok, S::Error> {
    serializer.serialize_bool(*value != 0)
}

/// Reads a float field of a page row: a JSON number, or the 17-digit text [`json_pairs`] writes
/// for SQLite REALs. Row types with `f64` fields read through [`list`] or [`fetch`] use it.
pub(crate) fn real<'de, D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<f64, D::Error> {
    match <Real as serde::Deserialize>::deserialize(deserializer)? {
        Real::Number(n) => Ok(n),
        Real::Text(t) => t.parse().map_err(serde::de::Error::custom),
    }
}

/// [`real`] of a field that may be null.
pub(crate) fn optional_real<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Option<f64>, D::Error> {
    match <Option<Real> as serde::Deserialize>::deserialize(deserializer)? {
        None => Ok(None),
        Some(Real::Number(n)) => Ok(Some(n)),
        Some(Real::Text(t)) => t.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

/// A float as JSON gives it: a number, or text.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Real<'a> {
    Number(f64),
    Text(&'a str),
}

/// The single number a select returns (`COUNT`, `SUM`, `MAX` …), 0 for NULL.
pub(crate) async fn scalar_i64(db: &Db, select: &SelectStatement) -> Result<i64> {
    let (sql, values) = db.build(select);
    let value: Option<i64> = on_pool!(db, |p| sqlx::query_scalar_with(sqlx::AssertSqlSafe(sql), values)
        .fetch_one(p)
        .await)?;
    Ok(value.unwrap_or(0))
}

pub(crate) async fn count_rows(db: &Db, count: &SelectStatement) -> Result<u64> {
    Ok(u64::try_from(scalar_i64(db, count).await?).unwrap_or(0))
}

/// Translates a filter AST into one SQL condition over `columns`.
///
/// The parser only lets through attributes of the collection, so a missing column cannot
/// happen; should it, the condition matches nothing rather than everything.
pub(crate) fn filter_cond(filter: &Filter, columns: &[Column], backend: Backend) -> Condition {
    match filter {
        Filter::And(parts) => fold(parts, columns, backend, Condition::all()),
        Filter::Or(parts) => fold(parts, columns, backend, Condition::any()),
        Filter::Not(inner) => filter_cond(inner, columns, backend).not(),
        leaf => Condition::all().add(leaf_expr(leaf, columns, backend)),
    }
}

/// One comparison of a filter (anything but and/or/not).
fn leaf_expr(filter: &Filter, columns: &[Column], backend: Backend) -> Expr {
    let column = |attr: &str| columns.iter().find(|c| c.attr == attr);
    match filter {
        Filter::And(_) | Filter::Or(_) | Filter::Not(_) => Expr::expr(filter_cond(filter, columns, backend)),
        Filter::Never => never(),
        Filter::Compare { attr, op, value } => match (column(attr), value) {
            (
                Some(Column {
                    table,
                    time: Some(TimePart::Seconds),
                    ..
                }),
                Scalar::Int(seconds),
            ) => point_time::compare_seconds(backend, table, *op, *seconds),
            (Some(c), _) => compare(c.expr(backend), *op, scalar(value)),
            (None, _) => never(),
        },
        Filter::Like { attr, value } => match (column(attr), backend) {
            // Yii's `like` is a literal substring match, case-insensitive. SQLite's own LIKE
            // and lower() fold ASCII only, so there the match is a case-insensitive regular
            // expression of the escaped literal (sqlx's REGEXP, Unicode-aware).
            (Some(c), Backend::Sqlite) => c.expr(backend).binary(
                sea_query::BinOper::Custom("REGEXP"),
                Expr::val(format!("(?i){}", regex::escape(value))),
            ),
            (Some(c), Backend::Postgres) => Expr::expr(Func::lower(c.expr(backend)))
                .like(LikeExpr::new(format!("%{}%", escape_like(&value.to_lowercase()))).escape('\\')),
            (None, _) => never(),
        },
        Filter::In {
            attr,
            values,
            or_null,
            negated,
        } => match column(attr) {
            Some(c) => {
                let list = || values.iter().map(scalar).collect::<Vec<_>>();
                match (values.is_empty(), *or_null, *negated) {
                    (true, _, false) => c.expr(backend).is_null(),
                    (true, _, true) => c.expr(backend).is_not_null(),
                    (false, false, false) => c.expr(backend).is_in(list()),
                    (false, false, true) => c.expr(backend).is_not_in(list()),
                    (false, true, false) => c.expr(backend).is_in(list()).or(c.expr(backend).is_null()),
                    (false, true, true) => c.expr(backend).is_not_in(list()).and(c.expr(backend).is_not_null()),
                }
            }
            None => never(),
        },
        Filter::IsNull { attr } => column(attr).map_or_else(never, |c| c.expr(backend).is_null()),
        Filter::IsNotNull { attr } => column(attr).map_or_else(never, |c| c.expr(backend).is_not_null()),
    }
}

/// And/or of several parts as one flat condition. sea-query renders a condition's parts in
/// a loop, whereas a chain of binary expressions would recurse once per branch: deep or wide
/// input must not exhaust the stack.
fn fold(parts: &[Filter], columns: &[Column], backend: Backend, mut condition: Condition) -> Condition {
    if parts.is_empty() {
        return Condition::all().add(never());
    }
    for part in parts {
        condition = condition.add(filter_cond(part, columns, backend));
    }
    condition
}

/// A condition no row satisfies (SQL `1 = 0`), valid on both databases.
fn never() -> Expr {
    Expr::val(1).eq(0)
}

fn scalar(value: &Scalar) -> Expr {
    match value {
        Scalar::Int(i) => Expr::val(*i),
        Scalar::Float(f) => Expr::val(*f),
        Scalar::Str(s) => Expr::val(s.clone()),
        Scalar::Bool(b) => Expr::val(i64::from(*b)),
    }
}

fn escape_like(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for ch in value.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}
