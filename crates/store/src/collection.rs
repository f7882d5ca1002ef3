//! Collections: the `query` crate's filter, sort and page applied to a SQL select, for both
//! databases at once (sea-query renders the dialect).
//!
//! One translation serves every collection of the API. Each resource describes its filterable
//! attributes as [`Column`]s and hands a base select (its table, its columns and the caller's
//! visibility scope) to [`list`]; ties are always broken by the primary key so that pages never
//! overlap (contract §4).

use devicecloud_query::{CompareOp, Filter, Page, PageRequest, Scalar, SortKey};
use sea_query::{Expr, ExprTrait, Func, LikeExpr, Order, SelectStatement};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::Result;
use crate::db::{Db, on_pool};

/// How values of an attribute compare and sort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnKind {
    /// Integers and flags: numeric order.
    Integer,
    /// Floating-point numbers: numeric order.
    Number,
    /// Text: case-insensitive order ("strings sort naturally", contract §5).
    Text,
}

/// One attribute of a collection and the SQL column behind it.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub attr: &'static str,
    pub table: &'static str,
    pub column: &'static str,
    pub kind: ColumnKind,
}

impl Column {
    fn expr(&self) -> Expr {
        Expr::col((self.table, self.column))
    }

    /// The expression to order by: text is compared lower-cased on both databases.
    fn sort_expr(&self) -> Expr {
        match self.kind {
            ColumnKind::Text => Func::lower(self.expr()).into(),
            _ => self.expr(),
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
    /// The primary-key column, the final tie-breaker.
    pub primary_key: Column,
    pub page: PageRequest,
    /// Count only (HEAD): the rows are not fetched.
    pub count_only: bool,
}

/// One page of a collection with its pagination facts.
#[derive(Debug)]
pub struct Listing<T> {
    pub page: Page,
    pub items: Vec<T>,
}

/// Runs a collection query: `COUNT(*)` of the filtered base, then the requested page.
pub(crate) async fn list<T>(
    db: &Db,
    mut base: SelectStatement,
    columns: &[Column],
    req: ListRequest<'_>,
) -> Result<Listing<T>>
where
    T: for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin,
{
    if let Some(filter) = req.filter {
        base.and_where(filter_expr(filter, columns));
    }
    let mut count = base.clone();
    count
        .clear_selects()
        .expr(Func::count(Expr::col(sea_query::Asterisk)));
    let (sql, values) = db.build(&count);
    let total: i64 = on_pool!(db, |p| sqlx::query_scalar_with(
        sqlx::AssertSqlSafe(sql),
        values
    )
    .fetch_one(p)
    .await)?;
    let page = req.page.resolve(u64::try_from(total).unwrap_or(0));
    if req.count_only || page.total == 0 {
        return Ok(Listing {
            page,
            items: Vec::new(),
        });
    }

    let sort = req.sort.unwrap_or(&req.default_sort);
    let order = if sort.descending {
        Order::Desc
    } else {
        Order::Asc
    };
    if let Some(column) = columns.iter().find(|c| c.attr == sort.attr) {
        base.order_by_expr(column.sort_expr(), order.clone());
    }
    base.order_by_expr(req.primary_key.expr(), order)
        .limit(page.per_page)
        .offset(page.offset);
    let (sql, values) = db.build(&base);
    let items = on_pool!(db, |p| sqlx::query_as_with::<_, T, _>(
        sqlx::AssertSqlSafe(sql),
        values
    )
    .fetch_all(p)
    .await)?;
    Ok(Listing { page, items })
}

/// Translates a filter AST into one SQL expression over `columns`.
///
/// The parser only lets through attributes of the collection, so a missing column cannot
/// happen; should it, the condition matches nothing rather than everything.
pub(crate) fn filter_expr(filter: &Filter, columns: &[Column]) -> Expr {
    let column = |attr: &str| columns.iter().find(|c| c.attr == attr);
    match filter {
        Filter::And(parts) => fold(parts, columns, |a, b| a.and(b)),
        Filter::Or(parts) => fold(parts, columns, |a, b| a.or(b)),
        Filter::Not(inner) => filter_expr(inner, columns).not(),
        Filter::Never => never(),
        Filter::Compare { attr, op, value } => match column(attr) {
            Some(c) => {
                let (col, val) = (c.expr(), scalar(value));
                match op {
                    CompareOp::Eq => col.eq(val),
                    CompareOp::Neq => col.ne(val),
                    CompareOp::Lt => col.lt(val),
                    CompareOp::Lte => col.lte(val),
                    CompareOp::Gt => col.gt(val),
                    CompareOp::Gte => col.gte(val),
                }
            }
            None => never(),
        },
        Filter::Like { attr, value } => match column(attr) {
            // Yii's `like` is a literal substring match; `%`, `_` and `\` are escaped.
            Some(c) => Expr::expr(Func::lower(c.expr())).like(
                LikeExpr::new(format!("%{}%", escape_like(&value.to_lowercase()))).escape('\\'),
            ),
            None => never(),
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
                    (true, _, false) => c.expr().is_null(),
                    (true, _, true) => c.expr().is_not_null(),
                    (false, false, false) => c.expr().is_in(list()),
                    (false, false, true) => c.expr().is_not_in(list()),
                    (false, true, false) => c.expr().is_in(list()).or(c.expr().is_null()),
                    (false, true, true) => c.expr().is_not_in(list()).and(c.expr().is_not_null()),
                }
            }
            None => never(),
        },
        Filter::IsNull { attr } => column(attr).map_or_else(never, |c| c.expr().is_null()),
        Filter::IsNotNull { attr } => column(attr).map_or_else(never, |c| c.expr().is_not_null()),
    }
}

fn fold(parts: &[Filter], columns: &[Column], join: fn(Expr, Expr) -> Expr) -> Expr {
    let mut exprs = parts.iter().map(|p| filter_expr(p, columns));
    match exprs.next() {
        Some(first) => exprs.fold(first, join),
        None => never(),
    }
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
