//! Operations endpoints (docs/operations.md, "Probes" and "Metrics"): health, readiness, metrics
//! and the OpenAPI document, all without a token.

mod common;

use common::{TestApp, send};
use serde_json::Value;

#[tokio::test]
async fn health_and_readiness() {
    let app = TestApp::spawn().await;
    for path in ["/healthz", "/readyz"] {
        let reply = send(app.http.get(app.url(path))).await.expect(200);
        assert!(
            reply.header("content-type").unwrap().starts_with("application/json"),
            "{path}"
        );
        assert_eq!(reply.json()["status"], "ok", "{path}");
        // HEAD answers too, without a body.
        let head = send(app.http.head(app.url(path))).await.expect(200);
        assert_eq!(head.text, "");
    }
}

#[tokio::test]
async fn readiness_fails_when_the_store_is_gone() {
    let app = TestApp::spawn().await;
    app.state.db.close().await;
    let reply = send(app.http.get(app.url("/readyz"))).await;
    assert_eq!(reply.status, 503, "{}", reply.text);
    common::assert_error(&reply.json(), 503);
    // The process itself is still live.
    send(app.http.get(app.url("/healthz"))).await.expect(200);
}

#[tokio::test]
async fn metrics_count_requests() {
    let app = TestApp::spawn().await;
    // Some traffic first: a success, a 401 and a 404.
    send(app.http.get(app.url("/healthz"))).await.expect(200);
    send(app.http.get(app.url("/api/v2/group"))).await.expect(401);
    send(app.http.get(app.url("/no/such/route"))).await.expect(404);
    let reply = send(app.http.get(app.url("/metrics"))).await.expect(200);
    assert!(
        reply.header("content-type").unwrap().starts_with("text/plain"),
        "{:?}",
        reply.header("content-type")
    );
    let text = &reply.text;
    assert!(text.contains("devicecloud_http_requests_total"), "{text}");
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("devicecloud_http_requests_total{"))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("route=\"/healthz\"") && l.contains("status=\"200\"")),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| l.contains("status=\"401\"")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("status=\"404\"")), "{lines:?}");
    // Every sample is a number.
    for line in lines {
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
}

#[tokio::test]
async fn the_openapi_document() {
    let app = TestApp::spawn().await;
    let reply = send(app.http.get(app.url("/api/v2/openapi.json"))).await.expect(200);
    assert!(reply.header("content-type").unwrap().starts_with("application/json"));
    let doc: Value = reply.json();
    let version = doc["openapi"].as_str().expect("an openapi version");
    assert!(version.starts_with("3."), "{version}");
    assert!(doc["info"]["title"].is_string());
    let paths = doc["paths"].as_object().expect("paths");
    for path in [
        "/api/v2/group/index",
        "/api/v2/group/{id}",
        "/api/v2/group",
        "/oauth2/token",
        "/api/v2/user",
        "/healthz",
        "/readyz",
        "/metrics",
    ] {
        assert!(
            paths.contains_key(path),
            "{path} in {:?}",
            paths.keys().collect::<Vec<_>>()
        );
    }
    assert!(paths["/oauth2/token"]["post"].is_object());
    assert!(paths["/api/v2/group/index"]["get"].is_object());
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
}
