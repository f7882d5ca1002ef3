//! Alarm rules and alarms (docs/api.md, "Alarms") over real HTTP and real MQTT: the records,
//! every refusal (a condition that does not compile names its position), thresholds raised,
//! counted and cleared, `for_s`, hysteresis, backfill and resends left out, acknowledgement,
//! inactivity, events 230–232, the stream's `alarm` event, rights, and a restart.

mod common;

use std::time::Duration;

use common::gateway_client::TestGateway;
use common::sse::SseReader;
use common::{TestApp, assert_error, keys, send};
use devicecloud_engine::settings::Settings;
use reqwest::Method;
use serde_json::{Value, json};

const SOON: Duration = Duration::from_secs(10);

async fn create_rule(app: &TestApp, token: &str, body: Value) -> common::Reply {
    send(app.request(Method::POST, "/api/v2/alarm-rule", token).json(&body)).await
}

async fn rule(app: &TestApp, token: &str, body: Value) -> String {
    let reply = create_rule(app, token, body).await.expect(201);
    reply.json()["id_alarm_rule"].as_str().unwrap().to_string()
}

/// The alarms of `device`, newest first.
async fn alarms_of(app: &TestApp, token: &str, device: &str) -> Vec<Value> {
    let path = format!("/api/v2/alarm?filter[source_device]={device}");
    send(app.get(&path, token)).await.expect(200).json()["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// Waits until the alarms of `device` satisfy `done`; returns them.
async fn alarms_until(app: &TestApp, token: &str, device: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let alarms = alarms_of(app, token, device).await;
        if done(&alarms) {
            return alarms;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "alarms never got there: {alarms:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The events of `device` of `event_type`, oldest first.
async fn events(app: &TestApp, token: &str, device: &str, event_type: i64) -> Vec<Value> {
    let path = format!("/api/v2/event?filter[source_device]={device}&filter[event_type]={event_type}&sort=id_event");
    send(app.get(&path, token)).await.expect(200).json()["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// A point of datatype 12 at `ts`.
fn point(ts: i64, value: f64) -> Value {
    json!([{"ts": ts, "values": {"12": value}}])
}

struct Setup {
    app: TestApp,
    admin: String,
    group: String,
    gw: TestGateway,
}

async fn setup(serial: &str) -> Setup {
    setup_with(serial, Settings::default()).await
}

async fn setup_with(serial: &str, settings: Settings) -> Setup {
    let app = TestApp::spawn_with(settings).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, &format!("alarms of {serial}")).await;
    let gw = TestGateway::connect(&app, &admin, &group, serial, "PLUS").await;
    Setup { app, admin, group, gw }
}

#[tokio::test]
async fn a_rule_is_stored_as_given_and_read_back() {
    let s = setup("AL-1").await;
    let body = json!({"id_group": s.group, "label": "Hot", "severity": "major", "condition": "value > 30.0",
        "datatype": 12, "source_device": s.gw.id, "clear_condition": "value < 25.0", "for_s": 60});
    let created = create_rule(&s.app, &s.admin, body).await.expect(201);
    let record = created.json();
    assert_eq!(
        keys(&record),
        [
            "id_alarm_rule",
            "id_group",
            "label",
            "severity",
            "condition",
            "clear_condition",
            "inactivity_s",
            "datatype",
            "source_device",
            "for_s",
            "is_active",
            "created_at",
            "updated_at",
            "created_by",
            "_links"
        ]
    );
    let id = record["id_alarm_rule"].as_str().unwrap();
    assert!(
        created
            .header("location")
            .unwrap()
            .ends_with(&format!("/api/v2/alarm-rule/{id}"))
    );
    assert_eq!(
        (
            &record["condition"],
            &record["for_s"],
            &record["is_active"],
            &record["inactivity_s"]
        ),
        (&json!("value > 30.0"), &json!(60), &json!(1), &Value::Null)
    );
    let read = send(s.app.get(&format!("/api/v2/alarm-rule/{id}"), &s.admin))
        .await
        .expect(200);
    assert_eq!(read.json(), record);

    let changed = send(
        s.app
            .request(Method::PATCH, &format!("/api/v2/alarm-rule/{id}"), &s.admin)
            .json(&json!({"label": "Very hot", "clear_condition": null, "for_s": 0})),
    )
    .await
    .expect(200)
    .json();
    assert_eq!(
        (
            &changed["label"],
            &changed["clear_condition"],
            &changed["for_s"],
            &changed["condition"]
        ),
        (&json!("Very hot"), &Value::Null, &json!(0), &json!("value > 30.0"))
    );
    let listed = send(s.app.get("/api/v2/alarm-rule", &s.admin)).await.expect(200).json();
    assert_eq!(listed["_meta"]["totalCount"], json!(1));
    assert_eq!(listed["items"][0]["label"], json!("Very hot"));

    send(
        s.app
            .request(Method::DELETE, &format!("/api/v2/alarm-rule/{id}"), &s.admin),
    )
    .await
    .expect(204);
    let gone = send(s.app.get(&format!("/api/v2/alarm-rule/{id}"), &s.admin))
        .await
        .expect(404);
    assert_error(&gone.json(), 404);
}

/// The field errors of a 422 answer, as (field, message).
fn field_errors(reply: &common::Reply) -> Vec<(String, String)> {
    assert_eq!(reply.status, 422, "{}", reply.text);
    reply
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["field"].as_str().unwrap().to_string(),
                e["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_rule_that_cannot_work_is_refused_with_where_and_why() {
    let s = setup("AL-2").await;
    let base = json!({"id_group": s.group, "label": "x", "severity": "minor"});
    let with = |extra: Value| {
        let mut body = base.clone();
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let syntax = field_errors(&create_rule(&s.app, &s.admin, with(json!({"condition": "value >"}))).await);
    assert_eq!(syntax[0].0, "condition");
    assert!(syntax[0].1.contains("line 1, column 8"), "{}", syntax[0].1);
    let unknown = field_errors(
        &create_rule(
            &s.app,
            &s.admin,
            with(json!({"condition": "value > 1.0 && temp > 2.0"})),
        )
        .await,
    );
    assert!(
        unknown[0].1.contains("column 16") && unknown[0].1.contains("temp"),
        "{}",
        unknown[0].1
    );
    let number = field_errors(&create_rule(&s.app, &s.admin, with(json!({"condition": "value * 2.0"}))).await);
    assert!(number[0].1.contains("not a boolean"), "{}", number[0].1);
    let clear = field_errors(
        &create_rule(
            &s.app,
            &s.admin,
            with(json!({"condition": "value > 1.0", "clear_condition": "(("})),
        )
        .await,
    );
    assert_eq!(clear[0].0, "clear_condition");
    let both = field_errors(
        &create_rule(
            &s.app,
            &s.admin,
            with(json!({"condition": "value > 1.0", "inactivity_s": 60})),
        )
        .await,
    );
    assert_eq!(both[0].0, "inactivity_s");
    let neither = field_errors(&create_rule(&s.app, &s.admin, base.clone()).await);
    assert_eq!(neither[0].0, "condition");
    let severity = field_errors(
        &create_rule(
            &s.app,
            &s.admin,
            with(json!({"condition": "value > 1.0", "severity": "loud"})),
        )
        .await,
    );
    assert_eq!(severity[0].0, "severity");
    let device = field_errors(
        &create_rule(
            &s.app,
            &s.admin,
            with(json!({"condition": "value > 1.0", "source_device": "nope"})),
        )
        .await,
    );
    assert_eq!(device[0].0, "source_device");
    let silent_clear = field_errors(
        &create_rule(
            &s.app,
            &s.admin,
            with(json!({"inactivity_s": 60, "clear_condition": "value > 1.0"})),
        )
        .await,
    );
    assert_eq!(silent_clear[0].0, "clear_condition");
    let no_group = field_errors(
        &create_rule(
            &s.app,
            &s.admin,
            json!({"label": "x", "severity": "minor", "condition": "value > 1.0"}),
        )
        .await,
    );
    assert_eq!(no_group[0].0, "id_group");
    assert_eq!(
        send(s.app.get("/api/v2/alarm-rule", &s.admin)).await.expect(200).json()["_meta"]["totalCount"],
        json!(0)
    );
}

#[tokio::test]
async fn a_group_holds_at_most_alarm_rules_per_group() {
    let mut settings = Settings::default();
    settings.limits.alarm_rules_per_group = 2;
    let s = setup_with("AL-3", settings).await;
    for n in 0..2 {
        rule(
            &s.app,
            &s.admin,
            json!({"id_group": s.group, "label": format!("r{n}"), "severity": "warning", "condition": "value > 1.0"}),
        )
        .await;
    }
    let third = create_rule(
        &s.app,
        &s.admin,
        json!({"id_group": s.group, "label": "r3", "severity": "warning", "condition": "value > 1.0"}),
    )
    .await;
    let errors = field_errors(&third);
    assert_eq!(errors[0].0, "id_group");
    assert!(errors[0].1.contains('2'), "{}", errors[0].1);
}

#[tokio::test]
async fn a_threshold_raises_counts_and_clears_with_its_events_and_stream_records() {
    let mut s = setup("AL-4").await;
    let id_rule = rule(
        &s.app,
        &s.admin,
        json!({"id_group": s.group, "label": "Hot", "severity": "critical",
        "condition": "value > 30.0", "datatype": 12}),
    )
    .await;
    let stream = s
        .app
        .get(
            &format!("/api/v2/stream?filter[id_group]={}&types=alarms", s.group),
            &s.admin,
        )
        .send()
        .await
        .unwrap();
    let mut stream = SseReader::new(stream);

    let t = 1_763_726_400;
    s.gw.measurements(&point(t, 20.0)).await;
    // Another datatype is not this rule's.
    s.gw.measurements(&json!([{"ts": t + 1, "values": {"13": 99.0}}])).await;
    assert!(alarms_of(&s.app, &s.admin, &s.gw.id).await.is_empty());
    s.gw.measurements(&point(t + 2, 31.5)).await;
    let raised = stream.record().await.expect("an alarm record on the stream");
    assert_eq!(raised.name(), "alarm");
    let record = raised.json();
    assert_eq!(
        (
            &record["status"],
            &record["count"],
            &record["value"],
            &record["severity"]
        ),
        (&json!("active"), &json!(1), &json!(31.5), &json!("critical"))
    );
    assert_eq!(record["id_alarm_rule"], json!(id_rule));

    let alarms = alarms_of(&s.app, &s.admin, &s.gw.id).await;
    assert_eq!(alarms.len(), 1);
    assert_eq!(
        keys(&alarms[0]),
        [
            "id_alarm",
            "id_alarm_rule",
            "id_group",
            "source_device",
            "datatype",
            "severity",
            "status",
            "raised_at",
            "acknowledged_at",
            "acknowledged_by",
            "cleared_at",
            "value",
            "count",
            "_links"
        ]
    );
    assert_eq!(
        (&alarms[0]["datatype"], &alarms[0]["source_device"]),
        (&json!(12), &json!(s.gw.id))
    );

    // Repeated matches add to the open alarm; a resent message adds nothing.
    s.gw.measurements(&point(t + 3, 35.0)).await;
    s.gw.measurements(&point(t + 4, 40.0)).await;
    s.gw.measurements(&point(t + 4, 40.0)).await;
    let counted = alarms_until(&s.app, &s.admin, &s.gw.id, |a| a[0]["count"] == json!(3)).await;
    assert_eq!(counted[0]["value"], json!(40.0));
    assert_eq!(counted.len(), 1);

    s.gw.measurements(&point(t + 5, 10.0)).await;
    let cleared = alarms_until(&s.app, &s.admin, &s.gw.id, |a| a[0]["status"] == json!("cleared")).await;
    assert!(cleared[0]["cleared_at"].as_i64().is_some());
    assert_eq!(cleared[0]["count"], json!(3));

    let raised_events = events(&s.app, &s.admin, &s.gw.id, 230).await;
    let cleared_events = events(&s.app, &s.admin, &s.gw.id, 232).await;
    assert_eq!((raised_events.len(), cleared_events.len()), (1, 1));
    assert_eq!(raised_events[0]["value"], json!("critical"));
    assert_eq!(raised_events[0]["from_device"], json!(0));
    assert_eq!(raised_events[0]["event_value_description"], json!("Hot"));

    // A new match after the clear raises a new alarm.
    s.gw.measurements(&point(t + 6, 50.0)).await;
    let again = alarms_until(&s.app, &s.admin, &s.gw.id, |a| a.len() == 2).await;
    assert_eq!((&again[0]["status"], &again[0]["count"]), (&json!("active"), &json!(1)));
    let active = send(s.app.get("/api/v2/alarm?filter[status]=active", &s.admin))
        .await
        .expect(200)
        .json();
    assert_eq!(active["_meta"]["totalCount"], json!(1));
}

#[tokio::test]
async fn backfill_is_not_evaluated() {
    let mut s = setup("AL-5").await;
    rule(
        &s.app,
        &s.admin,
        json!({"id_group": s.group, "label": "Hot", "severity": "minor", "condition": "value > 30.0"}),
    )
    .await;
    let t = 1_763_726_400;
    s.gw.measurements(&point(t, 1.0)).await;
    s.gw.measurements(&point(t - 100, 99.0)).await;
    // A point after it proves the backfill was passed over (evaluation is in commit order).
    s.gw.measurements(&json!([{"ts": t + 1, "values": {"13": 1.0}}])).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(alarms_of(&s.app, &s.admin, &s.gw.id).await.is_empty());
}

#[tokio::test]
async fn for_s_and_a_clear_condition_shape_when_an_alarm_is_raised_and_cleared() {
    let mut s = setup("AL-6").await;
    rule(
        &s.app,
        &s.admin,
        json!({"id_group": s.group, "label": "Hot", "severity": "major",
        "condition": "value > 30.0", "clear_condition": "value < 25.0", "for_s": 10}),
    )
    .await;
    let t = 1_763_726_400;
    s.gw.measurements(&point(t, 31.0)).await;
    s.gw.measurements(&point(t + 5, 32.0)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        alarms_of(&s.app, &s.admin, &s.gw.id).await.is_empty(),
        "raised before for_s"
    );
    s.gw.measurements(&point(t + 10, 33.0)).await;
    alarms_until(&s.app, &s.admin, &s.gw.id, |a| a.len() == 1).await;
    // Between the two conditions: stays raised.
    s.gw.measurements(&point(t + 11, 28.0)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        alarms_of(&s.app, &s.admin, &s.gw.id).await[0]["status"],
        json!("active")
    );
    s.gw.measurements(&point(t + 12, 24.0)).await;
    alarms_until(&s.app, &s.admin, &s.gw.id, |a| a[0]["status"] == json!("cleared")).await;
}

#[tokio::test]
async fn an_operator_acknowledges_and_the_alarm_stays_acknowledged_until_it_clears() {
    let mut s = setup("AL-7").await;
    rule(
        &s.app,
        &s.admin,
        json!({"id_group": s.group, "label": "Hot", "severity": "warning", "condition": "value > 30.0"}),
    )
    .await;
    let (viewer_id, viewer) = s.app.user().await;
    s.app.grant(&s.admin, &s.group, &viewer_id, "viewer").await;
    let t = 1_763_726_400;
    s.gw.measurements(&point(t, 31.0)).await;
    let alarms = alarms_until(&s.app, &s.admin, &s.gw.id, |a| a.len() == 1).await;
    let id = alarms[0]["id_alarm"].as_str().unwrap().to_string();
    let path = format!("/api/v2/alarm/{id}/acknowledge");

    // A viewer sees it but may not acknowledge it.
    send(s.app.get(&format!("/api/v2/alarm/{id}"), &viewer))
        .await
        .expect(200);
    let refused = send(s.app.request(Method::POST, &path, &viewer)).await.expect(401);
    assert_error(&refused.json(), 401);

    let acked = send(s.app.request(Method::POST, &path, &s.admin))
        .await
        .expect(200)
        .json();
    assert_eq!(acked["status"], json!("acknowledged"));
    assert!(acked["acknowledged_at"].as_i64().is_some());
    assert!(acked["acknowledged_by"].as_str().is_some());
    let again = send(s.app.request(Method::POST, &path, &s.admin))
        .await
        .expect(200)
        .json();
    assert_eq!(again, acked);
    assert_eq!(events(&s.app, &s.admin, &s.gw.id, 231).await.len(), 1);

    s.gw.measurements(&point(t + 1, 35.0)).await;
    let counted = alarms_until(&s.app, &s.admin, &s.gw.id, |a| a[0]["count"] == json!(2)).await;
    assert_eq!(counted[0]["status"], json!("acknowledged"));
    s.gw.measurements(&point(t + 2, 1.0)).await;
    alarms_until(&s.app, &s.admin, &s.gw.id, |a| a[0]["status"] == json!("cleared")).await;

    // Another tenant sees nothing of it.
    s.app.create_user("stranger", "a-long-password", false).await;
    let stranger = s.app.token("stranger", "a-long-password").await;
    send(s.app.get(&format!("/api/v2/alarm/{id}"), &stranger))
        .await
        .expect(404);
    let none = send(s.app.get("/api/v2/alarm", &stranger)).await.expect(200).json();
    assert_eq!(none["_meta"]["totalCount"], json!(0));
}

#[tokio::test]
async fn a_silent_device_raises_an_inactivity_alarm_and_its_next_point_clears_it() {
    let mut s = setup("AL-8").await;
    rule(
        &s.app,
        &s.admin,
        json!({"id_group": s.group, "label": "Silent", "severity": "major", "inactivity_s": 2}),
    )
    .await;
    let t = devicecloud_store::unix_now();
    s.gw.measurements(&point(t, 5.0)).await;
    let metrics = send(s.app.get("/metrics", &s.admin)).await.expect(200).text;
    assert!(metrics.contains("devicecloud_alarm_watches"), "{metrics}");
    let raised = alarms_until(&s.app, &s.admin, &s.gw.id, |a| a.len() == 1).await;
    assert_eq!(
        (&raised[0]["datatype"], &raised[0]["value"], &raised[0]["status"]),
        (&Value::Null, &Value::Null, &json!("active"))
    );
    s.gw.measurements(&point(t + 5, 6.0)).await;
    alarms_until(&s.app, &s.admin, &s.gw.id, |a| a[0]["status"] == json!("cleared")).await;
    assert_eq!(events(&s.app, &s.admin, &s.gw.id, 230).await.len(), 1);
}

#[tokio::test]
async fn disabling_a_rule_clears_its_open_alarms() {
    let mut s = setup("AL-9").await;
    let id_rule = rule(
        &s.app,
        &s.admin,
        json!({"id_group": s.group, "label": "Hot", "severity": "minor", "condition": "value > 30.0"}),
    )
    .await;
    s.gw.measurements(&point(1_763_726_400, 31.0)).await;
    alarms_until(&s.app, &s.admin, &s.gw.id, |a| a.len() == 1).await;
    send(
        s.app
            .request(Method::PATCH, &format!("/api/v2/alarm-rule/{id_rule}"), &s.admin)
            .json(&json!({"is_active": false})),
    )
    .await
    .expect(200);
    let alarms = alarms_of(&s.app, &s.admin, &s.gw.id).await;
    assert_eq!(alarms[0]["status"], json!("cleared"));
    assert_eq!(events(&s.app, &s.admin, &s.gw.id, 232).await.len(), 1);
    // Inactive, it raises nothing.
    s.gw.measurements(&point(1_763_726_401, 99.0)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(alarms_of(&s.app, &s.admin, &s.gw.id).await.len(), 1);
}

#[tokio::test]
async fn a_restart_goes_on_from_what_the_store_holds() {
    let s = setup("AL-10").await;
    let Setup {
        app,
        admin,
        group,
        mut gw,
    } = s;
    rule(
        &app,
        &admin,
        json!({"id_group": group, "label": "Jump", "severity": "major",
        "condition": "previous != null && value - previous > 5.0", "datatype": 12}),
    )
    .await;
    rule(
        &app,
        &admin,
        json!({"id_group": group, "label": "Hot", "severity": "minor", "condition": "value > 100.0", "datatype": 12}),
    )
    .await;
    let t = 1_763_726_400;
    gw.measurements(&point(t, 10.0)).await;
    gw.measurements(&point(t + 1, 150.0)).await;
    alarms_until(&app, &admin, &gw.id, |a| a.len() == 2).await;
    let (id, serial, token) = (gw.id.clone(), gw.serial.clone(), gw.token.clone());
    gw.disconnect().await;

    let app = app.restart(Settings::default()).await;
    let mut gw = TestGateway::reconnect(&app, &id, &group, &serial, &token).await;
    // `previous` is the point stored before the restart (150 → 160 is a jump: the open "Jump"
    // alarm counts it; without it the condition would not hold and the alarm would clear), and
    // both alarms are known open, so their matches add to them instead of raising new ones.
    gw.measurements(&point(t + 2, 160.0)).await;
    let counted = alarms_until(&app, &admin, &id, |a| a.iter().all(|a| a["count"] == json!(2))).await;
    assert_eq!(counted.len(), 2, "{counted:#?}");
    assert!(counted.iter().all(|a| a["status"] == json!("active")));
    gw.measurements(&point(t + 3, 50.0)).await;
    let cleared = alarms_until(&app, &admin, &id, |a| a.iter().all(|a| a["status"] == json!("cleared"))).await;
    assert_eq!(cleared.len(), 2, "{cleared:#?}");
}
