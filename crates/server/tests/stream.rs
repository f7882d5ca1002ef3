//! The live stream (`GET /api/v2/stream`, docs/api.md, "Live stream") over real HTTP, fed by
//! gateways over real MQTT: records shaped as the `data` and `event` endpoints', resuming with
//! `Last-Event-ID`, groups kept apart and rights checked while a client listens, `overflow` for a
//! slow reader, the heartbeat, command outcomes, and the refusals before a stream starts.

mod common;

use std::time::Duration;

use common::gateway_client::TestGateway;
use common::sse::{SseEvent, SseReader, parse};
use common::{TestApp, assert_error, send};
use devicecloud_protocol::ModuleKind;
use devicecloud_server::Settings;
use devicecloud_simulator::{Fleet, FleetOptions, Provisioner};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An administrator and a group with a connected gateway in it.
struct Setup {
    app: TestApp,
    admin: String,
    gw: TestGateway,
}

async fn setup(settings: Settings, serial: &str) -> Setup {
    let app = TestApp::spawn_with(settings).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, &format!("group of {serial}")).await;
    let gw = TestGateway::connect(&app, &admin, &group, serial, "PLUS").await;
    Setup { app, admin, gw }
}

/// The stream of `groups` as `token`, with `extra` query parameters and headers.
async fn open(app: &TestApp, token: &str, query: &str, last_id: Option<&str>) -> reqwest::Response {
    let mut request = app.get(&format!("/api/v2/stream?{query}"), token);
    if let Some(id) = last_id {
        request = request.header("Last-Event-ID", id);
    }
    request.send().await.unwrap()
}

async fn stream(app: &TestApp, token: &str, query: &str, last_id: Option<&str>) -> SseReader {
    SseReader::new(open(app, token, query, last_id).await)
}

fn of_group(group: &str) -> String {
    format!("filter[id_group]={group}")
}

/// The items of a collection GET.
async fn items(app: &TestApp, token: &str, path: &str) -> Vec<Value> {
    let reply = send(app.get(path, token)).await.expect(200);
    reply.json()["items"].as_array().unwrap().clone()
}

/// `n` records (comments skipped).
async fn records(reader: &mut SseReader, n: usize) -> Vec<SseEvent> {
    let mut seen = Vec::new();
    while seen.len() < n {
        seen.push(reader.record().await.expect("the stream ended early"));
    }
    seen
}

/// One measurement at `ts` with one value per datatype of `types`.
fn at(ts: i64, types: std::ops::Range<i64>) -> Value {
    let values: serde_json::Map<String, Value> = types.map(|t| (t.to_string(), json!(t as f64 + 0.5))).collect();
    json!([{"ts": ts, "values": values}])
}

/// A point published over MQTT arrives as the `data` endpoint's record, and an event as the
/// `event` endpoint's; `types` keeps the kinds apart.
#[tokio::test]
async fn committed_points_and_events_arrive_as_their_endpoints_records() {
    let mut s = setup(Settings::default(), "STREAM-GW-1").await;
    let group = s.gw.group.clone();
    let mut all = stream(&s.app, &s.admin, &of_group(&group), None).await;
    let mut only_events = stream(&s.app, &s.admin, &format!("{}&types=events", of_group(&group)), None).await;

    s.gw.measurements(&json!([{"ts": 1763726400.25, "values": {"12": 21.5, "13": 1013}}]))
        .await;
    s.gw.events(&json!([{"ts": 1763726401, "type": 310, "value": "1"}]))
        .await;

    let got = records(&mut all, 3).await;
    let names: Vec<&str> = got.iter().map(SseEvent::name).collect();
    assert_eq!(names, ["measurement", "measurement", "event"]);
    let ids: Vec<&str> = got
        .iter()
        .map(|e| e.id.as_deref().expect("every event has an id"))
        .collect();
    assert!(ids[0] != ids[1] && ids[1] != ids[2]);

    let mut data = items(
        &s.app,
        &s.admin,
        &format!("/api/v2/data?{}&sort=datatype", of_group(&group)),
    )
    .await;
    data.sort_by_key(|r| r["datatype"].as_i64());
    assert_eq!(vec![got[0].json(), got[1].json()], data);
    let event = &items(
        &s.app,
        &s.admin,
        &format!("/api/v2/event?filter[source_device]={}&filter[event_type]=310", s.gw.id),
    )
    .await[0];
    assert_eq!(&got[2].json(), event);

    let got = records(&mut only_events, 1).await;
    assert_eq!((got[0].name(), got[0].json()), ("event", event.clone()));
    assert!(only_events.records_for(Duration::from_millis(300)).await.is_empty());
}

