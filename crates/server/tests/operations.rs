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
    // A write: the readiness probe writes its row.
    send(app.http.get(app.url("/readyz"))).await.expect(200);
    // A read of a collection.
    let (_, admin) = app.admin().await;
    send(app.get("/api/v2/group", &admin)).await.expect(200);
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
    if app.state.db.backend() == devicecloud_store::Backend::Sqlite {
        // SQLite writers wait in one queue, and how long is measured.
        assert!(
            text.contains("devicecloud_store_write_wait_seconds") && text.contains("waiter=\"prompt\""),
            "{text}"
        );
        // The page was read on the request's own thread.
        assert!(
            text.lines()
                .any(|l| l.starts_with("devicecloud_store_short_reads_total{") && l.contains("way=\"here\"")),
            "{text}"
        );
    }
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
        "/oauth2/revoke",
        "/api/v2/user",
        "/api/v2/user/me",
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
    assert!(paths["/api/v2/user/{id}"]["patch"].is_object());
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
    // The rate limit per account: its headers and its 429 on operations that need a token.
    let responses = &paths["/api/v2/group/index"]["get"]["responses"];
    assert!(
        responses["200"]["headers"]["X-Rate-Limit-Remaining"].is_object(),
        "{responses}"
    );
    assert!(responses["429"]["headers"]["Retry-After"].is_object(), "{responses}");
    assert!(paths["/oauth2/token"]["post"]["responses"]["429"].is_object());
    assert!(paths["/healthz"]["get"]["responses"]["429"].is_null());
}

/// The `src` and `href` values of a page, in order.
fn references(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    for attribute in ["src=\"", "href=\""] {
        let mut rest = html;
        while let Some(start) = rest.find(attribute) {
            rest = &rest[start + attribute.len()..];
            let end = rest.find('"').expect("a closing quote");
            found.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
    }
    found
}

#[tokio::test]
async fn the_api_reference_page_loads_everything_from_this_server() {
    let app = TestApp::spawn().await;
    let page_url = reqwest::Url::parse(&app.url("/api/docs")).unwrap();
    let page = send(app.http.get(page_url.clone())).await.expect(200);
    assert!(page.header("content-type").unwrap().starts_with("text/html"));
    let csp = page.header("content-security-policy").expect("a policy on the page");
    for directive in [
        "default-src 'self'",
        "script-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{csp}");
    assert!(page.text.contains("<div id=\"swagger-ui\">"), "{}", page.text);

    let refs = references(&page.text);
    assert!(refs.len() >= 5, "{refs:?}");
    for reference in &refs {
        // Relative to the page, so that a front end's path prefix is kept.
        assert!(
            !reference.starts_with('/') && !reference.contains("//") && !reference.contains(':'),
            "{reference} is not a same-origin relative address"
        );
        let url = page_url.join(reference).unwrap();
        assert_eq!(url.origin(), page_url.origin());
        let asset = send(app.http.get(url.clone())).await;
        assert_eq!(asset.status, 200, "{url}");
        let kind = asset.header("content-type").unwrap();
        let expected = match reference.rsplit('.').next().unwrap() {
            "css" => "text/css",
            "js" => "text/javascript",
            "png" => "image/png",
            other => panic!("unexpected asset {other}"),
        };
        assert!(kind.starts_with(expected), "{url}: {kind}");
        assert!(asset.header("content-security-policy").is_some(), "{url}");
    }

    // Swagger UI reads the document beside the page, which is the served one.
    let init = send(app.http.get(page_url.join("docs/swagger-initializer.js").unwrap()))
        .await
        .expect(200);
    assert!(init.text.contains("\"url\": \"v2/openapi.json\""), "{}", init.text);
    assert!(init.text.contains("\"validatorUrl\": \"none\""), "{}", init.text);
    let doc = send(app.http.get(page_url.join("v2/openapi.json").unwrap()))
        .await
        .expect(200);
    assert!(doc.json()["paths"]["/api/v2/group/index"]["get"]["security"][0]["bearer"].is_array());

    let missing = send(app.http.get(app.url("/api/docs/no-such-file.js"))).await;
    assert_eq!(missing.status, 404);
    // The relaxed policy stays on these paths: the dashboard keeps its own, the API has none.
    let login = send(app.http.get(app.url("/login"))).await.expect(200);
    assert_ne!(login.header("content-security-policy"), Some(csp));
    let health = send(app.http.get(app.url("/healthz"))).await.expect(200);
    assert!(health.header("content-security-policy").is_none());
}
