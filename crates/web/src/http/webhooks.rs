//! Webhooks (docs/api.md, "Webhooks"): `POST|GET /api/v2/webhook`, `GET|PATCH|DELETE
//! /api/v2/webhook/<id>`, the attempt log `GET /api/v2/webhook/<id>/attempt` and `GET
//! /api/v2/webhook-formatter`. Viewers of the group read them; managers create, change and delete
//! them (docs/api.md, "Rights").

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use devicecloud_query::CollectionSpec;
use devicecloud_store::webhooks::{self, AttemptRow, WebhookRow};
use devicecloud_store::{ListArgs, Listing};
use serde_json::{Map, Value, json};

use super::collection::{CollectionGet, CollectionPage, Listed, RawCollection, Rendered, Selection, each, spec};
use super::record::{Input, NewRecord, OneRecord};
use crate::caller::Caller;
use crate::http::error::ApiError;
use crate::render::{record_fields, webhook_fields};
use crate::service::access;
use crate::service::webhooks as service;
use crate::state::AppState;
use devicecloud_engine::auth::Role;
use devicecloud_engine::webhooks::format::FORMATTERS;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/webhook", get(index).post(create))
        .route("/api/v2/webhook/{id}", get(view).patch(update).delete(remove))
        .route("/api/v2/webhook/{id}/attempt", get(attempts))
        .route("/api/v2/webhook-formatter", get(formatters))
}

/// The expand options of a webhook, listed by its collection (specification: `expand` present
/// on collection GET).
const EXPANDS: [&str; 1] = ["backlog"];

/// A webhook record, with `backlog` when expanded: records queued, batches pending (being
/// retried) and batches given up after the retry window, so that a failing receiver shows.
async fn render(state: &AppState, row: &WebhookRow, selection: &Selection) -> Result<Value, ApiError> {
    let links = json!({
        "self": {"href": format!("/api/v2/webhook/{}", row.id_webhook)},
        "attempts": {"href": format!("/api/v2/webhook/{}/attempt", row.id_webhook)},
    });
    let mut expanded = Vec::new();
    if selection.expands("backlog") {
        let (queued, pending, failed) = webhooks::backlog(&state.db, &row.id_webhook).await?;
        expanded.push((
            "backlog".to_string(),
            json!({"queued_items": queued, "pending_deliveries": pending, "failed_deliveries": failed}),
        ));
    }
    Ok(selection.render(webhook_fields(row, &state.webhooks.vault), expanded, Some(links)))
}

/// The webhooks of the caller's groups.
struct Webhooks;

impl Listed for Webhooks {
    type Row = WebhookRow;
    const SPEC: CollectionSpec = spec(&webhooks::ATTRIBUTES, &webhooks::SORTABLE);
    const EXPANDS: &'static [&'static str] = &EXPANDS;

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<WebhookRow>, ApiError> {
        Ok(webhooks::list(&state.db, args).await?)
    }

    async fn render(&self, state: &AppState, rows: &[WebhookRow], selection: &Selection) -> Rendered {
        each(rows, |row| render(state, row, selection)).await
    }
}

/// The delivery attempts of one webhook, the caller's to see.
struct Attempts {
    id_webhook: String,
}

impl Listed for Attempts {
    type Row = AttemptRow;
    const SPEC: CollectionSpec = spec(&webhooks::ATTEMPT_ATTRIBUTES, &webhooks::ATTEMPT_SORTABLE);

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<AttemptRow>, ApiError> {
        Ok(webhooks::attempts(&state.db, &self.id_webhook, args).await?)
    }

    async fn render(&self, _: &AppState, rows: &[AttemptRow], selection: &Selection) -> Rendered {
        Ok(selection.plain(rows, record_fields))
    }
}

