//! Absolute URLs behind a reverse proxy (docs/operations.md, "Behind a reverse proxy"): the
//! public URL when set, otherwise the forwarded scheme and host from trusted proxies only,
//! otherwise the request's own; and the dashboard cookie's `Secure` flag follows the same rule.

mod common;

use common::{TestApp, send};
use devicecloud_server::{FrontEnd, Settings};
use reqwest::Method;
use serde_json::{Value, json};

fn behind(public_url: Option<&str>, proxies: &[&str]) -> Settings {
    Settings {
        front_end: FrontEnd {
            public_url: public_url.map(|u| FrontEnd::public_url(u).unwrap()),
            trusted_proxies: proxies.iter().map(|p| p.parse().unwrap()).collect(),
        },
        ..Settings::default()
    }
}

/// Every absolute URL of a collection page and of a created record.
async fn urls(app: &TestApp, token: &str, headers: &[(&str, &str)]) -> Vec<String> {
    let mut list = app.get("/api/v2/group?per-page=1", token);
    let mut create = app
        .request(Method::POST, "/api/v2/group", token)
        .json(&json!({"label": "linked"}));
    for (k, v) in headers {
        list = list.header(*k, *v);
        create = create.header(*k, *v);
    }
    let page = send(list).await.expect(200);
    let body: Value = page.json();
    let mut out: Vec<String> = ["self", "first", "last", "next"]
        .iter()
        .filter_map(|rel| body["_links"][rel]["href"].as_str().map(str::to_string))
        .collect();
    out.extend(
        page.header("link")
            .unwrap()
            .split(", ")
            .map(|part| part.split(['<', '>']).nth(1).unwrap().to_string()),
    );
    let created = send(create).await.expect(201);
    out.push(created.header("location").unwrap().to_string());
    out
}

async fn with_groups(settings: Settings) -> (TestApp, String) {
    let app = TestApp::spawn_with(settings).await;
    let (_, admin) = app.admin().await;
    for label in ["a", "b", "c"] {
        app.create_group(&admin, label).await;
    }
    (app, admin)
}

const FORWARDED_HTTPS: [(&str, &str); 3] = [
    ("x-forwarded-proto", "https"),
    ("x-forwarded-host", "iot.example.com"),
    ("x-forwarded-for", "203.0.113.9"),
];

#[tokio::test]
async fn forwarded_headers_from_an_untrusted_peer_change_nothing() {
    let (app, admin) = with_groups(Settings::default()).await;
    let own = app.url("");
    for url in urls(&app, &admin, &FORWARDED_HTTPS).await {
        assert!(url.starts_with(&format!("{own}/api/v2/group")), "{url}");
    }
    let rfc = [("forwarded", "for=203.0.113.9;proto=https;host=iot.example.com")];
    for url in urls(&app, &admin, &rfc).await {
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    }
}

#[tokio::test]
async fn a_trusted_proxy_gives_the_scheme_and_host_of_every_link() {
    let (app, admin) = with_groups(behind(None, &["127.0.0.0/8"])).await;
    let found = urls(&app, &admin, &FORWARDED_HTTPS).await;
    assert_eq!(found.len(), 9, "{found:?}");
    for url in &found {
        assert!(url.starts_with("https://iot.example.com/api/v2/group"), "{url}");
    }
    let rfc = [("forwarded", "for=203.0.113.9;proto=https;host=\"iot.example.com:8443\"")];
    for url in urls(&app, &admin, &rfc).await {
        assert!(url.starts_with("https://iot.example.com:8443/api/v2/group"), "{url}");
    }
    // No forwarding headers: the request's own host.
    for url in urls(&app, &admin, &[]).await {
        assert!(url.starts_with(&app.url("/api/v2/group")), "{url}");
    }
}

#[tokio::test]
async fn the_public_url_is_the_base_of_every_link() {
    let (app, admin) = with_groups(behind(Some("https://example.com/devicecloud/"), &["127.0.0.1/32"])).await;
    for headers in [&FORWARDED_HTTPS[..], &[]] {
        for url in urls(&app, &admin, headers).await {
            assert!(url.starts_with("https://example.com/devicecloud/api/v2/group"), "{url}");
        }
    }
}

/// The `Set-Cookie` of the dashboard's sign-in form, with the given request headers.
async fn login_cookie(app: &TestApp, headers: &[(&str, &str)]) -> String {
    let mut request = reqwest::Client::new().get(app.url("/login"));
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let reply = send(request).await.expect(200);
    reply.header("set-cookie").unwrap().to_string()
}

#[tokio::test]
async fn the_dashboard_cookie_is_secure_only_over_https() {
    let open = TestApp::spawn().await;
    assert!(!login_cookie(&open, &FORWARDED_HTTPS).await.contains("Secure"));
    let proxied = TestApp::spawn_with(behind(None, &["127.0.0.1/32"])).await;
    assert!(login_cookie(&proxied, &FORWARDED_HTTPS).await.contains("; Secure"));
    assert!(!login_cookie(&proxied, &[]).await.contains("Secure"));
    let public = TestApp::spawn_with(behind(Some("https://iot.example.com"), &[])).await;
    assert!(login_cookie(&public, &[]).await.contains("; Secure"));
}
