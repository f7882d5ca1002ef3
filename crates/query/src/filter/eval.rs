//! Evaluating a filter against a record held in memory (small fixed collections such as the
//! event-type catalogue), with SQL's reading of NULL: a comparison with NULL is not true.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::{CompareOp, Filter, Scalar};

impl Filter {
    /// Whether `record` satisfies the filter. Text compares case-insensitively, as the SQL
    /// collections sort and match text.
    pub fn matches(&self, record: &Map<String, Value>) -> bool {
        self.matches_fields(&|attr| record.get(attr).filter(|v| !v.is_null()).cloned())
    }

    /// Whether the record whose attributes `field` gives (`None` for NULL) satisfies the filter,
    /// read as [`Filter::matches`] reads a record: for records held as typed rows (raw points
    /// decoded from a chunk), whose attributes are made only when the filter names them.
    pub fn matches_fields(&self, field: &dyn Fn(&str) -> Option<Value>) -> bool {
        match self {
            Filter::And(parts) => parts.iter().all(|p| p.matches_fields(field)),
            Filter::Or(parts) => parts.iter().any(|p| p.matches_fields(field)),
            // NOT of an unknown (NULL) comparison stays unknown in SQL.
            Filter::Not(inner) => !inner.matches_fields(field) && !mentions_null(inner, field),
            Filter::Never => false,
            Filter::Compare { attr, op, value } => {
                field(attr).and_then(|v| compare(&v, value)).is_some_and(|o| match op {
                    CompareOp::Eq => o == Ordering::Equal,
                    CompareOp::Neq => o != Ordering::Equal,
                    CompareOp::Lt => o == Ordering::Less,
                    CompareOp::Lte => o != Ordering::Greater,
                    CompareOp::Gt => o == Ordering::Greater,
                    CompareOp::Gte => o != Ordering::Less,
                })
            }
            Filter::Like { attr, value } => {
                field(attr).is_some_and(|v| text(&v).to_lowercase().contains(&value.to_lowercase()))
            }
            Filter::In {
                attr,
                values,
                or_null,
                negated,
            } => match field(attr) {
                None => *or_null && !*negated,
                Some(v) => {
                    let found = values.iter().any(|s| compare(&v, s) == Some(Ordering::Equal));
                    found != *negated
                }
            },
            Filter::IsNull { attr } => field(attr).is_none(),
            Filter::IsNotNull { attr } => field(attr).is_some(),
        }
    }
}

/// Whether a comparison inside `filter` meets a NULL field (its truth is unknown).
fn mentions_null(filter: &Filter, field: &dyn Fn(&str) -> Option<Value>) -> bool {
    let null = |attr: &str| field(attr).is_none();
    match filter {
        Filter::And(parts) | Filter::Or(parts) => parts.iter().any(|p| mentions_null(p, field)),
        Filter::Not(inner) => mentions_null(inner, field),
        Filter::Compare { attr, .. } | Filter::Like { attr, .. } => null(attr),
        Filter::In { attr, or_null, .. } => null(attr) && !or_null,
        Filter::Never | Filter::IsNull { .. } | Filter::IsNotNull { .. } => false,
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Orders a field against an operand: numerically when both read as numbers, else as text
/// without regard to case.
fn compare(field: &Value, operand: &Scalar) -> Option<Ordering> {
    let number = match field {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    };
    let operand_number = match operand {
        Scalar::Int(i) => Some(*i as f64),
        Scalar::Float(f) => Some(*f),
        Scalar::Bool(b) => Some(f64::from(u8::from(*b))),
        Scalar::Str(s) => s.trim().parse::<f64>().ok(),
    };
    if let (Some(a), Some(b)) = (number, operand_number) {
        return a.partial_cmp(&b);
    }
    let operand_text = match operand {
        Scalar::Str(s) => s.clone(),
        Scalar::Int(i) => i.to_string(),
        Scalar::Float(f) => f.to_string(),
        Scalar::Bool(b) => u8::from(*b).to_string(),
    };
    Some(text(field).to_lowercase().cmp(&operand_text.to_lowercase()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record() -> Map<String, Value> {
        json!({"event_type": "208", "label": "Cloud Connectivity", "from_device": null})
            .as_object()
            .cloned()
            .unwrap_or_default()
    }

    #[test]
    fn comparisons_read_numbers_and_text() {
        let eq = |attr, value| Filter::Compare {
            attr,
            op: CompareOp::Eq,
            value,
        };
        assert!(eq("event_type", Scalar::Int(208)).matches(&record()));
        assert!(!eq("event_type", Scalar::Int(209)).matches(&record()));
        let gt = Filter::Compare {
            attr: "event_type",
            op: CompareOp::Gt,
            value: Scalar::Int(100),
        };
        assert!(gt.matches(&record()));
        let like = Filter::Like {
            attr: "label",
            value: "connect".into(),
        };
        assert!(like.matches(&record()));
    }

    #[test]
    fn null_fields_follow_sql() {
        let eq = Filter::Compare {
            attr: "from_device",
            op: CompareOp::Eq,
            value: Scalar::Int(0),
        };
        assert!(!eq.matches(&record()));
        assert!(!Filter::Not(Box::new(eq)).matches(&record()));
        assert!(Filter::IsNull { attr: "from_device" }.matches(&record()));
        let in_or_null = Filter::In {
            attr: "from_device",
            values: vec![Scalar::Int(1)],
            or_null: true,
            negated: false,
        };
        assert!(in_or_null.matches(&record()));
    }
}