/// A client that reconnects with `Last-Event-ID` gets exactly the records it missed, in
/// order; an id of another process cannot resume and answers `overflow`.
#[tokio::test]
async fn a_resume_yields_exactly_the_missed_records() {
    let mut s = setup(Settings::default(), "STREAM-GW-2").await;
    let query = format!("{}&types=measurements", of_group(&s.gw.group));
    let mut first = stream(&s.app, &s.admin, &query, None).await;
    s.gw.measurements(&at(1_763_726_400, 1..3)).await;
    let seen = records(&mut first, 2).await;
    let last = seen[1].id.clone().unwrap();
    drop(first);

    // Missed while disconnected: 3 + 4 points in two commits.
    s.gw.measurements(&at(1_763_726_401, 1..4)).await;
    s.gw.measurements(&at(1_763_726_402, 1..5)).await;
    let mut resumed = stream(&s.app, &s.admin, &query, Some(&last)).await;
    let missed = records(&mut resumed, 7).await;
    let times: Vec<(i64, i64)> = missed
        .iter()
        .map(|e| {
            (
                e.json()["timestamp_seconds"].as_i64().unwrap(),
                e.json()["datatype"].as_i64().unwrap(),
            )
        })
        .collect();
    let mut expected: Vec<(i64, i64)> = (1..4).map(|t| (1_763_726_401, t)).collect();
    expected.extend((1..5).map(|t| (1_763_726_402, t)));
    assert_eq!(times, expected);
    // Nothing twice, and nothing more until something new is committed.
    assert!(resumed.records_for(Duration::from_millis(300)).await.is_empty());
    s.gw.measurements(&at(1_763_726_403, 1..2)).await;
    assert_eq!(
        records(&mut resumed, 1).await[0].json()["timestamp_seconds"],
        1_763_726_403
    );

    // An id this process did not give (another process, before a restart) cannot resume.
    let mut foreign = stream(&s.app, &s.admin, &query, Some("00000000-5")).await;
    let event = foreign.record().await.unwrap();
    assert_eq!(event.name(), "overflow");
    assert!(foreign.next_within(Duration::from_secs(5)).await.is_none());
}

