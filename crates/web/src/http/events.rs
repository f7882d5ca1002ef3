//! Events: `GET /api/v2/event` (specification, Events) and the catalogue of event codes,
//! `GET /api/v2/event-type` (docs/api.md, "Events").

use axum::Router;
use axum::routing::get;
use devicecloud_query::{AttrKind, Attribute, CollectionSpec};
use devicecloud_store::event_collection;
use devicecloud_store::events::EventRow;
use devicecloud_store::{ListArgs, Listing};
use serde_json::{Map, Value, json};

use super::collection::{CollectionGet, CollectionPage, CollectionRoutes, Listed, Rendered, Selection, spec};
use crate::http::error::ApiError;
use crate::state::AppState;
use devicecloud_engine::event_catalogue::{CATALOGUE, EventType};

/// The events of the caller's groups, latest first.
struct Events;

impl Listed for Events {
    type Row = EventRow;
    /// Page sizes: docs/api.md, "Reading" (largest 10000 on event), default as Yii's 20.
    const SPEC: CollectionSpec = CollectionSpec {
        max_per_page: 10_000,
        ..spec(&event_collection::ATTRIBUTES, &event_collection::SORTABLE)
    };

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<EventRow>, ApiError> {
        Ok(event_collection::list(&state.db, args).await?)
    }

    async fn render(&self, _: &AppState, rows: &[EventRow], selection: &Selection) -> Rendered {
        Ok(selection.plain(rows, event_fields))
    }
}

const TYPE_ATTRIBUTES: [Attribute; 4] = [
    Attribute::new("event_type", AttrKind::Integer),
    Attribute::new("label", AttrKind::String),
    Attribute::new("description", AttrKind::String),
    Attribute::new("from_device", AttrKind::Integer),
];

const TYPE_SPEC: CollectionSpec = spec(&TYPE_ATTRIBUTES, &["event_type", "label", "from_device"]);

pub fn router() -> Router<AppState> {
    Router::new()
        .collection("/api/v2/event", get(index))
        .collection("/api/v2/event-type", get(types))
}

pub use devicecloud_engine::event_catalogue::event_fields;

/// List events
///
/// Events of the devices of the caller's groups, latest first, with their catalogue labels. Any
/// account; 422 on an invalid filter.
#[utoipa::path(get, path = "/api/v2/event", tag = "events",
    params(("filter[source_device]" = Option<String>, Query), ("filter[id_event]" = Option<i64>, Query), ("filter[event_type]" = Option<i64>, Query, description = "The event type's code"), ("filter[occurred_at][gte]" = Option<i64>, Query), ("sort" = Option<String>, Query), ("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query)),
    responses((status = 200, description = "Collection envelope of Event records, latest first", body = super::schemas::records::EventCollection), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn index(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    get.serve(&Events).await
}

fn type_record(t: &EventType) -> Map<String, Value> {
    let values: Vec<Value> = t
        .values
        .iter()
        .map(|v| json!({"value": v.value, "label": v.label, "description": v.description}))
        .collect();
    let mut map = Map::new();
    map.insert("event_type".into(), json!(t.code.to_string()));
    map.insert("label".into(), json!(t.label));
    map.insert("description".into(), json!(t.description));
    map.insert("from_device".into(), json!(t.from_device));
    map.insert("values".into(), Value::Array(values));
    map
}

/// The event catalogue
///
/// Every event code the service knows, with its label, description, values and whether the device
/// or the cloud records it. Any account.
#[utoipa::path(get, path = "/api/v2/event-type", tag = "events",
    responses((status = 200, description = "Collection of event types", body = super::schemas::records::EventTypeCollection), (status = 401, description = "Invalid credentials")),
    security(("bearer" = [])))]
pub async fn types(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    let query = get.raw.parse(&TYPE_SPEC)?;
    let mut records: Vec<Map<String, Value>> = CATALOGUE
        .iter()
        .map(type_record)
        .filter(|r| query.filter.as_ref().is_none_or(|f| f.matches(r)))
        .collect();
    if let Some(sort) = &query.sort {
        let key = |r: &Map<String, Value>| match r.get(sort.attr) {
            Some(Value::String(s)) => (s.parse::<i64>().unwrap_or(i64::MAX), s.to_lowercase()),
            Some(Value::Number(n)) => (n.as_i64().unwrap_or(i64::MIN), String::new()),
            _ => (i64::MIN, String::new()),
        };
        records.sort_by_key(key);
        if sort.descending {
            records.reverse();
        }
    }
    Ok(get.raw.in_memory(&query, records))
}