/// List webhooks
///
/// The webhooks of the caller's groups; secrets never shown, `authorization` masked. Any account.
#[utoipa::path(get, path = "/api/v2/webhook", tag = "webhooks",
    params(("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query), ("sort" = Option<String>, Query), ("fields" = Option<String>, Query)),
    responses((status = 200, description = "Collection envelope of Webhook records", body = super::schemas::records::WebhookCollection), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn index(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    get.serve(&Webhooks).await
}

/// Get a webhook
///
/// Viewer of its group; `expand=backlog` adds what waits to be delivered.
#[utoipa::path(get, path = "/api/v2/webhook/{id}", tag = "webhooks", params(("id" = String, Path)),
    responses((status = 200, description = "A Webhook record", body = super::schemas::records::Webhook), (status = 404, description = "Not found or not visible")), security(("bearer" = [])))]
pub async fn view(one: OneRecord) -> Result<axum::Json<Value>, ApiError> {
    let row = access::webhook(&one.state, &one.caller, &one.id, Role::Viewer).await?;
    Ok(axum::Json(render(&one.state, &row, &one.selection).await?))
}

/// Create a webhook
///
/// Manager of the group; 201 with the secret shown this once; 422 on invalid fields, on a receiver
/// that is not a public address, or past `webhooks_per_group`.
#[utoipa::path(post, path = "/api/v2/webhook", tag = "webhooks",
    request_body(content = super::schemas::bodies::NewWebhook),
    responses((status = 201, description = "The Webhook with its secret (shown this once) and a Location header", body = super::schemas::records::Webhook), (status = 401, description = "Role below manager"), (status = 422, description = "Invalid fields, a URL that does not resolve to public addresses only, a group the caller cannot see, or a group with webhooks_per_group webhooks already")),
    security(("bearer" = [])))]
pub async fn create(new: NewRecord) -> Result<Response, ApiError> {
    let made = service::create(&new.state, &new.caller, &new.input).await?;
    let mut record = render(&new.state, &made.row, &Selection::default()).await?;
    if let Value::Object(map) = &mut record {
        map.insert("secret".into(), json!(made.secret));
    }
    Ok(new.created(&format!("/api/v2/webhook/{}", made.row.id_webhook), record))
}

/// Change a webhook
///
/// Manager of its group; re-activating a webhook starts from new data.
#[utoipa::path(patch, path = "/api/v2/webhook/{id}", tag = "webhooks", params(("id" = String, Path)),
    request_body(content = super::schemas::bodies::WebhookChanges),
    responses((status = 200, description = "The updated Webhook (activating an inactive one clears disabled_reason and disabled_at and drops what it had queued)", body = super::schemas::records::Webhook), (status = 401, description = "Role below manager"), (status = 404, description = "Not found"), (status = 422, description = "Invalid fields, or a URL that does not resolve to public addresses only")),
    security(("bearer" = [])))]
pub async fn update(one: OneRecord, Input(input): Input) -> Result<axum::Json<Value>, ApiError> {
    let row = service::update(&one.state, &one.caller, &one.id, &input).await?;
    Ok(axum::Json(render(&one.state, &row, &one.selection).await?))
}

/// Delete a webhook
///
/// Manager of its group; 204; its queue is dropped.
#[utoipa::path(delete, path = "/api/v2/webhook/{id}", tag = "webhooks", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted with its queue and attempts"), (status = 401, description = "Role below manager"), (status = 404, description = "Not found")),
    security(("bearer" = [])))]
pub async fn remove(one: OneRecord) -> Result<StatusCode, ApiError> {
    service::delete(&one.state, &one.caller, &one.id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A webhook's delivery attempts
///
/// The attempt log, newest first. Viewer of its group.
#[utoipa::path(get, path = "/api/v2/webhook/{id}/attempt", tag = "webhooks", params(("id" = String, Path)),
    responses((status = 200, description = "Collection of delivery attempts", body = super::schemas::records::WebhookAttemptCollection), (status = 404, description = "Not found or not visible"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn attempts(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    raw: RawCollection,
) -> Result<CollectionPage, ApiError> {
    access::webhook(&state, &caller, &id, Role::Viewer).await?;
    let get = CollectionGet { state, caller, raw };
    get.serve(&Attempts { id_webhook: id }).await
}

/// Webhook formatters
///
/// The body formats a webhook may use. Any account.
#[utoipa::path(get, path = "/api/v2/webhook-formatter", tag = "webhooks",
    responses((status = 200, description = "Collection of formatters", body = super::schemas::records::WebhookFormatterCollection)), security(("bearer" = [])))]
pub async fn formatters(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    let query = get.raw.parse(&spec(&[], &[]))?;
    let records = FORMATTERS
        .iter()
        .map(|f| {
            let mut map = Map::new();
            map.insert("name".into(), json!(f.name));
            map.insert("description".into(), json!(f.description));
            map.insert("content_type".into(), json!(f.content_type));
            map
        })
        .collect();
    Ok(get.raw.in_memory(&query, records))
}
