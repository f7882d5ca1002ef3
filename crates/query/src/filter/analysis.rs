//! Reading a filter tree without running it, so that the store can plan a query before SQL:
//! its size (the limits of [`super::parse_filter`]), the attributes it names (which tables to
//! join), and its top-level conjunction, the conditions every matching row satisfies (which
//! session, rollup table or time window to read). Conditions under `or` or `not` are never
//! read as such facts.

use super::{CompareOp, Filter, Scalar};

impl Filter {
    /// How many comparisons (leaves) the filter holds.
    pub fn condition_count(&self) -> usize {
        match self {
            Filter::And(parts) | Filter::Or(parts) => parts.iter().map(Filter::condition_count).sum(),
            Filter::Not(inner) => inner.condition_count(),
            _ => 1,
        }
    }

    /// Whether any comparison of the filter is on an attribute `wanted` accepts (a collection
    /// joins a related table only when its filter names one of its attributes).
    pub fn mentions(&self, wanted: &impl Fn(&str) -> bool) -> bool {
        match self {
            Filter::And(parts) | Filter::Or(parts) => parts.iter().any(|p| p.mentions(wanted)),
            Filter::Not(inner) => inner.mentions(wanted),
            Filter::Never => false,
            Filter::Compare { attr, .. }
            | Filter::Like { attr, .. }
            | Filter::In { attr, .. }
            | Filter::IsNull { attr }
            | Filter::IsNotNull { attr } => wanted(attr),
        }
    }

    /// Whether every comparison of the filter is on an attribute `wanted` accepts (`never`
    /// names none, so it qualifies): the filter can then be decided on a related table alone.
    pub fn mentions_only(&self, wanted: &impl Fn(&str) -> bool) -> bool {
        match self {
            Filter::And(parts) | Filter::Or(parts) => parts.iter().all(|p| p.mentions_only(wanted)),
            Filter::Not(inner) => inner.mentions_only(wanted),
            Filter::Never => true,
            Filter::Compare { attr, .. }
            | Filter::Like { attr, .. }
            | Filter::In { attr, .. }
            | Filter::IsNull { attr }
            | Filter::IsNotNull { attr } => wanted(attr),
        }
    }

    /// How many values (SQL parameters) the filter holds.
    pub fn value_count(&self) -> usize {
        match self {
            Filter::And(parts) | Filter::Or(parts) => parts.iter().map(Filter::value_count).sum(),
            Filter::Not(inner) => inner.value_count(),
            Filter::In { values, .. } => values.len(),
            _ => 1,
        }
    }

    /// The parts of the top-level conjunction, nested `and`s flattened (several operators on
    /// one attribute arrive as an `and` of their own); any other filter is its own only part.
    pub fn conjuncts(&self) -> Vec<&Filter> {
        match self {
            Filter::And(parts) => parts.iter().flat_map(Filter::conjuncts).collect(),
            other => vec![other],
        }
    }

    /// The values the top-level conjunction compares `attr` with by `eq`, in filter order.
    pub fn equal_values<'a>(&'a self, attr: &'a str) -> impl Iterator<Item = &'a Scalar> {
        self.conjuncts().into_iter().filter_map(move |part| match part {
            Filter::Compare {
                attr: a,
                op: CompareOp::Eq,
                value,
            } if *a == attr => Some(value),
            _ => None,
        })
    }

    /// The filter without the comparisons (`eq`, `neq`, `lt`, …) on `attr` of its top-level
    /// conjunction; `None` when nothing is left. Other conditions on `attr` (`like`, `in`,
    /// NULL tests) and anything under `or` / `not` stay.
    pub fn without_comparisons(&self, attr: &str) -> Option<Filter> {
        match self {
            Filter::And(parts) => {
                let parts: Vec<Filter> = parts.iter().filter_map(|p| p.without_comparisons(attr)).collect();
                (!parts.is_empty()).then_some(Filter::And(parts))
            }
            Filter::Compare { attr: a, .. } if *a == attr => None,
            other => Some(other.clone()),
        }
    }

