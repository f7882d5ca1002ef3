//! `/api/docs`: the API reference page, Swagger UI over the served `/api/v2/openapi.json`
//! (docs/api.md). Swagger UI's files are embedded in the binary, so the page works offline and
//! loads nothing from another origin; "Try it out" sends requests to this same service, with the
//! bearer token given in the page's "Authorize" dialog.
//!
//! Every address the page uses is relative (`docs/…`, `v2/openapi.json`), so it also works behind
//! a front end that serves the API under a path prefix.

use std::sync::{Arc, LazyLock};

use axum::Router;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use maud::{DOCTYPE, Markup, html};
use utoipa_swagger_ui::Config;

use crate::http::error::ApiError;
use crate::state::AppState;

/// The dashboard's policy (`dashboard::CSP`) with one exception, for these paths only: scripts,
/// styles and requests to this server alone, images also as `data:` URLs (Swagger UI's icons),
/// no frame may embed the page. The exception is the one inline style Swagger UI writes, the
/// colours of its logo (a `<style>` in an inline SVG), allowed by its hash rather than by
/// `'unsafe-inline'`; the browser test fails on any refusal, so a new Swagger UI that writes
/// another is noticed.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self' 'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'";

/// Swagger UI's settings, written into its `swagger-initializer.js`: the document beside the
/// page, and no validator badge (which would fetch an image from another site).
static CONFIG: LazyLock<Arc<Config<'static>>> =
    LazyLock::new(|| Arc::new(Config::new(["v2/openapi.json"]).validator_url("none")));

pub fn router() -> Router<AppState> {
    let routes = Router::new()
        .route("/api/docs", get(page))
        .route("/api/docs/{file}", get(file));
    crate::browser::pages(routes, CSP)
}

/// `GET /api/docs`: Swagger UI's own page, with its files addressed below `docs/`.
async fn page() -> Html<String> {
    let page: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "API reference · devicecloud" }
                link rel="icon" type="image/png" href="docs/favicon-32x32.png";
                link rel="stylesheet" href="docs/swagger-ui.css";
                link rel="stylesheet" href="docs/index.css";
            }
            body {
                div id="swagger-ui" {}
                script src="docs/swagger-ui-bundle.js" {}
                script src="docs/swagger-ui-standalone-preset.js" {}
                script src="docs/swagger-initializer.js" {}
            }
        }
    };
    Html(page.into_string())
}

/// `GET /api/docs/{file}`: one of Swagger UI's files, `swagger-initializer.js` written with
/// [`CONFIG`].
async fn file(Path(name): Path<String>) -> Result<Response, ApiError> {
    let file = utoipa_swagger_ui::serve(&name, CONFIG.clone())
        .map_err(|e| ApiError::Internal(format!("Swagger UI file {name}: {e}")))?
        .ok_or_else(|| ApiError::NotFound("Page not found.".into()))?;
    let content_type = match file.content_type.as_str() {
        // Text files named with their charset, as the dashboard's are.
        t @ ("text/css" | "text/html" | "text/javascript" | "application/javascript") => format!("{t}; charset=utf-8"),
        t => t.to_owned(),
    };
    Ok((
        StatusCode::OK,
        [
            (CONTENT_TYPE, content_type),
            (CACHE_CONTROL, "public, max-age=3600".to_owned()),
        ],
        file.bytes.into_owned(),
    )
        .into_response())
}
