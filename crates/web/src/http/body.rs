//! The JSON object of a request body, as the write endpoints read it.

use axum::body::Bytes;
use serde_json::{Map, Value};

use crate::http::error::ApiError;

/// The JSON object of a request body; 400 in the specification's body otherwise.
pub fn json_object(body: &Bytes) -> Result<Map<String, Value>, ApiError> {
    // JSON's white space only (RFC 8259): a form feed is not an empty body but bad JSON.
    if body.iter().all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::BadRequest("The request body must be a JSON object.".into())),
        Err(e) => Err(ApiError::BadRequest(format!("Invalid JSON data in request body: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_json_white_space_is_an_empty_body() {
        assert!(json_object(&Bytes::from_static(b" \r\n\t")).unwrap().is_empty());
        assert!(json_object(&Bytes::from_static(b"\x0c")).is_err());
        assert!(json_object(&Bytes::from_static(b"[]")).is_err());
    }
}
