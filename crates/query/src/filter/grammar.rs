//! The condition grammar of Yii2's `DataFilter` / `ActiveDataFilter`, walked once: validation in
//! Yii's order (so the first error is Yii's first error) and building in the same pass.

use std::borrow::Cow;

use serde_json::Value;

use super::value::{Operand, operand};
use super::{Attribute, CompareOp, Filter, Scalar};
use crate::error::QueryError;
use crate::php;

/// Deepest condition nesting accepted; PHP's own input nesting limit is 64 as well.
const MAX_DEPTH: usize = 64;

/// A filter keyword (`DataFilter::$filterControls`, lowercase and case-sensitive).
#[derive(Clone, Copy)]
enum Keyword {
    And,
    Or,
    Not,
    /// An attribute operator (`eq`, `in`, …) where a condition belongs.
    Operator,
}

/// An attribute operator (`DataFilter::$operatorTypes`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Operator {
    Compare(CompareOp),
    In,
    Nin,
    Like,
}

fn keyword(key: &str) -> Option<Keyword> {
    Some(match key {
        "and" => Keyword::And,
        "or" => Keyword::Or,
        "not" => Keyword::Not,
        _ => {
            operator(key)?;
            Keyword::Operator
        }
    })
}

fn operator(key: &str) -> Option<Operator> {
    Some(match key {
        "eq" => Operator::Compare(CompareOp::Eq),
        "neq" => Operator::Compare(CompareOp::Neq),
        "lt" => Operator::Compare(CompareOp::Lt),
        "lte" => Operator::Compare(CompareOp::Lte),
        "gt" => Operator::Compare(CompareOp::Gt),
        "gte" => Operator::Compare(CompareOp::Gte),
        "in" => Operator::In,
        "nin" => Operator::Nin,
        "like" => Operator::Like,
        _ => return None,
    })
}

/// The entries of a JSON container as a PHP array sees them: arrays keyed "0", "1", ….
/// `None` for scalars and null (`!is_array`).
fn entries(v: &Value) -> Option<Vec<(Cow<'_, str>, &Value)>> {
    match v {
        Value::Object(map) => Some(map.iter().map(|(k, v)| (Cow::Borrowed(k.as_str()), v)).collect()),
        Value::Array(items) => Some(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| (Cow::Owned(i.to_string()), v))
                .collect(),
        ),
        _ => None,
    }
}

/// Several parts of one level: Yii wraps them in `AND`, keeps a single one as is and drops
/// empty ones (an empty condition adds nothing).
fn all_of(mut parts: Vec<Filter>) -> Option<Filter> {
    match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(Filter::And(parts)),
    }
}

fn any_of(mut parts: Vec<Filter>) -> Option<Filter> {
    match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(Filter::Or(parts)),
    }
}

fn filter_error(message: String) -> QueryError {
    QueryError::Filter(message)
}

/// The search model's attributes, and the walk over a filter.
pub(super) struct Grammar<'a> {
    /// Most values one `in` / `nin` list may hold.
    max_list_values: usize,
    attributes: &'a [Attribute],
}

impl<'a> Grammar<'a> {
    pub(super) fn new(attributes: &'a [Attribute], max_list_values: usize) -> Self {
        Grammar {
            attributes,
            max_list_values,
        }
    }

    /// `validateCondition` + `buildCondition`: a map of keywords and attributes, ANDed in order.
    /// `depth` counts JSON containers from the top filter object (1).
    pub(super) fn condition(&self, v: &Value, depth: usize) -> Result<Option<Filter>, QueryError> {
        if depth > MAX_DEPTH {
            return Err(QueryError::invalid_filter());
        }
        let Some(entries) = entries(v) else {
            // A scalar where a condition belongs: `filter=abc`, `filter[and][]=x`.
            return Err(QueryError::invalid_filter());
        };
        let mut parts = Vec::new();
        for (key, value) in entries {
            let part = match keyword(&key) {
                Some(Keyword::And) => all_of(self.conjunction(&key, value, depth)?),
                Some(Keyword::Or) => any_of(self.conjunction(&key, value, depth)?),
                // validateBlockCondition: one condition; `NOT` of an empty one is no condition.
                Some(Keyword::Not) => self
                    .condition(value, depth + 1)?
                    .map(|inner| Filter::Not(Box::new(inner))),
                Some(Keyword::Operator) => {
                    return Err(filter_error(format!(
                        "Operator \"{key}\" must be used with a search attribute."
                    )));
                }
                None => self.attribute_condition(&key, value)?,
            };
            parts.extend(part);
        }
        Ok(all_of(parts))
    }

    /// `validateConjunctionCondition`: a list of conditions (a JSON array, or a map whose keys
    /// are all integers, `ArrayHelper::isIndexed`). Returns the non-empty parts.
    fn conjunction(&self, key: &str, v: &Value, depth: usize) -> Result<Vec<Filter>, QueryError> {
        let items: Vec<&Value> = match v {
            Value::Array(items) => items.iter().collect(),
            Value::Object(map) if map.keys().all(|k| php::int_key(k).is_some()) => map.values().collect(),
            _ => {
                return Err(filter_error(format!("Operator \"{key}\" requires multiple operands.")));
            }
        };
        let mut parts = Vec::with_capacity(items.len());
        for item in items {
            // The list is one level, each condition in it the next.
            parts.extend(self.condition(item, depth + 2)?);
        }
        Ok(parts)
    }

