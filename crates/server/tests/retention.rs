//! `GET`/`PUT /api/v2/group/<id>/retention` over real HTTP, and the retention task on points
//! published over real MQTT: what is past a group's retention leaves `data`, every band of
//! `data-downsampled`, the session's CSV, and nothing newer does (docs/api.md, "Retention").

mod common;

use std::time::Duration;

use common::gateway_client::TestGateway;
use common::{TestApp, assert_error, send};
use devicecloud_server::Settings;
use devicecloud_store::retention::Retention;
use reqwest::Method;
use serde_json::{Value, json};

const DAY: i64 = 86_400;

fn path(group: &str) -> String {
    format!("/api/v2/group/{group}/retention")
}

#[tokio::test]
async fn managers_read_and_change_a_groups_retention() {
    let defaults = Retention {
        raw_days: Some(30),
        ..Retention::default()
    };
    let app = TestApp::spawn_with(Settings {
        retention: devicecloud_engine::settings::RetentionDefaults {
            raw_days: defaults.raw_days,
            ..Default::default()
        },
        ..Settings::default()
    })
    .await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "kept").await;

    let got = send(app.get(&path(&group), &admin)).await.expect(200).json();
    assert_eq!(
        got,
        json!({"raw_days": 30, "minute_days": null, "hour_days": null, "day_days": null})
    );
    let keys: Vec<&String> = got.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["raw_days", "minute_days", "hour_days", "day_days"]);

    // A field left out keeps its value; null keeps forever; numbers may come as text.
    let put = |body: Value| app.request(Method::PUT, &path(&group), &admin).json(&body);
    let changed = send(put(json!({"minute_days": 90, "hour_days": "400"})))
        .await
        .expect(200)
        .json();
    assert_eq!(
        changed,
        json!({"raw_days": 30, "minute_days": 90, "hour_days": 400, "day_days": null})
    );
    let changed = send(put(json!({"raw_days": null}))).await.expect(200).json();
    assert_eq!(changed["raw_days"], Value::Null);
    assert_eq!(send(app.get(&path(&group), &admin)).await.expect(200).json(), changed);

    // Every bad value is reported at once, and nothing changes.
    let bad = send(put(
        json!({"raw_days": 0, "minute_days": 1.5, "hour_days": "x", "day_days": 36_501}),
    ))
    .await
    .expect(422)
    .json();
    let fields: Vec<(&str, &str)> = bad
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["field"].as_str().unwrap(), e["message"].as_str().unwrap()))
        .collect();
    assert_eq!(
        fields,
        [
            ("raw_days", "Raw Days must be no less than 1."),
            ("minute_days", "Minute Days must be an integer."),
            ("hour_days", "Hour Days must be an integer."),
            ("day_days", "Day Days must be no greater than 36500."),
        ]
    );
    assert_eq!(send(app.get(&path(&group), &admin)).await.expect(200).json(), changed);
    let not_json = send(app.request(Method::PUT, &path(&group), &admin).body("[1]")).await;
    assert_eq!(not_json.status, 400);
    assert_error(&not_json.json(), 400);

    // Managers only; a group the caller cannot see is not found.
    let (id_user, user) = app.user().await;
    let hidden = send(app.get(&path(&group), &user)).await;
    assert_eq!(hidden.status, 404);
    assert_error(&hidden.json(), 404);
    for role in ["viewer", "operator"] {
        app.grant(&admin, &group, &id_user, role).await;
        let refused = send(app.get(&path(&group), &user)).await;
        assert_eq!(refused.status, 401, "{role}");
        assert_error(&refused.json(), 401);
        assert_eq!(
            send(
                app.request(Method::PUT, &path(&group), &user)
                    .json(&json!({"raw_days": 1}))
            )
            .await
            .status,
            401
        );
    }
    app.grant(&admin, &group, &id_user, "manager").await;
    let managed = send(
        app.request(Method::PUT, &path(&group), &user)
            .json(&json!({"day_days": 3650})),
    )
    .await
    .expect(200)
    .json();
    assert_eq!(managed["day_days"], 3650);
    assert_eq!(send(app.get(&path("no-such-group"), &admin)).await.status, 404);
    assert_eq!(send(app.http.get(app.url(&path(&group)))).await.status, 401);
}

