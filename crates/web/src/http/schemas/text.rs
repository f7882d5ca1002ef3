//! The JSON Schemas of body fields as the service's validators read them
//! (`service::validate::Fields`), so that the OpenAPI document admits exactly what is accepted:
//! a client generated from it, or a fuzzer, never sends a "valid" body that is refused, nor
//! finds an "invalid" one that is taken.

use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Schema, Type};

/// The characters Rust's `str::trim` removes (Unicode `White_Space`), spelled out because a
/// regex engine's `\s` differs from it at the edges (Python's also takes U+001C–U+001F).
const WHITESPACE: &str = r"\t\n\x0B\f\r \x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000";

/// Text of at most `max` characters without NUL (refused on every store: PostgreSQL cannot
/// hold it); blank allowed.
pub fn text(max: usize) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .max_length(Some(max))
        .pattern(Some(r"^[^\x00]*$"))
        .into()
}

/// Text of at most `max` characters without NUL that is not blank (a required field).
pub fn nonblank(max: usize) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(max))
        .pattern(Some(format!(r"^[^\x00]*[^\x00{WHITESPACE}][^\x00]*$")))
        .into()
}

/// One of the given words.
pub fn one_of(words: &[&str]) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(words.iter().copied()))
        .into()
}

/// A boolean as Yii's BooleanValidator takes it: `true`/`false`, `0`/`1` or `"0"`/`"1"`.
pub fn boolean_like() -> Schema {
    AnyOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Boolean))
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .enum_values(Some([0, 1])),
        )
        .item(one_of(&["0", "1"]))
        .description(Some("A boolean; also 0 or 1, as a number or as text"))
        .into()
}

/// An integer from `min` to `max` (both at least 0), also taken as text ("numbers may be sent as
/// text", docs/api.md): the text form is the decimal number with optional leading zeros, a `+`
/// and surrounding white space, as Rust's integer parser reads it after trimming.
pub fn integer_like(min: u64, max: u64) -> Schema {
    let numbers = decimal_range(min, max);
    let zero = if min == 0 { "-0*0|" } else { "" };
    AnyOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(min))
                .maximum(Some(max)),
        )
        .item(ObjectBuilder::new().schema_type(Type::String).pattern(Some(format!(
            "^[{WHITESPACE}]*(?:{zero}\\+?0*(?:{numbers}))[{WHITESPACE}]*$"
        ))))
        .description(Some(format!("A whole number from {min} to {max}; also as text")))
        .into()
}

/// A regex alternation that matches exactly the decimal numbers from `min` to `max` written
/// without leading zeros.
fn decimal_range(min: u64, max: u64) -> String {
    let mut parts = Vec::new();
    let mut low = min;
    while low <= max {
        let width = low.to_string().len();
        let widest = 10u64.pow(width as u32) - 1;
        let high = max.min(widest);
        let width_pad = |n: u64| format!("{n:0width$}");
        parts.push(same_width(&width_pad(low), &width_pad(high)));
        if high == max {
            break;
        }
        low = high + 1;
    }
    parts.join("|")
}

/// A regex for the numbers from `low` to `high`, both of the same number of digits.
fn same_width(low: &str, high: &str) -> String {
    let (Some(l), Some(h)) = (low.chars().next(), high.chars().next()) else {
        return String::new();
    };
    let (low_rest, high_rest) = (&low[1..], &high[1..]);
    let rest = low_rest.len();
    let any_rest = |n: usize| if n == 0 { String::new() } else { format!("[0-9]{{{n}}}") };
    if l == h {
        return format!("{l}{}", same_width(low_rest, high_rest));
    }
    let low_full = low_rest.chars().all(|c| c == '0');
    let high_full = high_rest.chars().all(|c| c == '9');
    let mut alternatives = Vec::new();
    let mut first = l;
    if !low_full {
        alternatives.push(format!("{l}(?:{})", same_width(low_rest, &"9".repeat(rest))));
        first = next_digit(l);
    }
    let last = if high_full { h } else { previous_digit(h) };
    if first <= last {
        let class = if first == last {
            first.to_string()
        } else {
            format!("[{first}-{last}]")
        };
        alternatives.push(format!("{class}{}", any_rest(rest)));
    }
    if !high_full {
        alternatives.push(format!("{h}(?:{})", same_width(&"0".repeat(rest), high_rest)));
    }
    format!("(?:{})", alternatives.join("|"))
}

fn next_digit(d: char) -> char {
    char::from(d as u8 + 1)
}

fn previous_digit(d: char) -> char {
    char::from(d as u8 - 1)
}

#[cfg(test)]
mod tests;
