//! Errors everywhere: unknown routes, wrong methods, oversized and malformed bodies, bytes that
//! are not UTF-8, huge and deep filters, SQL metacharacters in every parameter. Every answer is
//! the specification's error body (or a success), never a 500.

mod common;

use common::{Reply, TestApp, assert_error, assert_error_exact, enc, keys, send};
use devicecloud_server::Settings;
use reqwest::Method;
use serde_json::json;

/// Asserts a 4xx answer with the specification's error body.
fn assert_client_error(reply: &Reply, what: &str) {
    assert!(
        (400..500).contains(&reply.status),
        "{what}: status {} body {}",
        reply.status,
        reply.text
    );
    assert_error(&reply.json(), reply.status);
}

/// Asserts an answer that is not a server error; a 4xx carries an error body (the 422 of a
/// filter a list), a 200 a JSON body.
fn assert_handled(reply: &Reply, what: &str) {
    assert!(
        reply.status < 500,
        "{what}: status {} body {}",
        reply.status,
        reply.text
    );
    if reply.text.is_empty() {
        return;
    }
    let body = reply.json();
    match reply.status {
        422 => assert!(body.is_array() || body.is_object(), "{what}: {body}"),
        400..=499 => assert_error(&body, reply.status),
        _ => {}
    }
}

#[tokio::test]
async fn unknown_routes_are_404() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let expected = json!({"name": "Not Found", "message": "Page not found.", "code": 0, "status": 404});
    // `/` is the dashboard (see tests/dashboard.rs); everything unknown is the API's 404.
    for path in [
        "/nothing",
        "/api/v2/nothing",
        "/api/v3/group",
        "/api/v2/group/a/b/c",
        "/oauth2/other",
        "/oauth2/revoke",
    ] {
        for token in [None, Some(admin.as_str())] {
            let mut request = app.http.get(app.url(path));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let reply = send(request).await;
            if path == "/oauth2/revoke" {
                // Served for POST only: a wrong method, not an unknown route.
                assert_eq!(reply.status, 405, "{path}");
                continue;
            }
            assert_eq!(reply.status, 404, "{path}: {}", reply.text);
            assert!(
                reply.header("content-type").unwrap().starts_with("application/json"),
                "{path}"
            );
            assert_eq!(reply.json(), expected, "{path}");
        }
    }
}