/// Points `from`, `from + 60`, … (`n` of them) of datatype 12, as one measurements message.
fn minutes(from: i64, n: i64) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"ts": from + i * 60, "values": {"12": i as f64}}))
            .collect(),
    )
}

async fn rows(app: &TestApp, token: &str, query: &str) -> Vec<Value> {
    let reply = send(app.get(query, token)).await.expect(200).json();
    reply["items"].as_array().cloned().unwrap_or_else(|| panic!("{reply}"))
}

#[tokio::test]
async fn the_task_removes_what_is_past_retention_from_every_answer_and_keeps_the_rest() {
    let app = TestApp::spawn_with(Settings {
        retention_interval: Duration::from_millis(300),
        ..Settings::default()
    })
    .await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "expiring").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "RETAIN-GO-1", "GO").await;
    gw.hello("GO", json!({})).await;
    let now = devicecloud_store::unix_now();
    let midnight = now.div_euclid(DAY) * DAY;
    // Ten points three days back and ten in the last hour, all in the session the hello opened.
    let old = midnight - 3 * DAY + 3_600;
    gw.measurements(&minutes(old, 10)).await;
    gw.measurements(&minutes(now - 700, 10)).await;

    let data = format!("/api/v2/data?filter[id_group]={group}&per-page=1000");
    assert_eq!(rows(&app, &admin, &data).await.len(), 20);
    let session = rows(&app, &admin, "/api/v2/data-session").await[0].clone();
    let id_session = session["id_data_session"].as_str().unwrap().to_string();
    assert_eq!(session["isArchived"], false);

    // Raw points kept today and yesterday, minute rollups two days; hours and days forever.
    send(
        app.request(Method::PUT, &path(&group), &admin)
            .json(&json!({"raw_days": 1, "minute_days": 2})),
    )
    .await
    .expect(200);
    let downsampled = |from: i64, to: i64| {
        format!(
            "/api/v2/data-downsampled?filter[id_group]={group}&filter[timestamp_seconds][gt]={from}&filter[timestamp_seconds][lt]={to}&per-page=10000"
        )
    };
    // The pass removes the raw points, then the minute rollups: wait for both.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while rows(&app, &admin, &data).await.len() != 10
        || !rows(&app, &admin, &downsampled(old - 3_600, old + 7_200))
            .await
            .is_empty()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task did not remove the old points"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kept = rows(&app, &admin, &data).await;
    assert!(
        kept.iter()
            .all(|p| p["timestamp_seconds"].as_i64().unwrap() >= now - 700)
    );

    let counted = |items: &[Value]| items.iter().map(|b| b["count_val"].as_i64().unwrap()).sum::<i64>();
    // Under an hour: raw points, gone.
    assert!(rows(&app, &admin, &downsampled(old - 60, old + 1_200)).await.is_empty());
    // Under a day: minute rollups, gone too (waited for above); the recent minutes stay.
    assert_eq!(
        counted(&rows(&app, &admin, &downsampled(now - DAY + 10, now + 10)).await),
        10
    );
    // Days: hour rollups, kept. Weeks: day rollups, kept.
    assert_eq!(
        counted(&rows(&app, &admin, &downsampled(now - 4 * DAY, now + 10)).await),
        20
    );
    assert_eq!(
        counted(&rows(&app, &admin, &downsampled(now - 30 * DAY, now + 10)).await),
        20
    );

    // The session says its points are not all kept; the CSV has what is.
    let session = send(app.get(&format!("/api/v2/data-session/{id_session}"), &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(session["isArchived"], true);
    assert!(session["archived_at"].as_i64().unwrap() >= now);
    let csv = send(app.get(&format!("/api/v2/data-session/{id_session}/download-csv"), &admin))
        .await
        .expect(200)
        .text;
    assert_eq!(csv.lines().count(), 1 + 10, "{csv}");
    let session_points = format!("/api/v2/data-downsampled?filter[id_data_session]={id_session}&per-page=1000");
    assert_eq!(counted(&rows(&app, &admin, &session_points).await), 10);

    // Newer points keep arriving and stay.
    gw.measurements(&minutes(now - 100, 1)).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(rows(&app, &admin, &data).await.len(), 11);
}
