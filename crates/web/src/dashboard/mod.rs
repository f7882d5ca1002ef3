//! The web dashboard (`/`): server-rendered pages for the fleet, its data, its commands, its
//! webhooks and its accounts, signed in with the API's accounts and answering to the same
//! rights. Pages read through the store functions and change things through the service layer
//! the API's handlers call, so a page can show or do nothing the API would refuse the same
//! account.

mod accounts;
mod admin;
mod chart;
mod data_sessions;
mod device;
mod device_commands;
mod error;
mod events;
mod format;
mod group;
mod layout;
mod live;
mod overview;
mod password;
mod retention;
mod series;
mod sign_in;
mod viewer;
mod webhooks;

use axum::Router;
use axum::response::Html;
use axum::routing::{get, post};
use devicecloud_query::{Attribute, Filter, Page, PageRequest, SortKey, parse_filter};
use devicecloud_store::ListArgs;
use devicecloud_store::groups::{self, GroupRow};
use maud::{Markup, html};
use serde_json::Value;

use crate::caller::Caller;
use crate::http::error::{ApiError, FieldError};
use crate::state::AppState;

pub use error::PageError;

/// What a dashboard handler answers: its page (or, given, another answer such as a redirect), or
/// the error page that takes its place.
pub type PageResult<T = Html<String>> = Result<T, PageError>;

/// Scripts and styles come from this server only; no frame may embed a page.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'";

pub fn router() -> Router<AppState> {
    let routes = Router::new()
        .route("/", get(overview::page))
        .route("/login", get(sign_in::login_form).post(sign_in::login))
        .route("/logout", post(sign_in::logout))
        .route("/assets/dashboard.css", get(layout::css))
        .route("/assets/dashboard.js", get(layout::js))
        .route("/groups/{id}", get(group::page))
        .route("/groups/{id}/live", get(live::group))
        .route("/groups/{id}/retention", get(retention::page).post(retention::update))
        .route("/devices/{id}", get(device::page))
        .route("/devices/{id}/latest", get(device::latest))
        .route("/devices/{id}/live", get(live::device))
        .route("/devices/{id}/command", post(device_commands::run))
        .route("/sessions", get(data_sessions::list))
        .route("/sessions/{id}", get(data_sessions::page))
        .route("/sessions/{id}/csv", get(data_sessions::csv))
        .route("/events", get(events::page))
        .route("/webhooks", get(webhooks::list).post(webhooks::create))
        .route("/webhooks/new", get(webhooks::new_form))
        .route("/webhooks/{id}", get(webhooks::page).post(webhooks::update))
        .route("/webhooks/{id}/toggle", post(webhooks::toggle))
        .route("/webhooks/{id}/delete", post(webhooks::delete))
        .route("/admin", get(admin::page))
        .route("/admin/users", post(admin::create_user))
        .route("/admin/members", post(admin::put_member))
        .route("/admin/members/remove", post(admin::remove_member))
        .route("/admin/clients", post(admin::create_client))
        .route("/admin/accounts", get(accounts::list))
        .route("/admin/accounts/{id}", get(accounts::page).post(accounts::update))
        .route("/account/password", get(password::page).post(password::change));
    crate::browser::pages(routes, CSP)
}

/// A `page` parameter read as PHP reads it (`abc` is 0, then clamped to the first page), so a
/// bad value shows a page rather than an error.
fn lenient_page<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    let raw: Option<String> = serde::Deserialize::deserialize(deserializer)?;
    Ok(raw.map(|text| devicecloud_query::php_intval(&text)))
}

/// The `page` parameter of a paginated page.
#[derive(serde::Deserialize)]
pub struct PageQuery {
    #[serde(default, deserialize_with = "lenient_page")]
    page: Option<i64>,
}

/// The store's arguments for a list the caller may see: their groups, a filter, a sort, and
/// a page of `per_page` records (`page` as the URL gave it).
fn list_args<'a>(
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
async fn visible_groups(state: &AppState, caller: &Caller) -> Result<Vec<GroupRow>, PageError> {
    Ok(groups::list(&state.db, list_args(caller, None, None, Some(1), 1000))
        .await?
        .items)
}

/// A page of `per_page` records, the `page` number as the URL gave it.
fn page_request(page: Option<i64>, per_page: u64) -> PageRequest {
    PageRequest {
        page: page.unwrap_or(1),
        per_page,
        default_per_page: per_page,
    }
}

/// A filter in the API's JSON grammar, checked against a collection's attributes (the
/// dashboard builds its filters itself; the default list limit holds them).
fn filter(value: &Value, attributes: &[Attribute]) -> Result<Option<Filter>, ApiError> {
    Ok(parse_filter(
        value,
        attributes,
        devicecloud_query::DEFAULT_MAX_LIST_VALUES,
    )?)
}

/// Previous / next links of a paginated table; `base` already carries the other parameters.
fn pager(page: &Page, base: &str) -> Markup {
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
fn field_errors(errors: &[FieldError], field: &str) -> Markup {
    html! { @for e in errors.iter().filter(|e| e.field == field) { span.error { (e.message) } } }
}

/// The viewer's role in a group as a word.
fn role_name(caller: &Caller, id_group: &str) -> &'static str {
    if caller.is_admin {
        "administrator"
    } else {
        caller.role_in_group(id_group).map_or("—", |r| r.as_str())
    }
}

/// A device's status at a glance: connected, expected on but off, or off. `is_connected` is
/// the gateway's for a device behind one (it has no connection of its own).
fn status_badge(is_connected: i64, device_status: i64) -> Markup {
    html! {
        @if device_status == 2 { span.status.alarm title="Expected on, but no data or connection for too long" { "expected on · off" } }
        @else if is_connected == 1 { span.status.on { "online" } }
        @else { span.status.off { "offline" } }
    }
}
