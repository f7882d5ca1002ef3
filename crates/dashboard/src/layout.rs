//! The page shell: head, navigation, the signed-in account and its sign-out form. Styles and
//! the small script are files of this crate embedded in the binary (no CDN, no build step).

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::IntoResponse;
use maud::{DOCTYPE, Markup, html};

use crate::viewer::{CSRF_FIELD, Viewer};

const CSS: &str = include_str!("../assets/dashboard.css");
const JS: &str = include_str!("../assets/dashboard.js");

/// The sections of the navigation bar.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Fleet,
    Sessions,
    Events,
    Webhooks,
    Alarms,
    Jobs,
    Firmware,
    Admin,
    Accounts,
    Password,
}

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · devicecloud" }
            // No icon of its own: an empty one spares every page a 404 for /favicon.ico.
            link rel="icon" href="data:,";
            link rel="stylesheet" href="/assets/dashboard.css";
            script src="/assets/dashboard.js" defer {}
        }
    }
}

/// A page for a signed-in viewer.
pub fn page(viewer: &Viewer, section: Section, title: &str, content: Markup) -> Markup {
    let link = |target: Section, href: &str, label: &str| {
        html! { a href=(href) class=[(section == target).then_some("active")] { (label) } }
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body {
                header.top {
                    a.brand href="/" { "devicecloud" }
                    nav {
                        (link(Section::Fleet, "/", "Fleet"))
                        (link(Section::Sessions, "/sessions", "Sessions"))
                        (link(Section::Events, "/events", "Events"))
                        (link(Section::Alarms, "/alarms", "Alarms"))
                        (link(Section::Webhooks, "/webhooks", "Webhooks"))
                        (link(Section::Jobs, "/jobs", "Jobs"))
                        (link(Section::Firmware, "/firmware", "Firmware"))
                        @if viewer.caller.is_admin {
                            (link(Section::Admin, "/admin", "Administration"))
                            (link(Section::Accounts, "/admin/accounts", "Accounts"))
                        }
                        (link(Section::Password, "/account/password", "Password"))
                        // The API reference (Swagger UI over the OpenAPI document), not a
                        // dashboard section.
                        a href="/api/docs" { "API" }
                    }
                    form.signout method="post" action="/logout" {
                        span.muted { (viewer.username) }
                        (csrf(viewer))
                        button type="submit" { "Sign out" }
                    }
                }
                main { h1 { (title) } (content) }
            }
        }
    }
}

/// A page without navigation (sign-in, errors).
pub fn bare(title: &str, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body { (content) }
        }
    }
}

/// The hidden CSRF field every form of a signed-in page carries.
pub fn csrf(viewer: &Viewer) -> Markup {
    html! { input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf); }
}

/// `GET /assets/dashboard.css`
pub async fn css() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/css; charset=utf-8"),
            (CACHE_CONTROL, "public, max-age=3600"),
        ],
        CSS,
    )
}

/// `GET /assets/dashboard.js`
pub async fn js() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (CACHE_CONTROL, "public, max-age=3600"),
        ],
        JS,
    )
}
