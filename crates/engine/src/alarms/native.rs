//! The conditions most rules are — comparisons, `&&`, `||`, `!`, arithmetic on doubles, over
//! `value`, `previous`, `rate`, `datatype` and literals — evaluated natively, without the CEL
//! interpreter's per-variable allocations: a point is evaluated in nanoseconds rather than
//! hundreds of them (docs/benchmarks.md, "Alarms").
//!
//! The CEL crate stays the definition: this only takes the cases whose outcome it knows to be the
//! interpreter's (a property test holds them to it), and says [`Out::Ask`] for any other —
//! a string, integer arithmetic, a bool ordered, a number too large to compare exactly — which
//! the interpreter then answers. An expression with anything else (a function, a macro, a
//! ternary) is not compiled here at all.

use cel::common::ast::{Expr, IdedExpr, LiteralValue};

use super::condition::Vars;

/// A value of the native evaluation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum V {
    D(f64),
    I(i64),
    B(bool),
    Null,
}

/// What a native evaluation gives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Out {
    Val(V),
    /// CEL evaluates it to an error.
    Error,
    /// Not known here: the interpreter answers.
    Ask,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Var {
    Value,
    Previous,
    Rate,
    Datatype,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
}

/// A compiled expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Var(Var),
    Lit(V),
    Not(Box<Node>),
    Neg(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Cmp(Cmp, Box<Node>, Box<Node>),
    Arith(Arith, Box<Node>, Box<Node>),
}

/// Integers compared with doubles exactly: within ±2^53 an `i64` is an `f64` without rounding.
const EXACT: u64 = 1 << 53;

impl Node {
    /// The native form of an expression, if every part of it has one.
    pub fn compile(expr: &IdedExpr) -> Option<Node> {
        Some(match &expr.expr {
            Expr::Ident(name) => Node::Var(match name.as_str() {
                "value" => Var::Value,
                "previous" => Var::Previous,
                "rate" => Var::Rate,
                "datatype" => Var::Datatype,
                _ => return None,
            }),
            Expr::Literal(literal) => Node::Lit(match literal {
                LiteralValue::Double(d) => V::D(*d.inner()),
                LiteralValue::Int(i) => V::I(*i.inner()),
                LiteralValue::Boolean(b) => V::B(*b.inner()),
                LiteralValue::Null => V::Null,
                _ => return None,
            }),
            Expr::Call(call) if call.target.is_none() => {
                let arg = |i: usize| call.args.get(i).and_then(Node::compile).map(Box::new);
                match (call.func_name.as_str(), call.args.len()) {
                    ("!_", 1) => Node::Not(arg(0)?),
                    ("-_", 1) => Node::Neg(arg(0)?),
                    ("_&&_", 2) => Node::And(arg(0)?, arg(1)?),
                    ("_||_", 2) => Node::Or(arg(0)?, arg(1)?),
                    (name, 2) => {
                        let (l, r) = (arg(0)?, arg(1)?);
                        match name {
                            "_<_" => Node::Cmp(Cmp::Lt, l, r),
                            "_<=_" => Node::Cmp(Cmp::Le, l, r),
                            "_>_" => Node::Cmp(Cmp::Gt, l, r),
                            "_>=_" => Node::Cmp(Cmp::Ge, l, r),
                            "_==_" => Node::Cmp(Cmp::Eq, l, r),
                            "_!=_" => Node::Cmp(Cmp::Ne, l, r),
                            "_+_" => Node::Arith(Arith::Add, l, r),
                            "_-_" => Node::Arith(Arith::Sub, l, r),
                            "_*_" => Node::Arith(Arith::Mul, l, r),
                            "_/_" => Node::Arith(Arith::Div, l, r),
                            _ => return None,
                        }
                    }
                    _ => return None,
                }
            }
            _ => return None,
        })
    }

