//! The firmware download (docs/gateway-protocol.md, "Firmware update"):
//! `GET /gateway/v1/firmware/<id>` with the gateway's Basic credentials, for images of its kind
//! and for its group (or every group). The bytes stream from the shared pieces cache
//! (`devicecloud_engine::firmware::pieces`), outside the store's write path; `Range` resumes a
//! broken download (one range: 206; none the image can serve: 416) and the `ETag` is the
//! image's sha256.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::header::{
    ACCEPT_RANGES, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG, IF_NONE_MATCH, IF_RANGE, RANGE,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use devicecloud_protocol::firmware::download_path;
use devicecloud_store::firmware::{self, CHUNK_BYTES};

use crate::http::error::ApiError;
use crate::http::gateway::gateway;
use crate::state::AppState;

/// The route of the download.
pub fn router() -> axum::Router<AppState> {
    axum::Router::new().route(&download_path("{id}"), axum::routing::get(download))
}

/// Gateway: download a firmware image
///
/// The image's bytes for the gateway named by the Basic credentials: only images of its kind,
/// for its group or for every group (404 otherwise). `Range: bytes=a-b` (one range) answers 206;
/// a range the image cannot serve answers 416. `ETag` is the sha256 (quoted); `If-None-Match`
/// with it answers 304.
#[utoipa::path(get, path = "/gateway/v1/firmware/{id}", tag = "gateway", params(("id" = String, Path)),
    responses((status = 200, description = "The image", content_type = "application/octet-stream"), (status = 206, description = "The range asked for", content_type = "application/octet-stream"), (status = 304, description = "The image is the one the gateway has (If-None-Match)"), (status = 401, description = "Bad or missing gateway credentials"), (status = 404, description = "No such image for this gateway's kind and group"), (status = 416, description = "A range the image cannot serve")),
    security(("basic" = [])))]
pub async fn download(State(state): State<AppState>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let gateway = match gateway(&state, &headers).await {
        Ok(gateway) => gateway,
        Err(response) => return response,
    };
    let not_found = || ApiError::NotFound(format!("Firmware not found: {id}")).into_response();
    let image = match firmware::get(&state.db, &id).await {
        Ok(Some(image)) => image,
        Ok(None) => return not_found(),
        Err(e) => return ApiError::from(e).into_response(),
    };
    if !image.is_for(gateway.kind.as_str(), &gateway.id_group) {
        return not_found();
    }
    let size = u64::try_from(image.size).unwrap_or(0);
    let etag = format!("\"{}\"", image.sha256);
    let tagged = |status: StatusCode| {
        let mut response = status.into_response();
        let headers = response.headers_mut();
        headers.insert(ETAG, value(&etag));
        headers.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        response
    };
    if headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag || t.trim() == "*"))
    {
        return tagged(StatusCode::NOT_MODIFIED);
    }
    // A range applies unless `If-Range` names another version of the bytes.
    let range = headers.get(RANGE).filter(|_| {
        headers
            .get(IF_RANGE)
            .is_none_or(|tag| tag.to_str().is_ok_and(|tag| tag.trim() == etag))
    });
    let (status, first, last) = match range {
        None => (StatusCode::OK, 0, size.saturating_sub(1)),
        Some(range) => match range.to_str().ok().and_then(|r| one_range(r, size)) {
            Some((first, last)) => (StatusCode::PARTIAL_CONTENT, first, last),
            None => {
                let mut response = ApiError::Status(
                    StatusCode::RANGE_NOT_SATISFIABLE,
                    format!("The image has {size} bytes; ask for one range within them (bytes=first-last)."),
                )
                .into_response();
                response
                    .headers_mut()
                    .insert(CONTENT_RANGE, value(&format!("bytes */{size}")));
                return response;
            }
        },
    };
    let mut response = tagged(status);
    *response.body_mut() = Body::from_stream(bytes_of(state, image.sha256, first, last));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    headers.insert(CONTENT_LENGTH, value(&(last + 1 - first).to_string()));
    if status == StatusCode::PARTIAL_CONTENT {
        headers.insert(CONTENT_RANGE, value(&format!("bytes {first}-{last}/{size}")));
    }
    response
}

/// A header value of text the service wrote (always visible ASCII).
fn value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Bytes `first..=last` of the blob `sha256`, piece by piece from the shared cache; a piece
/// that cannot be read ends the body early (the gateway resumes with a range).
fn bytes_of(
    state: AppState,
    sha256: String,
    first: u64,
    last: u64,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> {
    let piece_bytes = CHUNK_BYTES as u64;
    futures::stream::unfold(first, move |at| {
        let (state, sha256) = (state.clone(), sha256.clone());
        async move {
            if at > last {
                return None;
            }
            let seq = at / piece_bytes;
            let piece = match state.firmware_pieces.piece(&sha256, seq as i64).await {
                Ok(Some(piece)) => piece,
                Ok(None) => return Some((Err(std::io::Error::other("the image is gone")), last + 1)),
                Err(e) => {
                    tracing::warn!(error = %e, "a firmware piece could not be read; the download ends early");
                    return Some((Err(std::io::Error::other(e.to_string())), last + 1));
                }
            };
            let start = (at - seq * piece_bytes) as usize;
            let end = ((last + 1).min((seq + 1) * piece_bytes) - seq * piece_bytes) as usize;
            let Some(slice) = (start < end && end <= piece.len()).then(|| piece.slice(start..end)) else {
                return Some((
                    Err(std::io::Error::other("a piece is shorter than the image says")),
                    last + 1,
                ));
            };
            Some((Ok(slice), (seq + 1) * piece_bytes))
        }
    })
}

/// The one range of `bytes=…` an image of `size` bytes can serve, as `(first, last)`: `a-b`,
/// `a-` or `-n` (the last n bytes). Several ranges, another unit, or none within the image:
/// `None`.
fn one_range(header: &str, size: u64) -> Option<(u64, u64)> {
    let spec = header.trim().strip_prefix("bytes=")?.trim();
    if spec.contains(',') || size == 0 {
        return None;
    }
    let (first, last) = spec.split_once('-')?;
    let (first, last) = (first.trim(), last.trim());
    let (first, last) = if first.is_empty() {
        let n: u64 = last.parse().ok().filter(|n| *n > 0)?;
        (size.saturating_sub(n), size - 1)
    } else {
        let first: u64 = first.parse().ok()?;
        let last: u64 = if last.is_empty() { size - 1 } else { last.parse().ok()? };
        (first, last.min(size - 1))
    };
    (first <= last && first < size).then_some((first, last))
}

#[cfg(test)]
mod tests {
    use super::one_range;

    #[test]
    fn ranges_read_as_rfc_9110_says_or_not_at_all() {
        assert_eq!(one_range("bytes=0-99", 1000), Some((0, 99)));
        assert_eq!(one_range("bytes=500-", 1000), Some((500, 999)));
        assert_eq!(one_range("bytes=-100", 1000), Some((900, 999)));
        assert_eq!(one_range("bytes=-5000", 1000), Some((0, 999)));
        assert_eq!(one_range("bytes=900-5000", 1000), Some((900, 999)));
        for bad in [
            "bytes=1000-",
            "bytes=5-4",
            "bytes=0-1,5-6",
            "items=0-1",
            "bytes=",
            "bytes=-0",
            "bytes=a-b",
            "bytes=-",
        ] {
            assert_eq!(one_range(bad, 1000), None, "{bad}");
        }
        assert_eq!(one_range("bytes=0-0", 0), None);
    }
}