    /// `validateAttributeCondition` + `buildAttributeCondition`: a plain value (equality) or a
    /// map of operators. A map without any operator key is a value too (and fails validation
    /// unless empty), which is why `{"GT": 5}` reads as "Id must be an integer.".
    fn attribute_condition(&self, name: &str, v: &Value) -> Result<Option<Filter>, QueryError> {
        let Some(attr) = self.attributes.iter().find(|a| a.name == name) else {
            return Err(filter_error(format!("Unknown filter attribute \"{name}\"")));
        };
        if let Value::Object(map) = v {
            let mut operators = 0;
            let mut parts = Vec::new();
            for (raw_op, operand) in map {
                if let Some(op) = operator(raw_op) {
                    operators += 1;
                    parts.extend(self.operator_condition(attr, raw_op, op, operand)?);
                }
            }
            if operators > 0 {
                // Checked after the operators, as Yii adds this error after theirs.
                if operators < map.len() {
                    return Err(filter_error(format!(
                        "Condition for \"{name}\" should be either a value or valid operator specification."
                    )));
                }
                return Ok(all_of(parts));
            }
        }
        Ok(Some(match operand(attr, v)? {
            Operand::Null => Filter::IsNull { attr: attr.name },
            // `attr = ''` on a non-string column, or `attr IN ()` for an empty array.
            Operand::Empty => Filter::Never,
            Operand::Value(value) => Filter::Compare {
                attr: attr.name,
                op: CompareOp::Eq,
                value,
            },
        }))
    }

    /// `validateOperatorCondition` + `buildOperatorCondition` for one operator of an attribute.
    fn operator_condition(
        &self,
        attr: &Attribute,
        raw_op: &str,
        op: Operator,
        v: &Value,
    ) -> Result<Option<Filter>, QueryError> {
        use super::AttrKind::{Integer, Number, String};
        let supported = match op {
            Operator::Compare(CompareOp::Lt | CompareOp::Lte | CompareOp::Gt | CompareOp::Gte) => {
                matches!(attr.kind, Integer | Number)
            }
            Operator::Like => attr.kind == String,
            _ => true,
        };
        if !supported {
            return Err(filter_error(format!(
                "\"{}\" does not support operator \"{raw_op}\".",
                attr.name
            )));
        }
        match op {
            Operator::In | Operator::Nin => self.in_condition(attr, raw_op, op == Operator::Nin, v),
            Operator::Compare(cmp) => Ok(Some(match operand(attr, v)? {
                // `attr = NULL`, `attr != NULL`, `attr < NULL`: unknown for every row.
                Operand::Null => Filter::Never,
                // `id != ''` holds for every non-NULL number; the other comparisons match nothing.
                Operand::Empty if cmp == CompareOp::Neq => Filter::IsNotNull { attr: attr.name },
                Operand::Empty => Filter::Never,
                Operand::Value(value) => Filter::Compare {
                    attr: attr.name,
                    op: cmp,
                    value,
                },
            })),
            Operator::Like => Ok(Some(match operand(attr, v)? {
                // Each `like` compiles a matcher per query (a regex on SQLite): its length is
                // bounded so that one filter cannot hold a database worker for seconds.
                Operand::Value(Scalar::Str(value)) if value.chars().count() > super::MAX_LIKE_CHARS => {
                    return Err(filter_error(format!(
                        "The value of \"like\" on \"{}\" is longer than {} characters.",
                        attr.name,
                        super::MAX_LIKE_CHARS
                    )));
                }
                Operand::Value(Scalar::Str(value)) => Filter::Like { attr: attr.name, value },
                // `attr LIKE NULL` is unknown; `LIKE` over an empty list is `0=1`. (A non-string
                // value cannot occur: `like` is only accepted on string attributes.)
                Operand::Null | Operand::Empty | Operand::Value(_) => Filter::Never,
            })),
        }
    }

    /// `in` / `nin`: a list (array or map) whose every element is validated.
    fn in_condition(
        &self,
        attr: &Attribute,
        raw_op: &str,
        negated: bool,
        v: &Value,
    ) -> Result<Option<Filter>, QueryError> {
        let items: Vec<&Value> = match v {
            Value::Array(items) => items.iter().collect(),
            Value::Object(map) => map.values().collect(),
            _ => {
                return Err(filter_error(format!(
                    "Operator \"{raw_op}\" requires multiple operands."
                )));
            }
        };
        // Counted before any element is read: a huge list costs nothing but this refusal.
        if items.len() > self.max_list_values {
            return Err(filter_error(format!(
                "Operator \"{raw_op}\" accepts at most {} values; {} were given.",
                self.max_list_values,
                items.len()
            )));
        }
        let mut values = Vec::with_capacity(items.len());
        let mut or_null = false;
        let mut had_empty = false;
        for item in items {
            match operand(attr, item)? {
                Operand::Null => or_null = true,
                Operand::Empty => had_empty = true,
                Operand::Value(value) => values.push(value),
            }
        }
        let name = attr.name;
        Ok(match (values.is_empty(), negated) {
            (false, _) => Some(Filter::In {
                attr: name,
                values,
                or_null,
                negated,
            }),
            (true, false) if or_null => Some(Filter::IsNull { attr: name }),
            // `IN ()` and `IN ('')` on a non-string column match nothing.
            (true, false) => Some(Filter::Never),
            // `NOT IN (NULL)` is `IS NOT NULL`; `NOT IN ('')` holds for every non-NULL number.
            (true, true) if or_null || had_empty => Some(Filter::IsNotNull { attr: name }),
            // `NOT IN ()` is no condition at all in Yii's query builder.
            (true, true) => None,
        })
    }
}
