//! Data sessions of GO modules: `GET /api/v2/data-session` with its expands and labels, one
//! session, and `GET /api/v2/data-session/<id>/download-csv` (specification, Data sessions;
//! docs/api.md, "Data sessions" gives the CSV layout).

use axum::Router;
use axum::response::Response;
use axum::routing::get;
use devicecloud_query::CollectionSpec;
use devicecloud_store::session_collection::{self as store, SessionRow, SessionSeries};
use devicecloud_store::{Db, ListArgs, Listing, accounts, device_collection, groups};
use serde_json::{Map, Value, json};

use super::collection::{CollectionGet, CollectionPage, CollectionRoutes, Listed, Rendered, Selection, each, spec};
use super::device_collection::render_devices;
use super::record::OneRecord;
use crate::http::error::ApiError;
use crate::render::{csv_response, group_fields, group_links, session_fields, session_links};
use crate::service::access;
use crate::service::sessions;
use crate::state::AppState;
use devicecloud_engine::auth::Role;

/// The expand options, in declaration order (specification, Data Session).
pub const EXPANDS: [&str; 9] = [
    "datatypes",
    "datatypesFilter",
    "creator",
    "updater",
    "physicalDevicesFilter",
    "physicalDevices",
    "fromDevice",
    "group",
    "dataIds",
];

pub fn router() -> Router<AppState> {
    Router::new()
        .collection("/api/v2/data-session", get(index))
        .route("/api/v2/data-session/{id}", get(view))
        .route("/api/v2/data-session/{id}/download-csv", get(download_csv))
}

fn labels() -> Value {
    json!({
        "group.label": "Group",
        "person.label": "Person",
        "person.objectLink": "Person",
        "sourceDevicesString": "Source devices",
        "datatypesString": "Datatypes",
        "ingestionStatusString": "Ingestion status",
        "archivingStatusString": "Archiving status",
    })
}

/// The data sessions of the caller's groups.
struct Sessions;

impl Listed for Sessions {
    type Row = SessionRow;
    /// Default page size 20 (specification Limits), largest 1000 (docs/api.md, "Reading").
    const SPEC: CollectionSpec = spec(&store::ATTRIBUTES, store::SORTABLE);
    const EXPANDS: &'static [&'static str] = &EXPANDS;

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<SessionRow>, ApiError> {
        Ok(store::list(&state.db, args).await?)
    }

    async fn render(&self, state: &AppState, rows: &[SessionRow], selection: &Selection) -> Rendered {
        each(rows, |row| render(state, row, selection)).await
    }

    fn extra(&self) -> Vec<(&'static str, Value)> {
        vec![("labels", labels())]
    }
}

