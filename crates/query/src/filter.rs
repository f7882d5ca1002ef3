//! Yii2 `ActiveDataFilter`: the `filter` grammar (query-string tree or JSON body) validated and
//! turned into a typed condition tree (docs/api.md, "Collections").

mod analysis;
mod eval;
mod grammar;
mod label;
mod value;

use std::borrow::Cow;

use serde_json::Value;

use crate::error::QueryError;

/// The type of a filterable attribute, as Yii reads it from the search model's validators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    /// `integer` validator: `[+-]?\d+`.
    Integer,
    /// `number` validator: integers, decimals, exponents.
    Number,
    /// `string` validator (also the type of attributes without a typed validator).
    String,
    /// `boolean` validator: "1" or "0".
    Boolean,
}

/// One attribute of a collection's search model.
#[derive(Clone, Copy, Debug)]
pub struct Attribute {
    /// The name clients use in `filter[...]`, case-sensitive.
    pub name: &'static str,
    /// How operands are validated and which operators apply.
    pub kind: AttrKind,
    /// The label used in messages; `None` derives it from the name like Yii's
    /// `generateAttributeLabel` ("created_at" → "Created At", "groupId" → "Group Id").
    pub label: Option<&'static str>,
}

impl Attribute {
    /// An attribute with a derived label.
    pub const fn new(name: &'static str, kind: AttrKind) -> Self {
        Attribute {
            name,
            kind,
            label: None,
        }
    }

    /// An attribute with an explicit label.
    pub const fn labelled(name: &'static str, kind: AttrKind, label: &'static str) -> Self {
        Attribute {
            name,
            kind,
            label: Some(label),
        }
    }

    /// The label used in validation messages.
    pub fn label(&self) -> Cow<'static, str> {
        match self.label {
            Some(l) => Cow::Borrowed(l),
            None => Cow::Owned(label::generate(self.name)),
        }
    }
}

/// A validated operand.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    /// From an integer attribute.
    Int(i64),
    /// From a number attribute (always), or an integer attribute's literal beyond 64 bits.
    Float(f64),
    /// From a string attribute.
    Str(String),
    /// From a boolean attribute.
    Bool(bool),
}

/// A comparison operator (`eq`, `neq`, `lt`, `lte`, `gt`, `gte`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    /// `=`
    Eq,
    /// `!=` (rows where the attribute is NULL never match, SQL three-valued logic)
    Neq,
    /// `<`
    Lt,
    /// `<=`
    Lte,
    /// `>`
    Gt,
    /// `>=`
    Gte,
}

/// A validated filter condition.
#[derive(Clone, Debug, PartialEq)]
pub enum Filter {
    /// All of these (never empty).
    And(Vec<Filter>),
    /// Any of these (never empty).
    Or(Vec<Filter>),
    /// SQL `NOT (…)`.
    Not(Box<Filter>),
    /// `attr <op> value`.
    Compare {
        /// Attribute name.
        attr: &'static str,
        /// Operator.
        op: CompareOp,
        /// Validated operand.
        value: Scalar,
    },
    /// Literal, case-insensitive substring match; the SQL side escapes `%`, `_` and `\`.
    Like {
        /// Attribute name.
        attr: &'static str,
        /// The substring ("" matches every non-NULL value).
        value: String,
    },
    /// `negated == false`: `attr IN (values)`, `OR attr IS NULL` when `or_null`.
    /// `negated == true`: `attr NOT IN (values)`, `AND attr IS NOT NULL` when `or_null`.
    /// `values` is never empty (a NULL-only list is [`Filter::IsNull`] / [`Filter::IsNotNull`]).
    In {
        /// Attribute name.
        attr: &'static str,
        /// Validated values, in request order.
        values: Vec<Scalar>,
        /// Whether NULL was among the values.
        or_null: bool,
        /// `nin` rather than `in`.
        negated: bool,
    },
    /// `attr IS NULL` (`filter[x]=NULL`, or JSON null as a plain value).
    IsNull {
        /// Attribute name.
        attr: &'static str,
    },
    /// `attr IS NOT NULL`.
    IsNotNull {
        /// Attribute name.
        attr: &'static str,
    },
    /// Matches no row: comparisons with NULL (`[eq]=NULL`, `[neq]=NULL`: unknown in SQL), an
    /// empty `in` list, an empty operand of `eq`/`lt`/`lte`/`gt`/`gte` on a non-string attribute.
    Never,
}

/// Validates and types a filter: the query-string tree (via [`crate::Params::to_json`]) or a
/// JSON body's `filter` member. `Ok(None)` when it sets no condition (an empty map, JSON null).
///
/// Follows Yii2's `DataFilter::validateFilter` and `ActiveDataFilter::build`: only the first
/// error (depth-first, key order) is reported, with Yii's messages; several keys at one level
/// and several operators on one attribute are ANDed in order; `"NULL"` and JSON null mean SQL
/// NULL. Conditions nested deeper than 64 levels are rejected as "The format of Filter is
/// invalid." so that recursion stays bounded. An `in` / `nin` list longer than
/// `max_list_values` ([`DEFAULT_MAX_LIST_VALUES`] unless configured), or a filter with more
/// than [`MAX_VALUES`] values in all, is a filter error too: each value is one SQL parameter.
pub fn parse_filter(
    value: &Value,
    attributes: &[Attribute],
    max_list_values: usize,
) -> Result<Option<Filter>, QueryError> {
    if value.is_null() {
        // DataFilter::validateFilter skips a null filter: no condition.
        return Ok(None);
    }
    if serialized_len(value) > MAX_FILTER_BYTES {
        return Err(QueryError::Filter(format!(
            "The filter is larger than {} KiB.",
            MAX_FILTER_BYTES / 1024
        )));
    }
    let filter = grammar::Grammar::new(attributes, max_list_values).condition(value, 1)?;
    if filter.as_ref().map_or(0, Filter::condition_count) > MAX_CONDITIONS {
        return Err(QueryError::Filter(format!(
            "The filter has too many conditions (at most {MAX_CONDITIONS})."
        )));
    }
    if filter.as_ref().map_or(0, Filter::value_count) > MAX_VALUES {
        return Err(QueryError::Filter(format!(
            "The filter has too many values (at most {MAX_VALUES} in all)."
        )));
    }
    Ok(filter)
}

/// Longest `like` value, in characters (docs/operations.md, "Limits").
pub const MAX_LIKE_CHARS: usize = 256;

/// Largest filter, as JSON text (docs/operations.md, "Limits"): the query-string form is
/// measured after decoding, so a URL filter and a body filter meet the same bound.
pub const MAX_FILTER_BYTES: usize = 64 * 1024;

/// The length of `value` as compact JSON, without building the text.
fn serialized_len(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing into a counter cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// Most values one `in` / `nin` list may hold unless the service is configured otherwise
/// (docs/operations.md, "Limits").
pub const DEFAULT_MAX_LIST_VALUES: usize = 1000;

/// Most values a whole filter may hold: each is one bound parameter, and SQLite refuses a
/// statement with more than 32,766 of them (PostgreSQL 65,535).
pub const MAX_VALUES: usize = 10_000;

/// Most comparisons one filter may hold. SQLite refuses expressions deeper than 1000 levels and
/// reads `a OR b OR …` as a chain, so a longer filter could only fail in the database.
pub const MAX_CONDITIONS: usize = 250;

#[cfg(test)]
mod tests;