    /// The filter as two whose conjunction it is: the top-level conjuncts that name only
    /// attributes `wanted` accepts, and the rest; `None` for a side left empty.
    pub fn partition_conjuncts(&self, wanted: &impl Fn(&str) -> bool) -> (Option<Filter>, Option<Filter>) {
        let (named, rest): (Vec<&Filter>, Vec<&Filter>) = self
            .conjuncts()
            .into_iter()
            .partition(|part| part.mentions_only(wanted));
        let join = |parts: Vec<&Filter>| match parts.as_slice() {
            [] => None,
            [one] => Some((*one).clone()),
            _ => Some(Filter::And(parts.into_iter().cloned().collect())),
        };
        (join(named), join(rest))
    }

    /// The interval of `attr` the top-level conjunction asks for: the tightest lower and upper
    /// bounds of its comparisons (`eq` bounds both sides; `neq` neither). A side with no bound
    /// is `None`, as are the bounds of a value that is not a number.
    pub fn numeric_bounds(&self, attr: &str) -> (Option<f64>, Option<f64>) {
        let (mut lower, mut upper): (Option<f64>, Option<f64>) = (None, None);
        for part in self.conjuncts() {
            let Filter::Compare { attr: a, op, value } = part else {
                continue;
            };
            if *a != attr {
                continue;
            }
            let Some(v) = number(value) else { continue };
            let (lo, hi) = match op {
                CompareOp::Gt | CompareOp::Gte => (Some(v), None),
                CompareOp::Lt | CompareOp::Lte => (None, Some(v)),
                CompareOp::Eq => (Some(v), Some(v)),
                CompareOp::Neq => (None, None),
            };
            if let Some(lo) = lo {
                lower = Some(lower.map_or(lo, |l| l.max(lo)));
            }
            if let Some(hi) = hi {
                upper = Some(upper.map_or(hi, |u| u.min(hi)));
            }
        }
        (lower, upper)
    }
}

