//! `GET /api/v2/stream`: the live stream as Server-Sent Events (docs/api.md, "Live stream").
//! Everything that can be refused is checked before the stream starts, so that a refusal is
//! the specification's error body with its status, never an event.

pub mod client;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::Response;
use axum::response::sse::Event;
use axum::routing::get;
use devicecloud_query::{AttrKind, Attribute, CollectionSpec, CompareOp, Filter, Params, Scalar};

use super::collection::RawCollection;
use crate::caller::Caller;
use crate::http::caller::bearer_value;
use crate::http::error::ApiError;
use crate::service::access;
use crate::state::AppState;
use client::{Client, Credential, Next, OVERFLOW_MESSAGE, Request};
use devicecloud_engine::auth::Role;
use devicecloud_engine::auth::secrets::token_hash;
use devicecloud_engine::stream::ring::Kind;

const ATTRIBUTES: [Attribute; 1] = [Attribute::new("id_group", AttrKind::String)];

/// Only `filter[id_group]` is read; paging and sorting mean nothing to a stream.
const SPEC: CollectionSpec = CollectionSpec {
    attributes: &ATTRIBUTES,
    sortable: &[],
    default_per_page: 1,
    max_per_page: 1,
};

/// Tells a buffering reverse proxy (nginx) to pass events on as they come.
const X_ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v2/stream", get(stream))
}

/// The groups of `filter[id_group]` (eq, or a non-empty in), as on `data`; any other form of
/// the filter is refused.
fn groups_of(filter: Option<&Filter>) -> Result<Vec<String>, ApiError> {
    let text = |value: &Scalar| match value {
        Scalar::Str(s) => Some(s.clone()),
        _ => None,
    };
    let groups = match filter {
        None => return Err(ApiError::BadRequest("filter[id_group] is required".into())),
        Some(Filter::Compare {
            attr: "id_group",
            op: CompareOp::Eq,
            value,
        }) => text(value).into_iter().collect(),
        Some(Filter::In {
            attr: "id_group",
            values,
            negated: false,
            ..
        }) => values.iter().filter_map(text).collect(),
        Some(_) => Vec::new(),
    };
    if groups.is_empty() {
        return Err(ApiError::invalid(
            "filter",
            "filter[id_group] must name groups, as filter[id_group]=<id> or filter[id_group][in][]=<id>.",
        ));
    }
    Ok(groups)
}

/// `types`: a comma list of `measurements`, `events`, `commands`, `twins`, `alarms`; all of them when absent.
fn kinds_of(query: &[u8]) -> Result<Vec<Kind>, ApiError> {
    let params = Params::parse_query(query);
    let Some(list) = params.get_scalar("types") else {
        return Ok(Kind::ALL.to_vec());
    };
    let mut kinds = Vec::new();
    for name in list.split(',').map(str::trim) {
        let kind = Kind::ALL.into_iter().find(|k| k.plural() == name).ok_or_else(|| {
            ApiError::invalid(
                "types",
                "types must be a comma list of measurements, events, commands, twins and alarms.",
            )
        })?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(kinds)
}

/// Live stream
///
/// Server-Sent Events of what the service commits: measurements, events, command outcomes,
/// twin changes, resumable with `Last-Event-ID`. `filter[id_group]` required; only visible groups; at most
/// `streams_per_account` open streams per account (429 beyond).
#[utoipa::path(get, path = "/api/v2/stream", tag = "data",
    params(
        ("filter[id_group]" = String, Query, description = "required: a group, or filter[id_group][in][]=… for several"),
        ("types" = Option<String>, Query, description = "comma list of measurements, events, commands, twins, alarms (default: all)"),
        ("Last-Event-ID" = Option<String>, Header, description = "resume after this event id (kept for at least 10 minutes)"),
    ),
    responses(
        (status = 200, description = "text/event-stream: events `measurement` (a data record), `event` (an event record), `command` ({id_physical_device, method, status, device_status, reason, duration_ms, requested_at}; status the HTTP status the caller got), each with an id; a comment line every 15 s; `overflow` (then the end) when the client fell too far behind", content_type = "text/event-stream"),
        (status = 400, description = "filter[id_group] is missing, or Last-Event-ID is not an id of this stream"),
        (status = 401, description = "Invalid credentials"),
        (status = 404, description = "A group that does not exist or that the caller cannot see"),
        (status = 422, description = "Invalid filter or types"),
        (status = 429, description = "The account already holds its most open streams (streams_per_account)"),
    ),
    security(("bearer" = [])))]
pub async fn stream(
    State(state): State<AppState>,
    headers: HeaderMap,
    raw: RawCollection,
) -> Result<Response, ApiError> {
    let hash = token_hash(bearer_value(&headers).ok_or_else(ApiError::invalid_credentials)?);
    let rights_seen = state.auth.changes();
    let caller = Caller::of_token(&state, &hash).await?;
    let query = raw.parse(&SPEC)?;
    let groups = groups_of(query.filter.as_ref())?;
    let kinds = kinds_of(raw.query_bytes())?;
    let resume = match headers.get("last-event-id") {
        None => None,
        Some(value) => {
            let parsed = value.to_str().ok().and_then(|id| state.stream.parse_id(id));
            let refused = || ApiError::BadRequest("Last-Event-ID is not an id of this stream.".into());
            Some(parsed.ok_or_else(refused)?)
        }
    };
    access::groups(&state, &caller, &groups, Role::Viewer).await?;
    let slot = state
        .stream
        .accounts
        .reserve(&caller.id_user, state.settings.limits.streams_per_account)?;
    let request = Request {
        credential: Credential::Token(hash),
        groups,
        device: None,
        kinds,
        resume,
    };
    let mut response = Client::new(state, request, rights_seen, slot).into_response(event);
    response
        .headers_mut()
        .insert(X_ACCEL_BUFFERING, HeaderValue::from_static("no"));
    Ok(response)
}

/// The SSE event of what a client sends next: records as the `data` and `event` endpoints
/// render them, under their kind's name.
fn event(next: Next) -> Event {
    match next {
        Next::Record(record, id) => Event::default().event(record.kind.name()).id(id).data(&*record.data),
        Next::Heartbeat => Event::default().comment("heartbeat"),
        Next::Overflow(id) => Event::default()
            .event("overflow")
            .id(id)
            .data(serde_json::json!({ "message": OVERFLOW_MESSAGE }).to_string()),
    }
}
