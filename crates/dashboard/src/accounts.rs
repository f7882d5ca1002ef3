//! Accounts, for administrators: `GET /admin/accounts` lists them (50 a page, by username) with
//! their administrator flag and state; `GET /admin/accounts/<id>` shows one with its actions:
//! disable / enable, grant / remove administrator rights, reset the password. `POST
//! /admin/accounts/<id>` hands the change to the operation behind `PATCH /api/v2/user/<id>`, so
//! the API's rules hold: disabling or a new password ends the account's sessions and tokens at
//! once, and no administrator can disable or demote themselves.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use devicecloud_query::SortKey;
use devicecloud_store::ListArgs;
use devicecloud_store::accounts::{self as store, UserRow};
use maud::{Markup, html};
use serde_json::{Map, Value, json};

use crate::format;
use crate::layout::{self, Section};
use crate::page::{PageError, PageQuery, PageResult, field_errors, page_request, pager};
use crate::sign_in::{Posted, SignInNotice, to_sign_in};
use crate::viewer::Viewer;
use devicecloud_web::http::error::{ApiError, FieldError};
use devicecloud_web::origin::Origin;
use devicecloud_web::service::{ServiceError, accounts as service};
use devicecloud_web::state::AppState;

/// The fields an administrator may change, as the API names them.
const CHANGES: [&str; 3] = ["disabled", "is_admin", "password"];

fn state_badge(user: &UserRow) -> Markup {
    html! { @if user.disabled == 1 { span.status.alarm { "disabled" } } @else { span.status.on { "active" } } }
}

fn yes_no(flag: i64) -> &'static str {
    if flag == 1 { "yes" } else { "no" }
}

/// `GET /admin/accounts`
pub async fn list(State(state): State<AppState>, viewer: Viewer, Query(q): Query<PageQuery>) -> PageResult {
    viewer.caller.require_admin()?;
    let by_name = SortKey::asc("username");
    let args = ListArgs::unscoped(None, Some(&by_name), page_request(q.page, 50), false);
    let listing = store::page(&state.db, &args).await?;
    let content = html! {
        p.muted { "Roles in groups, new accounts and API clients are on the " a href="/admin" { "administration page" } "." }
        table {
            thead { tr { th { "Username" } th { "Administrator" } th { "State" } th { "Created" } } }
            tbody {
                @for u in &listing.items {
                    tr {
                        td { a href=(format!("/admin/accounts/{}", u.id_user)) { (u.username) } }
                        td { (yes_no(u.is_admin)) }
                        td { (state_badge(u)) }
                        td { (format::utc(Some(u.created_at))) }
                    }
                }
            }
        }
        (pager(&listing.page, "/admin/accounts"))
    };
    Ok(Html(
        layout::page(&viewer, Section::Accounts, "Accounts", content).into_string(),
    ))
}

/// One button that posts one change of the account.
fn change_button(viewer: &Viewer, action: &str, field: &str, value: bool, label: &str) -> Markup {
    html! {
        form.inline method="post" action=(action) {
            (layout::csrf(viewer))
            input type="hidden" name=(field) value=(if value { "1" } else { "0" });
            button.secondary type="submit" { (label) }
        }
    }
}

