//! Filters with very many branches. In a test binary of their own: a stack overflow in the
//! service aborts the whole process, and would take every other test of the binary with it.

mod common;

use common::{TestApp, assert_error, send};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn many_or_branches_are_never_a_server_error() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    app.create_group(&admin, "v7").await;
    // The largest filter accepted must work on both databases; larger ones are a 422.
    let largest = devicecloud_query::filter::MAX_CONDITIONS;
    for n in [largest, largest + 1, 500, 999] {
        let many: Vec<String> = (0..n).map(|i| format!("filter[or][{i}][label]=v{i}")).collect();
        let path = format!("/api/v2/group/index?{}", many.join("&"));
        for method in [Method::GET, Method::HEAD] {
            let reply = send(app.request(method.clone(), &path, &admin)).await;
            assert!(
                reply.status < 500,
                "{method} {n} or-branches: {} {}",
                reply.status,
                reply.text
            );
            assert_eq!(
                reply.status == 200,
                n <= largest,
                "{method} {n} or-branches: {}",
                reply.status
            );
            if reply.status == 200 && method == Method::GET {
                assert_eq!(reply.json()["_meta"]["totalCount"], 1, "{n} or-branches find v7");
            }
        }
    }
    // A JSON body is not bound by the query string's limit on variables.
    for n in [1_000, 2_000, 5_000] {
        let branches: Vec<_> = (0..n).map(|i| json!({"label": format!("v{i}")})).collect();
        let body = json!({"filter": {"or": branches}}).to_string();
        let reply = send(
            app.get("/api/v2/group/index", &admin)
                .header("Content-Type", "application/json")
                .body(body),
        )
        .await;
        assert!(
            reply.status < 500,
            "JSON {n} or-branches: {} {}",
            reply.status,
            reply.text
        );
        if reply.status != 200 {
            let body = reply.json();
            if !body.is_array() {
                assert_error(&body, reply.status);
            }
        }
    }
    // The same with and.
    let many: Vec<String> = (0..999).map(|i| format!("filter[and][{i}][label][neq]=w{i}")).collect();
    let reply = send(app.get(&format!("/api/v2/group/index?{}", many.join("&")), &admin)).await;
    assert!(reply.status < 500, "999 and-branches: {} {}", reply.status, reply.text);
}
