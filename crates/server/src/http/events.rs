//! Events: `GET /api/v2/event` (specification, Events) and the catalogue of event codes,
//! `GET /api/v2/event-type` (docs/api.md, "Events").

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use devicecloud_query::{AttrKind, Attribute, CollectionQuery, CollectionSpec, PageRequest};
use devicecloud_store::event_collection::{self, EventRow};
use serde_json::{Map, Value, json};

use super::collection::{CollectionPage, RawCollection, Selection, items_json};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::event_catalogue::{CATALOGUE, EventType};
use crate::state::AppState;

/// Page sizes: docs/api.md, "Reading" (largest 10000 on event), default as Yii's 20.
const SPEC: CollectionSpec = CollectionSpec {
    attributes: &event_collection::ATTRIBUTES,
    sortable: &event_collection::SORTABLE,
    default_per_page: 20,
    max_per_page: 10_000,
};

const TYPE_ATTRIBUTES: [Attribute; 4] = [
    Attribute::new("event_type", AttrKind::Integer),
    Attribute::new("label", AttrKind::String),
    Attribute::new("description", AttrKind::String),
    Attribute::new("from_device", AttrKind::Integer),
];

const TYPE_SPEC: CollectionSpec = CollectionSpec {
    attributes: &TYPE_ATTRIBUTES,
    sortable: &["event_type", "label", "from_device"],
    default_per_page: 20,
    max_per_page: 1000,
};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/event", get(index))
        .route("/api/v2/event/index", get(index))
        .route("/api/v2/event-type", get(types))
        .route("/api/v2/event-type/index", get(types))
}

pub use crate::event_catalogue::event_fields;

#[utoipa::path(get, path = "/api/v2/event", tag = "events",
    params(("filter[source_device]" = Option<String>, Query), ("filter[id_event]" = Option<i64>, Query), ("filter[event_type]" = Option<String>, Query), ("filter[occurred_at][gte]" = Option<i64>, Query), ("sort" = Option<String>, Query), ("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query)),
    responses((status = 200, description = "Collection envelope of Event records, latest first"), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn index(
    State(state): State<AppState>,
    caller: Caller,
    raw: RawCollection,
) -> Result<CollectionPage, ApiError> {
    let list =
        async |query: &CollectionQuery| Ok(event_collection::list(&state.db, raw.list_args(&caller, query)).await?);
    let render = async |rows: &[EventRow], selection: &Selection| {
        Ok(rows
            .iter()
            .map(|row| selection.render(event_fields(row), Vec::new(), None))
            .collect())
    };
    raw.page(&SPEC, &[], list, render).await
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

#[utoipa::path(get, path = "/api/v2/event-type", tag = "events",
    responses((status = 200, description = "Collection of event types: {event_type, label, description, from_device, values: [{value, label, description}]}"), (status = 401, description = "Invalid credentials")),
    security(("bearer" = [])))]
pub async fn types(_caller: Caller, raw: RawCollection) -> Result<CollectionPage, ApiError> {
    let query = raw.parse(&TYPE_SPEC)?;
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
    let page = page_of(query.page, records.len());
    let selection = Selection::of(&query);
    let items: Vec<Value> = records
        .into_iter()
        .skip(usize::try_from(page.offset).unwrap_or(usize::MAX))
        .take(usize::try_from(page.per_page).unwrap_or(usize::MAX))
        .map(|r| selection.render(r, Vec::new(), None))
        .collect();
    Ok(CollectionPage::new(&raw, &query, page, items_json(&items)).with("expand", json!([])))
}

fn page_of(request: PageRequest, total: usize) -> devicecloud_query::Page {
    request.resolve(u64::try_from(total).unwrap_or(u64::MAX))
}
