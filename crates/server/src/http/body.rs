//! The JSON object of a request body, as the write endpoints read it.

use axum::body::Bytes;
use serde_json::{Map, Value};

use crate::error::ApiError;

/// The JSON object of a request body; 400 in the specification's body otherwise.
pub fn json_object(body: &Bytes) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::BadRequest("The request body must be a JSON object.".into())),
        Err(e) => Err(ApiError::BadRequest(format!("Invalid JSON data in request body: {e}"))),
    }
}
