//! Data sessions of GO modules: `GET /api/v2/data-session` with its expands and labels, one
//! session, and `GET /api/v2/data-session/<id>/download-csv` (specification, Data sessions;
//! docs/api.md, "Data sessions" gives the CSV layout).

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use axum::routing::get;
use devicecloud_query::{CollectionQuery, CollectionSpec};
use devicecloud_store::session_collection::{self as store, SessionRow, SessionSeries};
use devicecloud_store::{Db, accounts, device_collection, groups};
use serde_json::{Map, Value, json};

use super::collection::{CollectionPage, RawCollection, Selection};
use super::device_collection::render_devices;
use crate::auth::{Caller, Role};
use crate::error::ApiError;
use crate::render::{csv_response, group_fields, group_links, session_fields, session_links};
use crate::service::access;
use crate::service::sessions;
use crate::state::AppState;

/// Default page size 20 (specification Limits), largest 1000 (docs/api.md, "Reading").
const SPEC: CollectionSpec = CollectionSpec {
    attributes: &store::ATTRIBUTES,
    sortable: store::SORTABLE,
    default_per_page: 20,
    max_per_page: 1000,
};

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
        .route("/api/v2/data-session", get(index))
        .route("/api/v2/data-session/index", get(index))
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

#[utoipa::path(get, path = "/api/v2/data-session", tag = "data sessions",
    params(("sort" = Option<String>, Query, description = "for example -start"), ("expand" = Option<String>, Query), ("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query)),
    responses((status = 200, description = "Collection envelope of Data Session records with expand and labels"), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn index(
    State(state): State<AppState>,
    caller: Caller,
    raw: RawCollection,
) -> Result<CollectionPage, ApiError> {
    let list = async |query: &CollectionQuery| Ok(store::list(&state.db, raw.list_args(&caller, query)).await?);
    let render = async |rows: &[SessionRow], selection: &Selection| {
        let mut items = Vec::with_capacity(rows.len());
        for row in rows {
            items.push(render(&state, row, selection).await?);
        }
        Ok(items)
    };
    Ok(raw.page(&SPEC, &EXPANDS, list, render).await?.with("labels", labels()))
}

#[utoipa::path(get, path = "/api/v2/data-session/{id}", tag = "data sessions", params(("id" = String, Path)),
    responses((status = 200, description = "A Data Session record"), (status = 404, description = "Not found or not visible")), security(("bearer" = [])))]
pub async fn view(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<axum::Json<Value>, ApiError> {
    let session = access::session(&state, &caller, &id, Role::Viewer).await?;
    let selection = Selection::from_query(query.as_deref());
    Ok(axum::Json(render(&state, &session, &selection).await?))
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

#[utoipa::path(get, path = "/api/v2/data-session/{id}/download-csv", tag = "data sessions", params(("id" = String, Path)),
    responses((status = 200, description = "text/csv: timestamp,microseconds,source_device,serial_hardware,datatype,value; one line per raw point, time ascending", content_type = "text/csv"), (status = 404, description = "Not found or not visible")),
    security(("bearer" = [])))]
pub async fn download_csv(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(csv_response(sessions::csv(&state, &caller, &id).await?))
}
