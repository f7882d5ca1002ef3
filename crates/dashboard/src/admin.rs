//! `GET /admin` (administrators): accounts with their group roles, and API clients; forms to
//! create an account, grant / change / remove a role, and register a client. Accounts and
//! roles go through the service layer the API's handlers call; a client's secret is shown once.
//! Each username leads to the account's own page (`accounts`): disable, reset the password.

use std::collections::HashMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use devicecloud_store::{accounts, clients, memberships};
use maud::{Markup, html};
use serde_json::{Map, json};

use crate::format;
use crate::layout::{self, Section};
use crate::page::{PageError, PageResult, visible_groups};
use crate::sign_in::Posted;
use crate::viewer::Viewer;
use devicecloud_engine::auth::secrets::register_client;
use devicecloud_web::http::error::FieldError;
use devicecloud_web::service::{ServiceError, accounts as account_service, memberships as membership_service};
use devicecloud_web::state::AppState;

const ROLES: [&str; 3] = ["viewer", "operator", "manager"];

/// What the last form produced: a notice, a secret to show once, or field errors.
#[derive(Default)]
struct Outcome {
    notice: Option<String>,
    secret: Option<String>,
    errors: Vec<FieldError>,
}

async fn render(state: &AppState, viewer: &Viewer, outcome: Outcome) -> Result<Markup, PageError> {
    viewer.caller.require_admin()?;
    let users = accounts::list(&state.db).await?;
    let members = memberships::all(&state.db).await?;
    let all_groups = visible_groups(state, &viewer.caller).await?;
    let group_label: HashMap<&str, &str> = all_groups
        .iter()
        .map(|g| (g.id_group.as_str(), g.label.as_str()))
        .collect();
    let api_clients = clients::list(&state.db).await?;
    Ok(html! {
        @if let Some(notice) = &outcome.notice { p.notice role="status" { (notice) } }
        @if let Some(secret) = &outcome.secret { p.secret { (secret) } }
        @for e in &outcome.errors { p.error role="alert" { (e.field) ": " (e.message) } }
        h2 { "Accounts" }
        table {
            thead { tr { th { "Username" } th { "Administrator" } th { "Roles" } th { "Created" } } }
            tbody {
                @for u in &users {
                    tr {
                        td {
                            a href=(format!("/admin/accounts/{}", u.id_user)) { (u.username) }
                            @if u.disabled == 1 { " " span.status.alarm { "disabled" } }
                            br; code.muted { (u.id_user) }
                        }
                        td { @if u.is_admin == 1 { "yes" } @else { "no" } }
                        td {
                            @for m in members.iter().filter(|m| m.id_user == u.id_user) {
                                form.inline method="post" action="/admin/members/remove" {
                                    (layout::csrf(viewer))
                                    input type="hidden" name="id_group" value=(m.id_group);
                                    input type="hidden" name="id_user" value=(m.id_user);
                                    span { (group_label.get(m.id_group.as_str()).copied().unwrap_or(&m.id_group)) ": " (m.role) }
                                    button.secondary type="submit" title="Remove this role" { "×" }
                                }
                            }
                        }
                        td { (format::utc(Some(u.created_at))) }
                    }
                }
            }
        }
        h2 { "Grant or change a role" }
        form.inline method="post" action="/admin/members" {
            (layout::csrf(viewer))
            select name="id_user" aria-label="Account" { @for u in &users { option value=(u.id_user) { (u.username) } } }
            select name="id_group" aria-label="Group" { @for g in &all_groups { option value=(g.id_group) { (g.label) } } }
            select name="role" aria-label="Role" { @for r in ROLES { option value=(r) { (r) } } }
            button type="submit" { "Save role" }
        }
        h2 { "New account" }
        form.inline method="post" action="/admin/users" {
            (layout::csrf(viewer))
            input name="username" placeholder="username (e-mail)" aria-label="Username" required;
            input name="password" type="password" placeholder="password (8 or more)" aria-label="Password" autocomplete="new-password" required;
            label { input type="checkbox" name="is_admin" value="1"; " administrator" }
            button type="submit" { "Create account" }
        }
        h2 { "API clients" }
        table {
            thead { tr { th { "Name" } th { "client_id" } th { "Registered" } } }
            tbody { @for c in &api_clients { tr { td { (c.name) } td { code { (c.client_id) } } td { (format::utc(Some(c.created_at))) } } } }
        }
        form.inline method="post" action="/admin/clients" {
            (layout::csrf(viewer))
            input name="name" placeholder="client name" aria-label="Client name" required;
            button type="submit" { "Register client" }
        }
    })
}