#[tokio::test]
async fn wrong_methods_are_405_with_allow() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let id = app.create_group(&admin, "G").await;
    let cases = [
        (Method::PUT, "/api/v2/group/index".to_string(), vec!["GET", "HEAD"]),
        (Method::POST, "/api/v2/group/index".to_string(), vec!["GET", "HEAD"]),
        (Method::DELETE, "/api/v2/group".to_string(), vec!["GET", "HEAD", "POST"]),
        (Method::PUT, "/api/v2/group".to_string(), vec!["GET", "HEAD", "POST"]),
        (
            Method::POST,
            format!("/api/v2/group/{id}"),
            vec!["GET", "HEAD", "PATCH", "DELETE"],
        ),
        (Method::GET, "/oauth2/token".to_string(), vec!["POST"]),
        (Method::DELETE, "/api/v2/user".to_string(), vec!["GET", "HEAD", "POST"]),
        (Method::GET, "/oauth2/revoke".to_string(), vec!["POST"]),
        (
            Method::DELETE,
            "/api/v2/user/me".to_string(),
            vec!["GET", "HEAD", "PATCH"],
        ),
        (Method::POST, "/healthz".to_string(), vec!["GET", "HEAD"]),
    ];
    for (method, path, methods) in cases {
        for token in [None, Some(admin.as_str())] {
            let mut request = app.http.request(method.clone(), app.url(&path));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let reply = send(request).await;
            let what = format!("{method} {path}");
            assert_eq!(reply.status, 405, "{what}: {}", reply.text);
            let allow = reply
                .header("allow")
                .unwrap_or_else(|| panic!("{what}: an Allow header"));
            let mut listed: Vec<&str> = allow.split(", ").collect();
            listed.sort();
            let mut expected = methods.clone();
            expected.sort();
            assert_eq!(listed, expected, "{what}: Allow {allow:?}");
            let body = reply.json();
            assert_error_exact(
                &body,
                405,
                "Method Not Allowed",
                &format!("Method Not Allowed. This URL can only handle the following request methods: {allow}."),
            );
        }
    }
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let settings = Settings {
        max_body_bytes: 1024,
        ..Settings::default()
    };
    let app = TestApp::spawn_with(settings).await;
    let (_, admin) = app.admin().await;
    let big_label = "x".repeat(4096);
    let cases = [
        (
            Method::POST,
            "/api/v2/group".to_string(),
            json!({"label": big_label}).to_string(),
            "application/json",
        ),
        (
            Method::GET,
            "/api/v2/group/index".to_string(),
            json!({"filter": {"label": big_label}}).to_string(),
            "application/json",
        ),
        (
            Method::POST,
            "/api/v2/user".to_string(),
            json!({"username": big_label, "password": "12345678"}).to_string(),
            "application/json",
        ),
        (
            Method::POST,
            "/oauth2/token".to_string(),
            format!("grant_type=password&username={big_label}"),
            "application/x-www-form-urlencoded",
        ),
    ];
    for (method, path, body, content_type) in cases {
        let reply = send(
            app.request(method.clone(), &path, &admin)
                .header("Content-Type", content_type)
                .body(body),
        )
        .await;
        let what = format!("{method} {path}");
        assert_eq!(reply.status, 413, "{what}: {}", reply.text);
        let body = reply.json();
        assert_error(&body, 413);
        assert!(body["name"].as_str().is_some_and(|n| !n.is_empty()), "{what}");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}");
    }
    // Authentication comes first: without a token a big body is a 401.
    let reply = send(
        app.http
            .post(app.url("/api/v2/group"))
            .json(&json!({"label": big_label})),
    )
    .await;
    assert_eq!(reply.status, 401);
    // Nothing was created, and a body under the limit passes.
    assert_eq!(app.group_rows().await, 0);
    send(
        app.request(Method::POST, "/api/v2/group", &admin)
            .json(&json!({"label": "small"})),
    )
    .await
    .expect(201);
}

#[tokio::test]
async fn a_multipart_token_request_over_the_limit_is_413() {
    let app = TestApp::spawn_with(Settings {
        max_body_bytes: 1024,
        ..Settings::default()
    })
    .await;
    let form = reqwest::multipart::Form::new()
        .text("grant_type", "password")
        .text("username", "x".repeat(4096));
    let reply = send(app.http.post(app.url("/oauth2/token")).multipart(form)).await;
    assert_eq!(reply.status, 413, "{}", reply.text);
    assert_error(&reply.json(), 413);
}

#[tokio::test]
async fn malformed_json_on_writes_is_400() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let id = app.create_group(&admin, "G").await;
    let targets = [
        (Method::POST, "/api/v2/group".to_string()),
        (Method::PATCH, format!("/api/v2/group/{id}")),
        (Method::POST, "/api/v2/user".to_string()),
    ];
    for (method, path) in targets {
        for text in ["{", "{\"label\": }", "nope", "[1, 2", "\u{0}"] {
            let reply = send(
                app.request(method.clone(), &path, &admin)
                    .header("Content-Type", "application/json")
                    .body(text),
            )
            .await;
            let what = format!("{method} {path} {text:?}");
            assert_eq!(reply.status, 400, "{what}: {}", reply.text);
            let body = reply.json();
            assert_error(&body, 400);
            assert_eq!(body["name"], "Bad Request", "{what}");
        }
        // JSON that is not an object.
        for text in ["[1]", "\"x\"", "5"] {
            let reply = send(
                app.request(method.clone(), &path, &admin)
                    .header("Content-Type", "application/json")
                    .body(text),
            )
            .await;
            let what = format!("{method} {path} {text:?}");
            assert!(
                reply.status == 400 || reply.status == 422,
                "{what}: {} {}",
                reply.status,
                reply.text
            );
            assert_handled(&reply, &what);
        }
        // Bytes that are not UTF-8.
        let reply = send(
            app.request(method.clone(), &path, &admin)
                .header("Content-Type", "application/json")
                .body(vec![b'{', 0xFF, 0xFE, b'}']),
        )
        .await;
        assert_eq!(reply.status, 400, "{method} {path} non-UTF-8: {}", reply.text);
        assert_error(&reply.json(), 400);
    }
    assert_eq!(app.group_rows().await, 1);
}