    /// The expression for a point.
    pub fn eval(&self, vars: &Vars<'_>) -> Out {
        match self {
            Node::Var(var) => Out::Val(match var {
                Var::Value => V::D(vars.value),
                Var::Previous => vars.previous.map_or(V::Null, V::D),
                Var::Rate => vars.rate.map_or(V::Null, V::D),
                Var::Datatype => V::I(vars.datatype),
            }),
            Node::Lit(v) => Out::Val(*v),
            Node::Not(inner) => match inner.eval(vars) {
                Out::Val(V::B(b)) => Out::Val(V::B(!b)),
                _ => Out::Ask,
            },
            Node::Neg(inner) => match inner.eval(vars) {
                Out::Val(V::D(d)) => Out::Val(V::D(-d)),
                Out::Error => Out::Error,
                _ => Out::Ask,
            },
            Node::And(l, r) => logical(l.eval(vars), || r.eval(vars), false),
            Node::Or(l, r) => logical(l.eval(vars), || r.eval(vars), true),
            Node::Cmp(op, l, r) => match (l.eval(vars), r.eval(vars)) {
                (Out::Val(a), Out::Val(b)) => compare(*op, a, b),
                (Out::Error, _) => Out::Error,
                (Out::Val(_), Out::Error) => Out::Error,
                _ => Out::Ask,
            },
            Node::Arith(op, l, r) => match (l.eval(vars), r.eval(vars)) {
                (Out::Val(V::D(a)), Out::Val(V::D(b))) => Out::Val(V::D(match op {
                    Arith::Add => a + b,
                    Arith::Sub => a - b,
                    Arith::Mul => a * b,
                    Arith::Div => a / b,
                })),
                (Out::Error, _) => Out::Error,
                (Out::Val(_), Out::Error) => Out::Error,
                _ => Out::Ask,
            },
        }
    }
}

/// `&&` (`absorbing` false) and `||` (`absorbing` true) as the interpreter evaluates them: the
/// left operand first; the absorbing value decides on either side, an error on the right is the
/// answer otherwise.
fn logical(left: Out, right: impl FnOnce() -> Out, absorbing: bool) -> Out {
    if left == Out::Val(V::B(absorbing)) {
        return Out::Val(V::B(absorbing));
    }
    let right = right();
    match (left, right) {
        // The left one unknown here may be the absorbing value, which the interpreter returns
        // without looking right; only the absorbing value on the right decides regardless.
        (Out::Ask, Out::Val(V::B(b))) if b == absorbing => Out::Val(V::B(absorbing)),
        (Out::Ask, _) | (_, Out::Ask) => Out::Ask,
        (_, Out::Error) => Out::Error,
        (Out::Val(V::B(_)), Out::Val(V::B(b))) => Out::Val(V::B(b)),
        // The left an error or not a bool: only the absorbing value on the right saves it.
        (_, Out::Val(V::B(b))) if b == absorbing => Out::Val(V::B(absorbing)),
        _ => Out::Error,
    }
}

/// A comparison of two values.
fn compare(op: Cmp, a: V, b: V) -> Out {
    use std::cmp::Ordering;
    let ordering = match (a, b) {
        (V::D(x), V::D(y)) => x.partial_cmp(&y),
        (V::I(x), V::I(y)) => Some(x.cmp(&y)),
        (V::D(x), V::I(y)) if y.unsigned_abs() <= EXACT => x.partial_cmp(&(y as f64)),
        (V::I(x), V::D(y)) if x.unsigned_abs() <= EXACT => (x as f64).partial_cmp(&y),
        (V::Null, V::Null) => Some(Ordering::Equal),
        (V::Null, V::D(_) | V::I(_)) | (V::D(_) | V::I(_), V::Null) => {
            return match op {
                Cmp::Eq => Out::Val(V::B(false)),
                Cmp::Ne => Out::Val(V::B(true)),
                _ => Out::Error,
            };
        }
        _ => return Out::Ask,
    };
    let result = match (op, ordering) {
        (Cmp::Eq, o) => o == Some(Ordering::Equal),
        (Cmp::Ne, o) => o != Some(Ordering::Equal),
        // Ordering null, or NaN, is an error.
        (_, None) => return Out::Error,
        (_, Some(_)) if matches!((a, b), (V::Null, V::Null)) => return Out::Error,
        (Cmp::Lt, Some(o)) => o == Ordering::Less,
        (Cmp::Le, Some(o)) => o != Ordering::Greater,
        (Cmp::Gt, Some(o)) => o == Ordering::Greater,
        (Cmp::Ge, Some(o)) => o != Ordering::Less,
    };
    Out::Val(V::B(result))
}

#[cfg(test)]
mod tests;