/// A viewer of one group never sees another group's records nor opens its stream; a role
/// removed ends the stream.
#[tokio::test]
async fn a_viewer_sees_only_their_groups_while_they_hold_them() {
    let mut s = setup(Settings::default(), "STREAM-GW-A").await;
    let group_a = s.gw.group.clone();
    let group_b = s.app.create_group(&s.admin, "group B").await;
    let mut gw_b = TestGateway::connect(&s.app, &s.admin, &group_b, "STREAM-GW-B", "CORE").await;
    let (viewer_id, viewer) = s.app.user().await;
    s.app.grant(&s.admin, &group_a, &viewer_id, "viewer").await;

    for query in [
        of_group(&group_b),
        format!("filter[id_group][in][]={group_a}&filter[id_group][in][]={group_b}"),
    ] {
        let reply = open(&s.app, &viewer, &query, None).await;
        assert_eq!(reply.status(), 404);
        assert_error(&reply.json().await.unwrap(), 404);
    }
    let mut seen_by_viewer = stream(&s.app, &viewer, &of_group(&group_a), None).await;
    let both = format!("filter[id_group][in][]={group_a}&filter[id_group][in][]={group_b}");
    let mut seen_by_admin = stream(&s.app, &s.admin, &both, None).await;

    gw_b.measurements(&at(1_763_726_500, 7..8)).await;
    s.gw.measurements(&at(1_763_726_501, 1..2)).await;
    let got = records(&mut seen_by_viewer, 1).await;
    assert_eq!(got[0].json()["id_group"], group_a.as_str());
    let got = records(&mut seen_by_admin, 2).await;
    assert_eq!(got[0].json()["id_group"], group_b.as_str());
    assert_eq!(got[1].json()["id_group"], group_a.as_str());
    assert!(seen_by_viewer.records_for(Duration::from_millis(300)).await.is_empty());

    // The role removed: the stream ends at once, and cannot be opened again.
    let path = format!("/api/v2/group/{group_a}/member/{viewer_id}");
    let reply = send(s.app.request(Method::DELETE, &path, &s.admin)).await;
    assert!(reply.status < 300, "{}", reply.text);
    s.gw.measurements(&at(1_763_726_502, 1..2)).await;
    assert!(
        seen_by_viewer.record().await.is_none(),
        "the stream went on after the role was removed"
    );
    assert_eq!(open(&s.app, &viewer, &of_group(&group_a), None).await.status(), 404);
}

/// A reader that does not keep up gets `event: overflow` and the end of the stream.
#[tokio::test]
async fn a_slow_reader_gets_overflow_and_is_closed() {
    let mut settings = Settings::default();
    settings.limits.stream_buffer_bytes = 8 * 1024;
    let mut s = setup(settings, "STREAM-GW-SLOW").await;
    // A raw connection with a small receive buffer, read only once the gateway is done.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let address = s.app.base.trim_start_matches("http://").parse().unwrap();
    let mut slow = socket.connect(address).await.unwrap();
    let request = format!(
        "GET /api/v2/stream?{} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nAuthorization: Bearer {}\r\n\r\n",
        of_group(&s.gw.group),
        s.admin
    );
    slow.write_all(request.as_bytes()).await.unwrap();
    // Subscribed once the head of the answer is there (one peek, nothing consumed).
    let mut first = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(10), slow.peek(&mut first))
        .await
        .unwrap()
        .unwrap();
    for i in 0..20 {
        s.gw.measurements(&at(1_763_726_600 + i, 1..400)).await;
    }
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), slow.read_to_end(&mut answer))
        .await
        .expect("the stream was not closed")
        .unwrap();
    let text = String::from_utf8_lossy(&answer);
    let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
    let events: Vec<SseEvent> = dechunk(body)
        .split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(parse)
        .collect();
    let last = events.last().unwrap();
    assert_eq!(
        last.name(),
        "overflow",
        "{:?}",
        &events[events.len().saturating_sub(3)..]
    );
    let measurements = events.iter().filter(|e| e.name() == "measurement").count();
    assert!(measurements < 20 * 399, "every record arrived: {measurements}");
}

/// The body of a chunked answer.
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

/// A comment line comes at the configured interval, records or not, and a stream outlives the
/// time bounds of ordinary requests.
#[tokio::test]
async fn comment_lines_keep_the_stream_alive() {
    let mut settings = Settings {
        stream_heartbeat: Duration::from_millis(200),
        ..Settings::default()
    };
    settings.limits.query_timeout = Duration::from_secs(1);
    settings.limits.http_header_timeout = Duration::from_secs(1);
    let s = setup(settings, "STREAM-GW-BEAT").await;
    let mut reader = stream(&s.app, &s.admin, &of_group(&s.gw.group), None).await;
    let mut comments = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(2500);
    while let Ok(event) = tokio::time::timeout_at(deadline, reader.next()).await {
        let event = event.expect("the stream ended");
        assert!(event.comment.is_some(), "{event:?}");
        comments += 1;
    }
    assert!((9..=13).contains(&comments), "{comments} comment lines in 2.5 s");
}