#[tokio::test]
async fn non_utf8_bytes_in_the_path_and_the_query() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    app.create_group(&admin, "G").await;
    let paths = [
        "/api/v2/group/%FF",
        "/api/v2/group/%FF%FE",
        "/api/v2/group/%C3%28",
        "/api/v2/group/%FF/member/%FF",
        "/api/v2/%FF",
        "/%FF",
    ];
    for path in paths {
        for method in [Method::GET, Method::PATCH, Method::DELETE, Method::PUT] {
            let reply = send(
                app.request(method.clone(), path, &admin)
                    .json(&json!({"label": "x", "role": "viewer"})),
            )
            .await;
            let what = format!("{method} {path}");
            assert_client_error(&reply, &what);
        }
    }
    let queries = [
        "filter[label]=%FF",
        "filter[label][like]=%FF%FE",
        "filter[%FF]=1",
        "filter[created_at]=%FF",
        "sort=%FF",
        "sort=-%FF",
        "fields=%FF",
        "expand=%FF",
        "page=%FF",
        "per-page=%FF",
        "%FF=%FF",
        "filter[label][in][%FF]=x",
    ];
    for query in queries {
        for path in ["/api/v2/group/index", "/api/v2/group"] {
            let reply = send(app.get(&format!("{path}?{query}"), &admin)).await;
            assert_handled(&reply, &format!("{path}?{query}"));
        }
    }
    // A non-UTF-8 token and a form body with bad bytes.
    let reply = send(app.http.get(app.url("/api/v2/group")).header(
        "Authorization",
        reqwest::header::HeaderValue::from_bytes(b"Bearer \xFF\xFE").unwrap(),
    ))
    .await;
    assert_eq!(reply.status, 401);
    assert_error(&reply.json(), 401);
    let reply = send(
        app.http
            .post(app.url("/oauth2/token"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(b"grant_type=%FF&client_id=\xFF".to_vec()),
    )
    .await;
    assert_client_error(&reply, "token with bad bytes");
    assert_eq!(app.group_rows().await, 1);
}

#[tokio::test]
async fn huge_and_deep_filters_are_handled() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    app.create_group(&admin, "G").await;
    // A 10,000-character value.
    let long = "a".repeat(10_000);
    for query in [
        format!("filter[label][like]={long}"),
        format!("filter[label]={long}"),
        format!("filter[{long}]=1"),
        format!("sort={long}"),
        format!("fields={long}"),
    ] {
        let reply = send(app.get(&format!("/api/v2/group/index?{query}"), &admin)).await;
        assert_handled(&reply, &query[..40]);
    }
    // A long list.
    let many: Vec<String> = (0..2_000).map(|i| format!("filter[label][in][]=v{i}")).collect();
    let reply = send(app.get(&format!("/api/v2/group/index?{}", many.join("&")), &admin)).await;
    assert_handled(&reply, "2000 in values");
    let many: Vec<String> = (0..300).map(|i| format!("filter[or][{i}][label]=v{i}")).collect();
    let reply = send(app.get(&format!("/api/v2/group/index?{}", many.join("&")), &admin)).await;
    assert_handled(&reply, "300 or branches");
    // 300 levels deep, in the URL.
    for depth in [30, 300] {
        let mut key = "filter".to_string();
        for _ in 0..depth {
            key.push_str("[and][0]");
        }
        let reply = send(app.get(&format!("/api/v2/group/index?{key}[label]=G"), &admin)).await;
        assert_handled(&reply, &format!("{depth} deep and"));
        let mut key = "filter".to_string();
        for _ in 0..depth {
            key.push_str("[not]");
        }
        let reply = send(app.get(&format!("/api/v2/group/index?{key}[label]=G"), &admin)).await;
        assert_handled(&reply, &format!("{depth} deep not"));
    }
    // … and in a JSON body.
    for depth in [30, 100, 300] {
        let mut filter = json!({"label": "G"});
        for _ in 0..depth {
            filter = json!({"and": [filter]});
        }
        let reply = send(
            app.get("/api/v2/group/index", &admin)
                .header("Content-Type", "application/json")
                .body(json!({"filter": filter}).to_string()),
        )
        .await;
        assert_handled(&reply, &format!("{depth} deep JSON"));
        let text = format!("{}{}", "[".repeat(depth * 10), "]".repeat(depth * 10));
        let reply = send(
            app.get("/api/v2/group/index", &admin)
                .header("Content-Type", "application/json")
                .body(text),
        )
        .await;
        assert_handled(&reply, &format!("{depth}0 nested JSON arrays"));
    }
    // The shallow one still filters.
    let mut key = "filter".to_string();
    for _ in 0..5 {
        key.push_str("[and][0]");
    }
    let body = send(app.get(&format!("/api/v2/group/index?{key}[label]=G"), &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(body["_meta"]["totalCount"], 1);
}

#[tokio::test]
async fn sql_metacharacters_are_only_data() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let tricky = "it's \"quoted\"; -- 100% _x_ \\ DROP TABLE groups;";
    let id = app.create_group(&admin, tricky).await;
    app.create_group(&admin, "plain").await;
    let nasty = [
        "'",
        "\"",
        ";",
        "--",
        "%",
        "_",
        "\\",
        "' OR '1'='1",
        "1; DROP TABLE groups; --",
        "\" OR 1=1 --",
        "1) OR (1=1",
        "%' --",
        "groups.label",
        "label DESC; DELETE FROM groups",
    ];
    for value in nasty {
        let v = enc(value);
        let queries = [
            format!("filter[label]={v}"),
            format!("filter[label][like]={v}"),
            format!("filter[label][neq]={v}"),
            format!("filter[label][in][]={v}&filter[label][in][]=plain"),
            format!("filter[label][nin][]={v}"),
            format!("filter[id]={v}"),
            format!("filter[id_country]={v}"),
            format!("filter[created_at]={v}"),
            format!("filter[created_at][gt]={v}"),
            format!("filter[{v}]=1"),
            format!("filter[label][{v}]=1"),
            format!("filter[or][0][label]={v}&filter[or][1][label]=plain"),
            format!("sort={v}"),
            format!("sort=-{v}"),
            format!("sort={v},label"),
            format!("fields={v}"),
            format!("fields=id,{v}"),
            format!("expand={v}"),
            format!("page={v}"),
            format!("per-page={v}"),
            format!("{v}={v}"),
        ];
        for query in &queries {
            let reply = send(app.get(&format!("/api/v2/group/index?{query}"), &admin)).await;
            assert_handled(&reply, query);
        }
        // In path ids, read and write.
        let path = format!("/api/v2/group/{v}");
        for method in [Method::GET, Method::PATCH, Method::DELETE] {
            let reply = send(
                app.request(method.clone(), &path, &admin)
                    .json(&json!({"label": value})),
            )
            .await;
            assert_handled(&reply, &format!("{method} {path}"));
            assert_eq!(reply.status, 404, "{method} {path}: {}", reply.text);
        }
        let reply = send(
            app.request(Method::PUT, &format!("/api/v2/group/{id}/member/{v}"), &admin)
                .json(&json!({"role": value})),
        )
        .await;
        assert_handled(&reply, &format!("member {value}"));
        let reply = send(
            app.request(Method::PUT, &format!("/api/v2/group/{id}/member/{v}"), &admin)
                .json(&json!({"role": "viewer"})),
        )
        .await;
        assert_eq!(reply.status, 404, "member {value}: {}", reply.text);
        // In a JSON-body filter.
        let reply = send(
            app.get("/api/v2/group/index", &admin)
                .header("Content-Type", "application/json")
                .body(json!({"filter": {"label": {"like": value}}, "sort": value}).to_string()),
        )
        .await;
        assert_handled(&reply, &format!("body {value}"));
        // In OAuth fields.
        let reply = app
            .token_reply(&[
                ("grant_type", "password"),
                ("client_id", value),
                ("client_secret", value),
                ("username", value),
                ("password", value),
            ])
            .await;
        assert_eq!(reply.status, 400, "token {value}: {}", reply.text);
        let reply = app
            .token_reply(&[
                ("grant_type", "password"),
                ("client_id", &app.client_id),
                ("client_secret", &app.client_secret),
                ("username", value),
                ("password", value),
            ])
            .await;
        assert_eq!(reply.status, 401, "token {value}: {}", reply.text);
    }
    // The tricky label is data: exact and literal matches find it, and only it.
    let body = send(app.get(&format!("/api/v2/group/index?filter[label]={}", enc(tricky)), &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(body["_meta"]["totalCount"], 1);
    assert_eq!(body["items"][0]["id"], id);
    for part in ["it's", "\"quoted\";", "100%", "_x_", "\\", "-- 100"] {
        let body = send(app.get(
            &format!("/api/v2/group/index?filter[label][like]={}", enc(part)),
            &admin,
        ))
        .await
        .expect(200)
        .json();
        assert_eq!(body["_meta"]["totalCount"], 1, "like {part:?}");
    }
    // The table is intact: both groups are there, with their labels.
    assert_eq!(app.group_rows().await, 2);
    let record = send(app.get(&format!("/api/v2/group/{id}"), &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(record["label"], tricky);
    let all = send(app.get("/api/v2/group/index", &admin)).await.expect(200).json();
    assert_eq!(all["_meta"]["totalCount"], 2);
    assert_eq!(keys(&all), ["items", "_links", "_meta", "expand"]);
}

#[tokio::test]
async fn garbage_token_requests_are_400() {
    let app = TestApp::spawn().await;
    let garbage: Vec<(&str, Vec<u8>)> = vec![
        (
            "application/x-www-form-urlencoded",
            b"\x00\x01\x02garbage&&&==".to_vec(),
        ),
        ("application/x-www-form-urlencoded", b"%%%%".to_vec()),
        ("application/x-www-form-urlencoded", b"grant_type[]=password".to_vec()),
        ("application/json", b"{not json".to_vec()),
        ("application/json", b"[1,2,3]".to_vec()),
        ("application/json", b"{\"grant_type\": 5}".to_vec()),
        ("multipart/form-data; boundary=xyz", b"this is not multipart".to_vec()),
        ("multipart/form-data", b"--\r\n".to_vec()),
        ("text/plain", b"grant_type password".to_vec()),
        ("application/octet-stream", vec![0xFF; 64]),
    ];
    for (content_type, body) in garbage {
        let reply = send(
            app.http
                .post(app.url("/oauth2/token"))
                .header("Content-Type", content_type)
                .body(body.clone()),
        )
        .await;
        let what = format!("{content_type} {:?}", String::from_utf8_lossy(&body));
        assert_eq!(reply.status, 400, "{what}: {}", reply.text);
        let body = reply.json();
        assert_error(&body, 400);
        assert!(body["error"].is_string(), "{what}: {body}");
    }
    // No content type at all.
    let reply = send(app.http.post(app.url("/oauth2/token")).body("grant_type=password")).await;
    assert_client_error(&reply, "no content type");
    // GET is not served.
    let reply = send(app.http.get(app.url("/oauth2/token?grant_type=password"))).await;
    assert_eq!(reply.status, 405);
    assert_eq!(reply.header("allow"), Some("POST"));
    assert_error(&reply.json(), 405);
}

#[tokio::test]
async fn nul_characters_are_never_a_server_error() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let id = app.create_group(&admin, "G").await;
    for query in [
        "filter[label]=%00",
        "filter[label][like]=a%00",
        "filter[label][in][]=a%00b",
        "filter[id]=%00",
        "filter[id_country][neq]=%00",
    ] {
        let reply = send(app.get(&format!("/api/v2/group/index?{query}"), &admin)).await;
        assert_handled(&reply, query);
    }
    for path in ["/api/v2/group/%00", "/api/v2/group/a%00b"] {
        let reply = send(app.get(path, &admin)).await;
        assert_handled(&reply, path);
    }
    let reply = send(
        app.request(Method::PUT, &format!("/api/v2/group/{id}/member/%00"), &admin)
            .json(&json!({"role": "viewer"})),
    )
    .await;
    assert_handled(&reply, "member %00");
    for body in [json!({"label": "a\u{0}b"}), json!({"label": "ok", "subtype": "\u{0}"})] {
        let reply = send(app.request(Method::POST, "/api/v2/group", &admin).json(&body)).await;
        assert_handled(&reply, &body.to_string());
        let reply = send(
            app.request(Method::PATCH, &format!("/api/v2/group/{id}"), &admin)
                .json(&body),
        )
        .await;
        assert_handled(&reply, &body.to_string());
    }
    let reply = send(
        app.request(Method::POST, "/api/v2/user", &admin)
            .json(&json!({"username": "a\u{0}b@example.com", "password": "long enough"})),
    )
    .await;
    assert_handled(&reply, "username with NUL");
    let reply = app
        .token_reply(&[
            ("grant_type", "password"),
            ("client_id", &app.client_id),
            ("client_secret", &app.client_secret),
            ("username", "a\u{0}b"),
            ("password", "x"),
        ])
        .await;
    assert_eq!(reply.status, 401, "token, username with NUL: {}", reply.text);
    let reply = app
        .token_reply(&[
            ("grant_type", "password"),
            ("client_id", "a\u{0}b"),
            ("client_secret", "x"),
            ("username", "u"),
            ("password", "x"),
        ])
        .await;
    assert_eq!(reply.status, 400, "token, client id with NUL: {}", reply.text);
    let reply = send(
        app.get("/api/v2/group/index", &admin)
            .header("Content-Type", "application/json")
            .body(json!({"filter": {"label": "\u{0}"}}).to_string()),
    )
    .await;
    assert_handled(&reply, "body filter with NUL");
    // Whatever was accepted lists without a server error.
    let all = send(app.get("/api/v2/group/index", &admin)).await.expect(200).json();
    assert_eq!(all["_meta"]["totalCount"], app.group_rows().await);
}

#[tokio::test]
async fn json_answers_name_their_charset_as_yii_does() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "charset").await;
    for (path, status) in [
        ("/api/v2/group/index".to_string(), 200),
        (format!("/api/v2/group/{group}"), 200),
        ("/api/v2/group/no-such-group".to_string(), 404),
        ("/api/v2/no-such-route".to_string(), 404),
    ] {
        let reply = send(app.get(&path, &admin)).await;
        assert_eq!(reply.status, status, "{path}");
        assert_eq!(
            reply.header("content-type"),
            Some("application/json; charset=UTF-8"),
            "{path}"
        );
    }
    let reply = send(app.get("/api/v2/group/index", "bad-token")).await;
    assert_eq!(reply.status, 401);
    assert_eq!(reply.header("content-type"), Some("application/json; charset=UTF-8"));
}

#[tokio::test]
async fn a_filter_attribute_is_never_ignored_whatever_bytes_its_name_holds() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "nul").await;
    for collection in [
        "/api/v2/group/index",
        "/api/v2/physical-device",
        "/api/v2/data-session",
        "/api/v2/event",
        "/api/v2/webhook",
        "/api/v2/webhook-formatter",
        "/api/v2/data",
        "/api/v2/data-downsampled",
    ] {
        for junk in ["filter[%00abc]=1", "filter[label%00]=1", "filter[label=1"] {
            let path = format!("{collection}?filter[id_group]={group}&{junk}");
            let reply = send(app.get(&path, &admin)).await;
            assert_eq!(reply.status, 422, "{path}: {}", reply.text);
            let body = reply.json();
            assert_eq!(body[0]["field"], "filter", "{body}");
            assert!(
                body[0]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("Unknown filter attribute"),
                "{body}"
            );
        }
    }
}