/// List data sessions
///
/// The data sessions of GO modules in the caller's groups, with their expands; list expands count
/// against `expand_max_entries`. Any account.
#[utoipa::path(get, path = "/api/v2/data-session", tag = "data sessions",
    params(("sort" = Option<String>, Query, description = "for example -start"), ("expand" = Option<String>, Query), ("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query)),
    responses((status = 200, description = "Collection envelope of Data Session records with expand and labels", body = super::schemas::records::DataSessionCollection), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn index(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    get.serve(&Sessions).await
}

/// Get a data session
///
/// One session with `fields` and `expand`. Viewer of its group; 404 when invisible.
#[utoipa::path(get, path = "/api/v2/data-session/{id}", tag = "data sessions", params(("id" = String, Path)),
    responses((status = 200, description = "A Data Session record", body = super::schemas::records::DataSession), (status = 404, description = "Not found or not visible")), security(("bearer" = [])))]
pub async fn view(one: OneRecord) -> Result<axum::Json<Value>, ApiError> {
    let session = access::session(&one.state, &one.caller, &one.id, Role::Viewer).await?;
    Ok(axum::Json(render(&one.state, &session, &one.selection).await?))
}

async fn render(state: &AppState, row: &SessionRow, selection: &Selection) -> Result<Value, ApiError> {
    let wanted = selection.expanded(&EXPANDS);
    let needs_series = wanted.iter().any(|n| {
        matches!(
            *n,
            "datatypes" | "datatypesFilter" | "physicalDevicesFilter" | "physicalDevices" | "dataIds"
        )
    });
    let series = if needs_series {
        store::series(&state.db, row).await?
    } else {
        Vec::new()
    };
    // Every list relation of a session is at most one entry per series.
    let lists = wanted
        .iter()
        .filter(|n| {
            matches!(
                **n,
                "datatypes" | "datatypesFilter" | "physicalDevicesFilter" | "physicalDevices" | "dataIds"
            )
        })
        .count();
    selection.spend(
        series.len().saturating_mul(lists),
        state.settings.limits.expand_max_entries,
    )?;
    let mut expanded = Vec::with_capacity(wanted.len());
    for name in wanted {
        let value = relation(state, row, name, &series, &selection.nested(name)).await?;
        expanded.push((name.to_string(), value));
    }
    Ok(selection.render(session_fields(row), expanded, Some(session_links(&row.id_data_session))))
}

/// Distinct values in first-seen order.
fn distinct<T: PartialEq + Clone>(values: impl Iterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

async fn user(db: &Db, id: Option<&str>, nested: &Selection) -> Result<Value, ApiError> {
    let Some(id) = id else { return Ok(Value::Null) };
    Ok(match accounts::get(db, id).await? {
        Some(a) => {
            let mut map = Map::new();
            map.insert("id_user".into(), json!(a.id_user));
            map.insert("username".into(), json!(a.username));
            nested.render(map, Vec::new(), None)
        }
        None => Value::Null,
    })
}

async fn relation(
    state: &AppState,
    row: &SessionRow,
    name: &str,
    series: &[SessionSeries],
    nested: &Selection,
) -> Result<Value, ApiError> {
    let db = &state.db;
    let datatypes = || {
        let mut d = distinct(series.iter().map(|s| s.datatype));
        d.sort_unstable();
        d
    };
    let device_ids = || distinct(series.iter().map(|s| s.source_device.as_str()));
    Ok(match name {
        "datatypes" => json!(datatypes()),
        "datatypesFilter" => Value::Array(
            datatypes()
                .into_iter()
                .map(|d| json!({"value": d, "label": format!("Datatype {d}")}))
                .collect(),
        ),
        "creator" => user(db, row.created_by.as_deref(), nested).await?,
        "updater" => user(db, row.updated_by.as_deref(), nested).await?,
        "physicalDevicesFilter" => {
            let devices = device_collection::devices(db, &device_ids()).await?;
            Value::Array(
                devices
                    .iter()
                    .map(|d| {
                        let label = if d.label.is_empty() {
                            &d.serial_hardware
                        } else {
                            &d.label
                        };
                        json!({"value": d.id_physical_device, "label": label})
                    })
                    .collect(),
            )
        }
        "physicalDevices" => {
            let devices = device_collection::devices(db, &device_ids()).await?;
            Value::Array(render_devices(state, &devices, nested).await?)
        }
        "fromDevice" => {
            let devices = device_collection::devices(db, &[row.id_physical_device.as_str()]).await?;
            render_devices(state, &devices, nested)
                .await?
                .pop()
                .unwrap_or(Value::Null)
        }
        "group" => match groups::get(db, &row.id_group).await? {
            Some(g) => nested.render(group_fields(&g), Vec::new(), Some(group_links(&g.id_group))),
            None => Value::Null,
        },
        "dataIds" => json!(
            series
                .iter()
                .map(|s| s.id_container_data_latest.as_str())
                .collect::<Vec<_>>()
        ),
        _ => Value::Null,
    })
}

/// Download a session as CSV
///
/// Every raw point of the session, time ascending, streamed in pages so that the server's memory
/// stays flat. Viewer of its group.
#[utoipa::path(get, path = "/api/v2/data-session/{id}/download-csv", tag = "data sessions", params(("id" = String, Path)),
    responses((status = 200, description = "text/csv: timestamp,microseconds,source_device,serial_hardware,datatype,value; one line per raw point, time ascending", content_type = "text/csv"), (status = 404, description = "Not found or not visible")),
    security(("bearer" = [])))]
pub async fn download_csv(one: OneRecord) -> Result<Response, ApiError> {
    Ok(csv_response(sessions::csv(&one.state, &one.caller, &one.id).await?))
}