/// The account page: its record, a notice or the field errors of the last change, its actions.
/// The viewer's own account offers no disable or demote button, which the service would refuse.
async fn render(
    state: &AppState,
    viewer: &Viewer,
    id: &str,
    notice: Option<&str>,
    errors: &[FieldError],
) -> Result<Markup, PageError> {
    viewer.caller.require_admin()?;
    let user = store::get(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("User", id))?;
    let own = user.id_user == viewer.caller.id_user;
    let (disabled, is_admin) = (user.disabled == 1, user.is_admin == 1);
    let action = format!("/admin/accounts/{id}");
    Ok(html! {
        @if let Some(notice) = notice { p.notice role="status" { (notice) } }
        dl.fields {
            dt { "username" } dd { (user.username) }
            dt { "id_user" } dd { code { (user.id_user) } }
            dt { "administrator" } dd { (yes_no(user.is_admin)) }
            dt { "state" } dd { (state_badge(&user)) }
            dt { "created" } dd { (format::utc(Some(user.created_at))) }
        }
        h2 { "Change" }
        @if own {
            p.muted { "This is your account: you cannot disable it or take your own administrator rights." }
        } @else {
            div.commands {
                (change_button(viewer, &action, "disabled", !disabled, if disabled { "Enable" } else { "Disable" }))
                (change_button(viewer, &action, "is_admin", !is_admin,
                    if is_admin { "Remove administrator rights" } else { "Make administrator" }))
            }
            p.muted { "Disabling ends the account's sessions and API tokens at once; it cannot sign in until enabled again." }
        }
        (field_errors(errors, "disabled"))
        (field_errors(errors, "is_admin"))
        h2 { "Reset the password" }
        form.stack method="post" action=(action) {
            (layout::csrf(viewer))
            label { "New password (8 characters or more)"
                input name="password" type="password" autocomplete="new-password" minlength="8" required;
                (field_errors(errors, "password")) }
            button type="submit" { "Reset password" }
        }
        p.muted { "A new password ends the account's sessions and API tokens at once." }
    })
}

fn respond(viewer: &Viewer, status: StatusCode, content: Markup) -> Response {
    let page = layout::page(viewer, Section::Accounts, "Account", content);
    (status, Html(page.into_string())).into_response()
}

/// `GET /admin/accounts/<id>`
pub async fn page(State(state): State<AppState>, viewer: Viewer, Path(id): Path<String>) -> PageResult<Response> {
    let content = render(&state, &viewer, &id, None, &[]).await?;
    Ok(respond(&viewer, StatusCode::OK, content))
}

/// What a successful change did, in words.
fn notice_of(input: &Map<String, Value>) -> String {
    let said = |field: &str, yes: &'static str, no: &'static str| match input.get(field) {
        Some(value) if value == "1" => Some(yes),
        Some(_) => Some(no),
        None => None,
    };
    [
        said(
            "disabled",
            "Account disabled: its sessions and API tokens have ended.",
            "Account enabled: it can sign in again.",
        ),
        said(
            "is_admin",
            "Administrator rights granted.",
            "Administrator rights removed.",
        ),
        input
            .contains_key("password")
            .then_some("Password reset: the account's sessions and API tokens have ended."),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(" ")
}

/// `POST /admin/accounts/<id>`: any of `disabled`, `is_admin` (`1` / `0`) and `password`; the
/// page again with a notice, or with the service's field errors (422). An administrator who
/// resets their own password has ended their own session too: to the sign-in form.
pub async fn update(
    State(state): State<AppState>,
    origin: Origin,
    Path(id): Path<String>,
    posted: Posted,
) -> PageResult<Response> {
    let viewer = &posted.viewer;
    viewer.caller.require_admin()?;
    let input: Map<String, Value> = CHANGES
        .into_iter()
        .filter_map(|field| posted.fields.get(field).map(|value| (field.to_string(), json!(value))))
        .collect();
    match service::update(&state, &viewer.caller, &id, &input).await {
        Ok(_) if id == viewer.caller.id_user && input.contains_key("password") => {
            Ok(to_sign_in(&origin, Some(SignInNotice::PasswordChanged)))
        }
        Ok(_) => {
            let notice = notice_of(&input);
            let notice = (!notice.is_empty()).then_some(notice.as_str());
            let content = render(&state, viewer, &id, notice, &[]).await?;
            Ok(respond(viewer, StatusCode::OK, content))
        }
        Err(ServiceError::Invalid(errors)) => {
            let content = render(&state, viewer, &id, None, &errors).await?;
            Ok(respond(viewer, StatusCode::UNPROCESSABLE_ENTITY, content))
        }
        Err(e) => Err(e.into()),
    }
}