/// A command's outcome arrives as `event: command`, with the event that records it.
#[tokio::test]
async fn a_command_outcome_arrives() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "commands").await;
    let spec = Provisioner::new(&app.base, &admin)
        .gateway(&group, "STREAM-CMD-1", ModuleKind::Plus)
        .await
        .expect("provisioned");
    let id = spec.id.clone().unwrap();
    let fleet = Fleet::start(vec![spec], FleetOptions::new(app.mqtt_addr, Duration::ZERO));
    assert!(fleet.wait_connected(1, Duration::from_secs(20)).await);
    let mut commands = stream(&app, &admin, &format!("{}&types=commands", of_group(&group)), None).await;

    send(app.get(&format!("/api/v2/physical-device/{id}/ping"), &admin))
        .await
        .expect(200);
    let got = records(&mut commands, 1).await;
    assert_eq!(got[0].name(), "command");
    let outcome = got[0].json();
    let keys: Vec<&str> = outcome.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "id_physical_device",
            "method",
            "status",
            "device_status",
            "reason",
            "duration_ms",
            "requested_at"
        ]
    );
    assert_eq!(
        (&outcome["id_physical_device"], &outcome["method"], &outcome["status"]),
        (&json!(id), &json!("ping"), &json!(200))
    );
    assert_eq!(
        (&outcome["device_status"], &outcome["reason"]),
        (&json!(200), &Value::Null)
    );
    assert!(outcome["duration_ms"].as_u64().is_some() && outcome["requested_at"].as_i64().is_some());

    // A gateway that is not online: `status` is still the integer the caller got, the reason in
    // a field of its own.
    let body = json!({"id_group": group, "serial_hardware": "STREAM-CMD-OFF", "kind": "CORE"});
    let offline = send(app.request(Method::POST, "/api/v2/physical-device", &admin).json(&body))
        .await
        .expect(201)
        .json()["id_physical_device"]
        .as_str()
        .unwrap()
        .to_string();
    send(app.get(&format!("/api/v2/physical-device/{offline}/ping"), &admin))
        .await
        .expect(404);
    let got = records(&mut commands, 1).await;
    let outcome = got[0].json();
    assert_eq!(
        (&outcome["status"], &outcome["device_status"], &outcome["reason"]),
        (&json!(404), &Value::Null, &json!("offline"))
    );
}

/// Refusals come before the stream, with the specification's error body.
#[tokio::test]
async fn bad_requests_get_the_error_body() {
    let s = setup(Settings::default(), "STREAM-GW-BAD").await;
    let group = of_group(&s.gw.group);
    let refused = [
        (None, group.clone(), None, 401),
        (Some("not-a-token"), group.clone(), None, 401),
        (Some(s.admin.as_str()), String::new(), None, 400),
        (Some(s.admin.as_str()), "filter[datatype]=1".into(), None, 422),
        (
            Some(s.admin.as_str()),
            format!("filter[id_group][neq]={}", s.gw.group),
            None,
            422,
        ),
        (Some(s.admin.as_str()), format!("{group}&types=points"), None, 422),
        (Some(s.admin.as_str()), of_group("no-such-group"), None, 404),
        (Some(s.admin.as_str()), group.clone(), Some("last"), 400),
    ];
    for (token, query, last_id, status) in refused {
        let mut request = s.app.http.get(s.app.url(&format!("/api/v2/stream?{query}")));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(id) = last_id {
            request = request.header("Last-Event-ID", id);
        }
        let reply = send(request).await;
        assert_eq!(reply.status, status, "{query}: {}", reply.text);
        if status == 422 {
            // Validation errors list the fields (docs/api.md, "Errors").
            let fields = reply.json();
            assert!(
                fields[0]["field"].is_string() && fields[0]["message"].is_string(),
                "{fields}"
            );
        } else {
            assert_error(&reply.json(), status);
        }
    }
}
