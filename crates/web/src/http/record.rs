//! What the handlers of one record share: the request on a record (its id, the caller, the
//! `fields` and `expand` asked for), the JSON object a write sends, and the request that creates
//! a record with its answer.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, RawQuery, Request};
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use super::body::json_object;
use super::collection::Selection;
use crate::caller::Caller;
use crate::origin::Origin;
use crate::state::AppState;

/// A request on one record: the state, the authenticated caller (a missing or bad token is
/// answered first), the record's id from the path, and the `fields` and `expand` of the query.
pub struct OneRecord {
    pub state: AppState,
    pub caller: Caller,
    pub id: String,
    pub selection: Selection,
}

impl FromRequestParts<AppState> for OneRecord {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<OneRecord, Response> {
        let caller = Caller::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let Ok(RawQuery(query)) = RawQuery::from_request_parts(parts, state).await;
        Ok(OneRecord {
            state: state.clone(),
            caller,
            id,
            selection: Selection::from_query(query.as_deref()),
        })
    }
}

/// The body of a write: a JSON object, an empty body being `{}` (400 otherwise, see
/// [`json_object`]).
pub struct Input(pub Map<String, Value>);

impl<S: Send + Sync> FromRequest<S> for Input {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Input, Response> {
        let body = Bytes::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        json_object(&body).map(Input).map_err(IntoResponse::into_response)
    }
}

/// A request that creates a record: the state, the authenticated caller (answered first), where
/// the client reached the service, the `fields` and `expand` of the query, and the new record's
/// fields.
pub struct NewRecord {
    pub state: AppState,
    pub caller: Caller,
    pub origin: Origin,
    pub selection: Selection,
    pub input: Map<String, Value>,
}

impl FromRequest<AppState> for NewRecord {
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<NewRecord, Response> {
        let (mut parts, body) = req.into_parts();
        let caller = Caller::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let Ok(origin) = Origin::from_request_parts(&mut parts, state).await;
        let Ok(RawQuery(query)) = RawQuery::from_request_parts(&mut parts, state).await;
        let Input(input) = Input::from_request(Request::from_parts(parts, body), state).await?;
        Ok(NewRecord {
            state: state.clone(),
            caller,
            origin,
            selection: Selection::from_query(query.as_deref()),
            input,
        })
    }
}

impl NewRecord {
    /// The answer to the create: 201, the new record's absolute address (its `path` here) in
    /// `Location`, and the record.
    pub fn created(&self, path: &str, record: Value) -> Response {
        created(&self.origin, path, record)
    }
}

/// The answer to a create: 201, the new record's absolute address (its `path` here, as the
/// client reached the service) in `Location`, and the record.
pub fn created(origin: &Origin, path: &str, record: Value) -> Response {
    (StatusCode::CREATED, [(LOCATION, origin.url(path))], axum::Json(record)).into_response()
}