/// A value as a number: integers and floats as they are, text when it reads as one.
fn number(value: &Scalar) -> Option<f64> {
    match value {
        Scalar::Int(i) => Some(*i as f64),
        Scalar::Float(f) => Some(*f),
        Scalar::Str(s) => s.trim().parse().ok(),
        Scalar::Bool(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(attr: &'static str, op: CompareOp, value: Scalar) -> Filter {
        Filter::Compare { attr, op, value }
    }

    fn t(op: CompareOp, v: i64) -> Filter {
        cmp("t", op, Scalar::Int(v))
    }

    fn s_eq(v: &str) -> Filter {
        cmp("s", CompareOp::Eq, Scalar::Str(v.into()))
    }

    #[test]
    fn mentions_only_asks_every_comparison() {
        let container = |a: &str| a == "s" || a == "u";
        let like = Filter::Like {
            attr: "u",
            value: "x".into(),
        };
        let only = Filter::And(vec![
            s_eq("a"),
            Filter::Or(vec![like.clone(), Filter::IsNull { attr: "s" }]),
            Filter::Not(Box::new(Filter::In {
                attr: "u",
                values: vec![Scalar::Int(1)],
                or_null: false,
                negated: false,
            })),
        ]);
        assert!(only.mentions_only(&container));
        assert!(Filter::Never.mentions_only(&container));
        let deep = Filter::And(vec![
            s_eq("a"),
            Filter::Not(Box::new(Filter::Or(vec![like, t(CompareOp::Gt, 0)]))),
        ]);
        assert!(!deep.mentions_only(&container));
        assert!(deep.mentions(&|a| a == "t"));
        assert!(!Filter::IsNotNull { attr: "t" }.mentions_only(&container));
    }

    #[test]
    fn conjuncts_flatten_nested_ands_only() {
        let a = t(CompareOp::Gt, 1);
        let b = t(CompareOp::Lt, 2);
        let or = Filter::Or(vec![a.clone(), b.clone()]);
        let nested = Filter::And(vec![a.clone(), Filter::And(vec![b.clone(), or.clone()])]);
        assert_eq!(nested.conjuncts(), vec![&a, &b, &or]);
        assert_eq!(or.conjuncts(), vec![&or]);
        assert_eq!(Filter::Never.conjuncts(), vec![&Filter::Never]);
    }

    #[test]
    fn equal_values_are_the_top_level_eqs_in_order() {
        let f = Filter::And(vec![
            cmp("s", CompareOp::Neq, Scalar::Str("no".into())),
            Filter::Or(vec![s_eq("in-or")]),
            Filter::Not(Box::new(s_eq("in-not"))),
            s_eq("first"),
            Filter::And(vec![s_eq("second")]),
            cmp("other", CompareOp::Eq, Scalar::Str("x".into())),
        ]);
        let values: Vec<&Scalar> = f.equal_values("s").collect();
        assert_eq!(
            values,
            vec![&Scalar::Str("first".into()), &Scalar::Str("second".into())]
        );
        assert_eq!(s_eq("alone").equal_values("s").count(), 1);
        assert_eq!(Filter::Or(vec![s_eq("a")]).equal_values("s").count(), 0);
    }

    #[test]
    fn without_comparisons_drops_top_level_comparisons_only() {
        let like = Filter::Like {
            attr: "s",
            value: "x".into(),
        };
        let or = Filter::Or(vec![s_eq("a"), t(CompareOp::Eq, 1)]);
        let f = Filter::And(vec![
            s_eq("a"),
            cmp("s", CompareOp::Lt, Scalar::Str("b".into())),
            Filter::And(vec![s_eq("c")]),
            like.clone(),
            or.clone(),
            t(CompareOp::Gt, 0),
        ]);
        assert_eq!(
            f.without_comparisons("s"),
            Some(Filter::And(vec![like, or, t(CompareOp::Gt, 0)]))
        );
        // Nothing left: no filter, not an empty `and`.
        assert_eq!(s_eq("a").without_comparisons("s"), None);
        assert_eq!(
            Filter::And(vec![s_eq("a"), Filter::And(vec![s_eq("b")])]).without_comparisons("s"),
            None
        );
        // A lone `and` part left stays an `and`.
        assert_eq!(
            Filter::And(vec![s_eq("a"), t(CompareOp::Gt, 0)]).without_comparisons("s"),
            Some(Filter::And(vec![t(CompareOp::Gt, 0)]))
        );
        assert_eq!(t(CompareOp::Gt, 0).without_comparisons("s"), Some(t(CompareOp::Gt, 0)));
    }

    #[test]
    fn numeric_bounds_are_the_tightest_of_the_top_level() {
        let tight = Filter::And(vec![
            t(CompareOp::Gt, 1),
            t(CompareOp::Gte, 5),
            t(CompareOp::Lt, 9),
            t(CompareOp::Lte, 12),
            t(CompareOp::Neq, 7),
            cmp("u", CompareOp::Lt, Scalar::Int(3)),
        ]);
        assert_eq!(tight.numeric_bounds("t"), (Some(5.0), Some(9.0)));
        assert_eq!(t(CompareOp::Eq, 4).numeric_bounds("t"), (Some(4.0), Some(4.0)));
        let or = Filter::Or(vec![t(CompareOp::Gt, 1), t(CompareOp::Lt, 2)]);
        assert_eq!(or.numeric_bounds("t"), (None, None));
        let not = Filter::Not(Box::new(t(CompareOp::Gt, 1)));
        assert_eq!(not.numeric_bounds("t"), (None, None));
        let mixed = Filter::And(vec![
            cmp("t", CompareOp::Gt, Scalar::Float(1.5)),
            cmp("t", CompareOp::Lt, Scalar::Str(" 8 ".into())),
            cmp("t", CompareOp::Lt, Scalar::Str("soon".into())),
            cmp("t", CompareOp::Lt, Scalar::Bool(true)),
        ]);
        assert_eq!(mixed.numeric_bounds("t"), (Some(1.5), Some(8.0)));
    }
}
