//! A collection page made in memory, for records computed rather than stored (downsampled raw
//! points and session buckets read from chunks): the same filter, order, ties and pages as
//! [`super::list`] gives a select, read as the SQL collections read them (a comparison with
//! NULL is not true, text compares and sorts by its lower case).

use std::cmp::Ordering;

use devicecloud_query::{Filter, PageRequest, SortKey};
use serde_json::Value;

use super::Listing;

/// What a page in memory is cut from.
pub(crate) struct Request<'a, T> {
    pub filter: Option<&'a Filter>,
    /// The client's sort, else the default.
    pub sort: &'a SortKey,
    /// The attributes that break ties, in the sort's direction.
    pub ties: &'a [&'a str],
    pub page: PageRequest,
    pub count_only: bool,
    /// A record's attribute as the API shows it (`None` for NULL).
    pub field: &'a dyn Fn(&T, &str) -> Option<Value>,
}

/// The page of `rows` that `request` asks for.
pub(crate) fn list<T>(mut rows: Vec<T>, request: Request<'_, T>) -> Listing<T> {
    let field = request.field;
    if let Some(filter) = request.filter {
        rows.retain(|row| filter.matches_fields(&|attr| field(row, attr)));
    }
    let page = request.page.resolve(rows.len() as u64);
    if request.count_only {
        return Listing {
            page,
            items: Vec::new(),
        };
    }
    let attrs: Vec<&str> = std::iter::once(request.sort.attr)
        .chain(request.ties.iter().copied())
        .collect();
    rows.sort_by(|a, b| {
        let ordering = attrs
            .iter()
            .map(|attr| compare(field(a, attr), field(b, attr)))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal);
        if request.sort.descending {
            ordering.reverse()
        } else {
            ordering
        }
    });
    let offset = usize::try_from(page.offset).unwrap_or(usize::MAX);
    let per_page = usize::try_from(page.per_page).unwrap_or(usize::MAX);
    let items = rows.into_iter().skip(offset).take(per_page).collect();
    Listing { page, items }
}

/// SQL's order of two attribute values: NULL first (as SQLite and an ascending PostgreSQL
/// order with `NULLS FIRST`), numbers by value, text by its lower case.
fn compare(a: Option<Value>, b: Option<Value>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(Value::Number(x)), Some(Value::Number(y))) => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
        (Some(Value::String(x)), Some(Value::String(y))) => x.to_ascii_lowercase().cmp(&y.to_ascii_lowercase()),
        (Some(x), Some(y)) => x.to_string().cmp(&y.to_string()),
    }
}
