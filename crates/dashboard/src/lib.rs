//! The web dashboard (`/`): server-rendered pages for the fleet, its data, its commands, its
//! webhooks and its accounts, signed in with the API's accounts and answering to the same
//! rights. Pages read through the store functions and change things through the service layer
//! the API's handlers call, so a page can show or do nothing the API would refuse the same
//! account.

mod accounts;
mod admin;
mod alarms;
mod chart;
mod data_sessions;
mod device;
mod device_commands;
mod error;
mod events;
mod firmware;
mod format;
mod group;
mod jobs;
mod layout;
mod live;
mod overview;
mod page;
mod password;
mod retention;
mod series;
mod sign_in;
mod twin;
mod viewer;
mod webhooks;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

use devicecloud_web::state::AppState;

/// The pages that take a firmware image: the service reads their bodies as they come, not
/// whole first (`devicecloud_web::http::firmware_upload`).
pub const UPLOAD_ROUTES: [&str; 1] = [FIRMWARE];
const FIRMWARE: &str = "/firmware";

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
        .route("/groups/{id}/export", get(group::export))
        .route("/groups/{id}/retention", get(retention::page).post(retention::update))
        .route("/devices/{id}", get(device::page))
        .route("/devices/{id}/latest", get(device::latest))
        .route("/devices/{id}/live", get(live::device))
        .route("/devices/{id}/command", post(device_commands::run))
        .route("/devices/{id}/twin", post(twin::update))
        .route("/sessions", get(data_sessions::list))
        .route("/sessions/{id}", get(data_sessions::page))
        .route("/sessions/{id}/csv", get(data_sessions::csv))
        .route("/events", get(events::page))
        .route("/webhooks", get(webhooks::list).post(webhooks::create))
        .route("/webhooks/new", get(webhooks::new_form))
        .route("/webhooks/{id}", get(webhooks::page).post(webhooks::update))
        .route("/webhooks/{id}/toggle", post(webhooks::toggle))
        .route("/webhooks/{id}/delete", post(webhooks::delete))
        .route("/alarms", get(alarms::list))
        .route("/alarms/{id}/acknowledge", post(alarms::acknowledge))
        .route("/alarm-rules", get(alarms::rules).post(alarms::create))
        .route("/alarm-rules/new", get(alarms::new_form))
        .route("/alarm-rules/check", get(alarms::check))
        .route("/alarm-rules/{id}", get(alarms::rule_page).post(alarms::update))
        .route("/alarm-rules/{id}/toggle", post(alarms::toggle))
        .route("/alarm-rules/{id}/delete", post(alarms::delete))
        .route("/jobs", get(jobs::list).post(jobs::create))
        .route("/jobs/{id}", get(jobs::page))
        .route("/jobs/{id}/cancel", post(jobs::cancel))
        // The upload form's body is as large as an image: each of its parts is bounded as it is
        // read (`devicecloud_web::http::firmware_upload`).
        .route(
            FIRMWARE,
            get(firmware::list)
                .post(firmware::upload)
                .layer(DefaultBodyLimit::disable()),
        )
        .route("/firmware/{id}/delete", post(firmware::delete))
        .route("/admin", get(admin::page))
        .route("/admin/users", post(admin::create_user))
        .route("/admin/members", post(admin::put_member))
        .route("/admin/members/remove", post(admin::remove_member))
        .route("/admin/clients", post(admin::create_client))
        .route("/admin/accounts", get(accounts::list))
        .route("/admin/accounts/{id}", get(accounts::page).post(accounts::update))
        .route("/account/password", get(password::page).post(password::change));
    devicecloud_web::browser::pages(routes, CSP)
}
