//! The served OpenAPI document describes the answers the service really gives: each JSON answer
//! below, taken over real HTTP, is checked against the schema the document declares for its
//! operation and status (on SQLite, and on PostgreSQL when `DEVICECLOUD_TEST_DATABASE_URL` is
//! set). A field added to a record without its schema, or a type changed, fails here.

mod common;

use common::send;
use common::webhook_receiver::{Receiver, setup};
use reqwest::Method;
use serde_json::{Value, json};

/// Checks `value` against `schema`, resolving `$ref` in `doc`; returns what does not match.
fn mismatches(doc: &Value, schema: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.trim_start_matches("#/components/schemas/");
        let target = &doc["components"]["schemas"][name];
        assert!(!target.is_null(), "{reference} is not in the document");
        return mismatches(doc, target, value, at, out);
    }
    if let Some(options) = schema["anyOf"].as_array() {
        let fits = options.iter().any(|option| {
            let mut inner = Vec::new();
            mismatches(doc, option, value, at, &mut inner);
            inner.is_empty()
        });
        if !fits {
            out.push(format!("{at}: {value} matches no option of {schema}"));
        }
        return;
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let type_of = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let fits_type = types.is_empty() || types.contains(&type_of) || (type_of == "integer" && types.contains(&"number"));
    if !fits_type {
        out.push(format!("{at}: {value} is {type_of}, the document says {types:?}"));
        return;
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        out.push(format!("{at}: {value} is not one of {allowed:?}"));
    }
    match value {
        Value::Object(map) => {
            for required in schema["required"].as_array().into_iter().flatten() {
                if !map.contains_key(required.as_str().unwrap()) {
                    out.push(format!("{at}: {required} is missing"));
                }
            }
            for (key, field) in map {
                let declared = &schema["properties"][key];
                let field_schema = if declared.is_null() {
                    &schema["additionalProperties"]
                } else {
                    declared
                };
                if field_schema.is_object() {
                    mismatches(doc, field_schema, field, &format!("{at}.{key}"), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(max) = schema["maxItems"].as_u64()
                && items.len() as u64 > max
            {
                out.push(format!("{at}: more than {max} items"));
            }
            for (i, item) in items.iter().enumerate() {
                mismatches(doc, &schema["items"], item, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The document's schema of the JSON answer `status` of `method path`.
fn answer_schema<'a>(doc: &'a Value, method: &str, path: &str, status: u16) -> &'a Value {
    let schema = &doc["paths"][path][method]["responses"][status.to_string()]["content"]["application/json"]["schema"];
    assert!(
        schema.is_object(),
        "the document has no JSON schema for {method} {path} {status}"
    );
    schema
}

#[tokio::test]
async fn every_json_answer_matches_the_document() {
    let s = setup().await;
    let (app, admin) = (&s.app, s.admin.as_str());
    let doc = send(app.http.get(app.url("/api/v2/openapi.json")))
        .await
        .expect(200)
        .json();

    // Some of everything: points, an event, a webhook with an attempt, a member, a retention.
    s.measure(json!([{"ts": 1_763_726_400, "values": {"1": 21.5, "2": 7}}]))
        .await;
    let event = app
        .http
        .post(app.url("/gateway/v1/events"))
        .basic_auth(&s.serial, Some(&s.device_token))
        .json(&json!({"type": 310, "value": "1"}));
    let event = send(event).await.expect(200).json();
    let (receiver, url) = Receiver::start(Vec::new()).await;
    let webhook = s.webhook(s.hook_body("measurements", "json", &url)).await;
    let hook = webhook["id_webhook"].as_str().unwrap().to_string();
    s.measure_n(5).await;
    receiver.until("a delivery", |got| !got.is_empty()).await;
    let viewer = app.create_user("reader@example.com", "reader-password", false).await;
    let (group, device) = (s.group.clone(), s.device.clone());

    let mut checked: Vec<(String, String, &str, u16, Value)> = vec![
        (
            "post".into(),
            "/gateway/v1/events".into(),
            "/gateway/v1/events",
            200,
            event,
        ),
        ("post".into(), "/api/v2/webhook".into(), "/api/v2/webhook", 201, webhook),
    ];
    let reads: Vec<(Method, String, &str, u16, Option<Value>)> = vec![
        (Method::GET, "/api/v2/group".into(), "/api/v2/group", 200, None),
        (
            Method::GET,
            "/api/v2/group/index?fields=id,label".into(),
            "/api/v2/group/index",
            200,
            None,
        ),
        (
            Method::GET,
            format!("/api/v2/group/{group}"),
            "/api/v2/group/{id}",
            200,
            None,
        ),
        (
            Method::GET,
            format!("/api/v2/group/{group}?fields=bogus"),
            "/api/v2/group/{id}",
            200,
            None,
        ),
        (
            Method::PATCH,
            format!("/api/v2/group/{group}"),
            "/api/v2/group/{id}",
            200,
            Some(json!({"label": "Plant 2", "type": 3})),
        ),
        (
            Method::PUT,
            format!("/api/v2/group/{group}/retention"),
            "/api/v2/group/{id}/retention",
            200,
            Some(json!({"raw_days": "30"})),
        ),
        (
            Method::PUT,
            format!("/api/v2/group/{group}/member/{viewer}"),
            "/api/v2/group/{id}/member/{id_user}",
            200,
            Some(json!({"role": "viewer"})),
        ),
        (
            Method::GET,
            "/api/v2/physical-device?expand=group,parent".into(),
            "/api/v2/physical-device",
            200,
            None,
        ),
        (
            Method::GET,
            format!("/api/v2/physical-device/{device}"),
            "/api/v2/physical-device/{id}",
            200,
            None,
        ),
        (
            Method::PATCH,
            format!("/api/v2/physical-device/{device}"),
            "/api/v2/physical-device/{id}",
            200,
            Some(json!({"expected_offline_interval": "600"})),
        ),
        (
            Method::GET,
            format!("/api/v2/data?filter[id_group]={group}"),
            "/api/v2/data",
            200,
            None,
        ),
        (
            Method::GET,
            format!("/api/v2/data?filter[id_group]={group}&fields=nothing"),
            "/api/v2/data",
            200,
            None,
        ),
        (
            Method::GET,
            format!("/api/v2/data-downsampled?filter[id_group]={group}"),
            "/api/v2/data-downsampled",
            200,
            None,
        ),
        (Method::GET, "/api/v2/event".into(), "/api/v2/event", 200, None),
        (
            Method::GET,
            "/api/v2/event-type".into(),
            "/api/v2/event-type",
            200,
            None,
        ),
        (
            Method::GET,
            "/api/v2/data-session".into(),
            "/api/v2/data-session",
            200,
            None,
        ),
        (Method::GET, "/api/v2/user".into(), "/api/v2/user", 200, None),
        (Method::GET, "/api/v2/user/me".into(), "/api/v2/user/me", 200, None),
        (
            Method::GET,
            "/api/v2/webhook?expand=backlog".into(),
            "/api/v2/webhook",
            200,
            None,
        ),
        (
            Method::GET,
            format!("/api/v2/webhook/{hook}/attempt"),
            "/api/v2/webhook/{id}/attempt",
            200,
            None,
        ),
        (
            Method::GET,
            "/api/v2/webhook-formatter".into(),
            "/api/v2/webhook-formatter",
            200,
            None,
        ),
        (
            Method::GET,
            format!("/api/v2/physical-device/{device}/ping"),
            "/api/v2/physical-device/{id}/ping",
            404,
            None,
        ),
        (
            Method::GET,
            "/api/v2/group/index?filter[nope]=1".into(),
            "/api/v2/group/index",
            422,
            None,
        ),
        (
            Method::POST,
            "/api/v2/group".into(),
            "/api/v2/group",
            422,
            Some(json!({})),
        ),
        (Method::GET, "/healthz".into(), "/healthz", 200, None),
    ];
    for (method, url, path, status, body) in reads {
        let mut request = app.request(method.clone(), &url, admin);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = send(request).await.expect(status).json();
        checked.push((method.as_str().to_ascii_lowercase(), url, path, status, answer));
    }
    let mut problems = Vec::new();
    for (method, url, path, status, answer) in &checked {
        let schema = answer_schema(&doc, method, path, *status);
        mismatches(&doc, schema, answer, &format!("{method} {url}"), &mut problems);
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
