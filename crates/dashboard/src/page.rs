//! What every page shares: its result type, the query of a paged list and its store arguments,
//! the caller's groups, the pager, field errors and badges.

use axum::response::Html;
use devicecloud_query::{Attribute, Filter, Page, PageRequest, SortKey, parse_filter};
use devicecloud_store::ListArgs;
use devicecloud_store::groups::{self, GroupRow};
use maud::{Markup, html};
use serde_json::Value;

use devicecloud_web::caller::Caller;
use devicecloud_web::http::error::{ApiError, FieldError};
use devicecloud_web::state::AppState;

pub use crate::error::PageError;

/// What a dashboard handler answers: its page (or, given, another answer such as a redirect), or
/// the error page that takes its place.
pub type PageResult<T = Html<String>> = Result<T, PageError>;

/// A `page` parameter read as PHP reads it (`abc` is 0, then clamped to the first page), so a
/// bad value shows a page rather than an error.
pub(crate) fn lenient_page<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    let raw: Option<String> = serde::Deserialize::deserialize(deserializer)?;
    Ok(raw.map(|text| devicecloud_query::php_intval(&text)))
}

/// The `page` parameter of a paginated page.
#[derive(serde::Deserialize)]
pub struct PageQuery {
    #[serde(default, deserialize_with = "lenient_page")]
    pub(crate) page: Option<i64>,
}

/// The store's arguments for a list the caller may see: their groups, a filter, a sort, and
/// a page of `per_page` records (`page` as the URL gave it).
pub(crate) fn list_args<'a>(
    caller: &'a Caller,
    filter: Option<&'a Filter>,
    sort: Option<&'a SortKey>,
    page: Option<i64>,
    per_page: u64,
) -> ListArgs<'a> {
    ListArgs {
        scope: caller.group_scope(),
        filter,
        sort,
        page: page_request(page, per_page),
        count_only: false,
    }
}

/// Every group the caller may see (up to 1000), for the group pickers of forms.
pub(crate) async fn visible_groups(state: &AppState, caller: &Caller) -> Result<Vec<GroupRow>, PageError> {
    Ok(groups::list(&state.db, list_args(caller, None, None, Some(1), 1000))
        .await?
        .items)
}

/// The groups where the viewer is a manager (may create webhooks, jobs), as (id, label).
pub(crate) async fn manageable_groups(
    state: &AppState,
    viewer: &crate::viewer::Viewer,
) -> Result<Vec<(String, String)>, PageError> {
    use devicecloud_engine::auth::Role;
    Ok(visible_groups(state, &viewer.caller)
        .await?
        .into_iter()
        .filter(|g| g.deleted_at.is_none() && viewer.caller.role_in_group(&g.id_group) >= Some(Role::Manager))
        .map(|g| (g.id_group, g.label))
        .collect())
}

/// A form's values, and the field errors of the last submission.
#[derive(Default)]
pub(crate) struct Draft {
    pub values: serde_json::Map<String, Value>,
    pub errors: Vec<FieldError>,
}

impl Draft {
    pub fn text(&self, key: &str) -> String {
        match self.values.get(key) {
            Some(Value::String(s)) => s.clone(),
            _ => String::new(),
        }
    }

    pub fn errors_of(&self, key: &str) -> Markup {
        field_errors(&self.errors, key)
    }
}

/// Where to go after a change (303, so the browser reloads with GET).
pub(crate) fn see_other(to: &str) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        axum::http::StatusCode::SEE_OTHER,
        [(axum::http::header::LOCATION, to.to_string())],
    )
        .into_response()
}

/// A page of `per_page` records, the `page` number as the URL gave it.
pub(crate) fn page_request(page: Option<i64>, per_page: u64) -> PageRequest {
    PageRequest {
        page: page.unwrap_or(1),
        per_page,
        default_per_page: per_page,
    }
}

/// A filter in the API's JSON grammar, checked against a collection's attributes (the
/// dashboard builds its filters itself; the default list limit holds them).
pub(crate) fn filter(value: &Value, attributes: &[Attribute]) -> Result<Option<Filter>, ApiError> {
    Ok(parse_filter(
        value,
        attributes,
        devicecloud_query::DEFAULT_MAX_LIST_VALUES,
    )?)
}

/// Previous / next links of a paginated table; `base` already carries the other parameters.
pub(crate) fn pager(page: &Page, base: &str) -> Markup {
    let join = if base.contains('?') { '&' } else { '?' };
    html! {
        @if page.page_count > 1 {
            nav.pager {
                @if page.current_page > 1 {
                    a href=(format!("{base}{join}page={}", page.current_page - 1)) rel="prev" { "← Previous" }
                }
                span.muted { "Page " (page.current_page) " of " (page.page_count) " · " (page.total) " in all" }
                @if page.current_page < page.page_count {
                    a href=(format!("{base}{join}page={}", page.current_page + 1)) rel="next" { "Next →" }
                }
            }
        }
    }
}

/// The messages of one field of a refused form, shown beside that field.
pub(crate) fn field_errors(errors: &[FieldError], field: &str) -> Markup {
    html! { @for e in errors.iter().filter(|e| e.field == field) { span.error { (e.message) } } }
}

/// The viewer's role in a group as a word.
pub(crate) fn role_name(caller: &Caller, id_group: &str) -> &'static str {
    if caller.is_admin {
        "administrator"
    } else {
        caller.role_in_group(id_group).map_or("—", |r| r.as_str())
    }
}

/// A device's status at a glance: connected, expected on but off, or off. `is_connected` is
/// the gateway's for a device behind one (it has no connection of its own).
pub(crate) fn status_badge(is_connected: i64, device_status: i64) -> Markup {
    html! {
        @if device_status == 2 { span.status.alarm title="Expected on, but no data or connection for too long" { "expected on · off" } }
        @else if is_connected == 1 { span.status.on { "online" } }
        @else { span.status.off { "offline" } }
    }
}
