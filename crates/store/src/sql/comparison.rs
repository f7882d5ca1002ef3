//! A comparison of the collection language as a SQL expression, shared by the collections'
//! filters and the time conditions of raw points (`point_time`).

use devicecloud_query::CompareOp;
use sea_query::{Expr, ExprTrait};

/// `left <op> right`.
pub(crate) fn compare(left: Expr, op: CompareOp, right: Expr) -> Expr {
    match op {
        CompareOp::Eq => left.eq(right),
        CompareOp::Neq => left.ne(right),
        CompareOp::Lt => left.lt(right),
        CompareOp::Lte => left.lte(right),
        CompareOp::Gt => left.gt(right),
        CompareOp::Gte => left.gte(right),
    }
}
