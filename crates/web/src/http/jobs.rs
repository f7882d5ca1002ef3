//! Jobs (docs/api.md, "Jobs"): `POST|GET /api/v2/job`, `GET /api/v2/job/<id>`,
//! `POST /api/v2/job/<id>/cancel` and the executions `GET /api/v2/job/<id>/execution`.

use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{get, post};
use devicecloud_query::CollectionSpec;
use devicecloud_store::jobs::{self, ExecutionRow, JobRow};
use devicecloud_store::{ListArgs, Listing};
use serde_json::{Map, Value, json};

use super::collection::{CollectionGet, CollectionPage, Listed, RawCollection, Rendered, Selection, spec};
use super::record::{NewRecord, OneRecord};
use crate::caller::Caller;
use crate::http::error::ApiError;
use crate::service::jobs as service;
use crate::state::AppState;
use devicecloud_engine::auth::Role;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/job", get(index).post(create))
        .route("/api/v2/job/{id}", get(view))
        .route("/api/v2/job/{id}/cancel", post(cancel))
        .route("/api/v2/job/{id}/execution", get(executions))
}

/// Stored JSON text as a value (null if it does not read, which the service never writes).
fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// The job record, in its documented order.
pub fn job_fields(row: &JobRow) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("id_job".into(), json!(row.id_job));
    map.insert("label".into(), json!(row.label));
    map.insert("operation".into(), json_of(&row.operation));
    map.insert("target".into(), json_of(&row.target));
    map.insert("status".into(), json!(row.status));
    for (key, value) in [
        ("total", row.total),
        ("pending", row.pending),
        ("in_progress", row.in_progress),
        ("succeeded", row.succeeded),
        ("failed", row.failed),
        ("timed_out", row.timed_out),
        ("cancelled", row.cancelled),
        ("created_at", row.created_at),
    ] {
        map.insert(key.into(), json!(value));
    }
    map.insert("created_by".into(), json!(row.created_by));
    map.insert("started_at".into(), json!(row.started_at));
    map.insert("finished_at".into(), json!(row.finished_at));
    map.insert("rate_per_minute".into(), json!(row.rate_per_minute));
    map.insert("max_failures_percent".into(), json!(row.max_failures_percent));
    map.insert("timeout_s".into(), json!(row.timeout_s));
    map.insert("expires_at".into(), json!(row.expires_at));
    map
}

fn render(row: &JobRow, selection: &Selection) -> Value {
    let id = &row.id_job;
    let links = json!({
        "self": {"href": format!("/api/v2/job/{id}")},
        "executions": {"href": format!("/api/v2/job/{id}/execution")},
    });
    selection.render(job_fields(row), Vec::new(), Some(links))
}

/// An execution record.
fn execution_fields(row: &ExecutionRow) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("id_physical_device".into(), json!(row.id_physical_device));
    map.insert("status".into(), json!(row.status));
    map.insert("attempts".into(), json!(row.attempts));
    map.insert("started_at".into(), json!(row.started_at));
    map.insert("finished_at".into(), json!(row.finished_at));
    map.insert("result".into(), row.result.as_deref().map_or(Value::Null, json_of));
    map
}

/// The jobs the caller sees.
struct Jobs;

impl Listed for Jobs {
    type Row = JobRow;
    const SPEC: CollectionSpec = spec(&jobs::ATTRIBUTES, &jobs::SORTABLE);

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<JobRow>, ApiError> {
        Ok(jobs::list(&state.db, args).await?)
    }

    async fn render(&self, _: &AppState, rows: &[JobRow], selection: &Selection) -> Rendered {
        Ok(rows.iter().map(|row| render(row, selection)).collect())
    }
}

/// The executions of one job.
struct Executions {
    id_job: String,
}

impl Listed for Executions {
    type Row = ExecutionRow;
    const SPEC: CollectionSpec = spec(&jobs::EXECUTION_ATTRIBUTES, &jobs::EXECUTION_SORTABLE);

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<ExecutionRow>, ApiError> {
        Ok(jobs::executions(&state.db, &self.id_job, args).await?)
    }

    async fn render(&self, _: &AppState, rows: &[ExecutionRow], selection: &Selection) -> Rendered {
        Ok(selection.plain(rows, execution_fields))
    }
}

/// List jobs
///
/// The jobs whose every targeted group the caller sees, newest first.
#[utoipa::path(get, path = "/api/v2/job", tag = "jobs",
    params(("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query), ("sort" = Option<String>, Query), ("fields" = Option<String>, Query)),
    responses((status = 200, description = "Collection envelope of Job records", body = super::schemas::records::JobCollection), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn index(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    get.serve(&Jobs).await
}

/// Create a job
///
/// A command, a twin patch or a firmware update over the devices a physical-device filter
/// matches now (among those the caller sees; gateways only for commands and firmware). Manager of
/// every group targeted, or an administrator; 422 on invalid fields or an empty target.
#[utoipa::path(post, path = "/api/v2/job", tag = "jobs",
    request_body(content = super::schemas::bodies::NewJob),
    responses((status = 201, description = "The Job, queued, with a Location header", body = super::schemas::records::Job), (status = 401, description = "Role below manager in a targeted group"), (status = 422, description = "Invalid fields, or a target that matches no device")),
    security(("bearer" = [])))]
pub async fn create(new: NewRecord) -> Result<Response, ApiError> {
    let job = service::create(&new.state, &new.caller, &new.input).await?;
    let record = render(&job, &new.selection);
    Ok(new.created(&format!("/api/v2/job/{}", job.id_job), record))
}

/// Get a job
///
/// Its progress: the counts of its executions by status. Whoever sees every group it targets.
#[utoipa::path(get, path = "/api/v2/job/{id}", tag = "jobs", params(("id" = String, Path)),
    responses((status = 200, description = "A Job record", body = super::schemas::records::Job), (status = 404, description = "Not found or not visible")),
    security(("bearer" = [])))]
pub async fn view(one: OneRecord) -> Result<axum::Json<Value>, ApiError> {
    let job = service::get(&one.state, &one.caller, &one.id, Role::Viewer).await?;
    Ok(axum::Json(render(&job, &one.selection)))
}

/// Cancel a job
///
/// Its pending executions become cancelled; those in progress end normally. A job that ended is
/// left as it is. Manager of every group it targets.
#[utoipa::path(post, path = "/api/v2/job/{id}/cancel", tag = "jobs", params(("id" = String, Path)),
    responses((status = 200, description = "The Job after the cancellation", body = super::schemas::records::Job), (status = 401, description = "Role below manager"), (status = 404, description = "Not found or not visible")),
    security(("bearer" = [])))]
pub async fn cancel(one: OneRecord) -> Result<axum::Json<Value>, ApiError> {
    let job = service::cancel(&one.state, &one.caller, &one.id).await?;
    Ok(axum::Json(render(&job, &one.selection)))
}

/// A job's executions
///
/// One per targeted device, by device: status, attempts and the device's answer.
#[utoipa::path(get, path = "/api/v2/job/{id}/execution", tag = "jobs", params(("id" = String, Path)),
    responses((status = 200, description = "Collection of executions", body = super::schemas::records::JobExecutionCollection), (status = 404, description = "Not found or not visible"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn executions(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    raw: RawCollection,
) -> Result<CollectionPage, ApiError> {
    service::get(&state, &caller, &id, Role::Viewer).await?;
    let get = CollectionGet { state, caller, raw };
    get.serve(&Executions { id_job: id }).await
}