fn respond(viewer: &Viewer, status: StatusCode, content: Markup) -> Response {
    let page = layout::page(viewer, Section::Admin, "Administration", content);
    (status, Html(page.into_string())).into_response()
}

/// The page after a form: 200 with its notice, 422 with its field errors.
async fn after(state: &AppState, viewer: &Viewer, result: Result<Outcome, ServiceError>) -> PageResult<Response> {
    let (status, outcome) = match result {
        Ok(outcome) => (StatusCode::OK, outcome),
        Err(ServiceError::Invalid(errors)) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Outcome {
                errors,
                ..Outcome::default()
            },
        ),
        Err(e) => return Err(e.into()),
    };
    Ok(respond(viewer, status, render(state, viewer, outcome).await?))
}

/// `GET /admin`
pub async fn page(State(state): State<AppState>, viewer: Viewer) -> PageResult<Response> {
    let content = render(&state, &viewer, Outcome::default()).await?;
    Ok(respond(&viewer, StatusCode::OK, content))
}

/// `POST /admin/users`
pub async fn create_user(State(state): State<AppState>, posted: Posted) -> PageResult<Response> {
    let mut input = Map::new();
    input.insert("username".into(), json!(posted.field("username")));
    input.insert("password".into(), json!(posted.raw_field("password")));
    input.insert("is_admin".into(), json!(posted.field("is_admin") == "1"));
    let result = account_service::create(&state, &posted.viewer.caller, &input)
        .await
        .map(|row| Outcome {
            notice: Some(format!("Account {} created.", row.username)),
            ..Outcome::default()
        });
    after(&state, &posted.viewer, result).await
}

/// `POST /admin/members`
pub async fn put_member(State(state): State<AppState>, posted: Posted) -> PageResult<Response> {
    // The API lets managers change their group's members; this page is for administrators.
    posted.viewer.caller.require_admin()?;
    let mut input = Map::new();
    input.insert("role".into(), json!(posted.field("role")));
    let (id_group, id_user) = (posted.field("id_group"), posted.field("id_user"));
    let result = membership_service::put(&state, &posted.viewer.caller, id_group, id_user, &input)
        .await
        .map(|_| Outcome {
            notice: Some("Role saved.".into()),
            ..Outcome::default()
        });
    after(&state, &posted.viewer, result).await
}

/// `POST /admin/members/remove`
pub async fn remove_member(State(state): State<AppState>, posted: Posted) -> PageResult<Response> {
    posted.viewer.caller.require_admin()?;
    let (id_group, id_user) = (posted.field("id_group"), posted.field("id_user"));
    let result = membership_service::remove(&state, &posted.viewer.caller, id_group, id_user)
        .await
        .map(|()| Outcome {
            notice: Some("Role removed.".into()),
            ..Outcome::default()
        });
    after(&state, &posted.viewer, result).await
}

/// `POST /admin/clients`: the secret is shown this once.
pub async fn create_client(State(state): State<AppState>, posted: Posted) -> PageResult<Response> {
    let result = async {
        if !posted.viewer.caller.is_admin {
            return Err(ServiceError::NotAllowed);
        }
        let name = posted.field("name");
        if name.is_empty() || name.chars().count() > 255 {
            return Err(ServiceError::invalid("name", "Name must be 1 to 255 characters."));
        }
        let (client, secret) = register_client(&state.db, name).await?;
        Ok(Outcome {
            notice: Some(format!(
                "Client {} registered as {}. Its client_secret, shown this once:",
                client.name, client.client_id
            )),
            secret: Some(secret),
            ..Outcome::default()
        })
    }
    .await;
    after(&state, &posted.viewer, result).await
}
