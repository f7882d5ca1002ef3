//! `GET|POST /account/password`: every signed-in account changes its own password, with its
//! current one, through the operation behind `PATCH /api/v2/user/me` (same rules, same count of
//! wrong current passwords as failed sign-ins). A new password ends every token and session of
//! the account, the one of this browser too (docs/api.md, "Accounts"), so a change ends here on
//! the sign-in form with a notice instead of in a session the store no longer holds.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use maud::{Markup, html};
use serde_json::{Map, json};

use crate::layout::{self, Section};
use crate::page::{PageResult, field_errors};
use crate::sign_in::{Posted, SignInNotice, to_sign_in};
use crate::viewer::Viewer;
use devicecloud_web::http::error::FieldError;
use devicecloud_web::origin::Origin;
use devicecloud_web::service::{ServiceError, accounts as service};
use devicecloud_web::state::AppState;

const TITLE: &str = "Change my password";

/// The form, with the field errors of the last submission.
fn form(viewer: &Viewer, errors: &[FieldError]) -> Markup {
    html! {
        p.muted { "A new password signs your account out everywhere: this browser, every other one and every API token. Sign in again with the new password." }
        form.stack method="post" action="/account/password" {
            (layout::csrf(viewer))
            label { "Current password"
                input name="current_password" type="password" autocomplete="current-password" required;
                (field_errors(errors, "current_password")) }
            label { "New password (8 characters or more)"
                input name="password" type="password" autocomplete="new-password" minlength="8" required;
                (field_errors(errors, "password")) }
            label { "New password again"
                input name="password_repeat" type="password" autocomplete="new-password" minlength="8" required;
                (field_errors(errors, "password_repeat")) }
            button type="submit" { "Change password" }
        }
    }
}

fn respond(viewer: &Viewer, status: StatusCode, errors: &[FieldError]) -> Response {
    let page = layout::page(viewer, Section::Password, TITLE, form(viewer, errors));
    (status, Html(page.into_string())).into_response()
}

/// `GET /account/password`
pub async fn page(viewer: Viewer) -> Response {
    respond(&viewer, StatusCode::OK, &[])
}

/// `POST /account/password`: a mistyped repetition is refused here, before the current password
/// is checked (and counted when wrong); the rest is the service's.
pub async fn change(State(state): State<AppState>, origin: Origin, posted: Posted) -> PageResult<Response> {
    let viewer = &posted.viewer;
    let result = if posted.raw_field("password") == posted.raw_field("password_repeat") {
        let mut input = Map::new();
        input.insert("current_password".into(), json!(posted.raw_field("current_password")));
        input.insert("password".into(), json!(posted.raw_field("password")));
        service::change_own_password(&state, &viewer.caller, &input, origin.client).await
    } else {
        Err(ServiceError::invalid(
            "password_repeat",
            "The new passwords do not match.",
        ))
    };
    match result {
        Ok(_) => Ok(to_sign_in(&origin, Some(SignInNotice::PasswordChanged))),
        Err(ServiceError::Invalid(errors)) => Ok(respond(viewer, StatusCode::UNPROCESSABLE_ENTITY, &errors)),
        Err(e) => Err(e.into()),
    }
}
