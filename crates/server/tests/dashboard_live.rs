//! The dashboard's live stream over real HTTP, signed in with a session cookie, fed by gateways
//! over real MQTT: a device page's latest values, events and command outcomes as they are
//! committed, a group page's events, nothing of another device or group, and the stream ending
//! once the viewer loses the group.

mod common;

use std::time::Duration;

use common::browser::Browser;
use common::gateway_client::TestGateway;
use common::sse::{SseEvent, SseReader};
use common::{TestApp, send};
use devicecloud_protocol::ModuleKind;
use devicecloud_server::Settings;
use devicecloud_simulator::{Fleet, FleetOptions, Provisioner};
use reqwest::Method;
use serde_json::json;

const PASSWORD: &str = "live-password";
const T0: i64 = 1_763_726_400;

/// Opens a dashboard live stream with the browser's session cookie (redirects not followed).
async fn open(app: &TestApp, browser: &Browser, path: &str) -> reqwest::Response {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    http.get(format!("{}{path}", app.base))
        .header("Cookie", browser.cookie_header())
        .send()
        .await
        .unwrap()
}

async fn live(app: &TestApp, browser: &Browser, path: &str) -> SseReader {
    SseReader::new(open(app, browser, path).await)
}

async fn record(reader: &mut SseReader) -> SseEvent {
    reader.record().await.expect("the stream ended early")
}

/// An administrator (API token) and a member signed in to the dashboard with `role`.
async fn member(app: &TestApp, admin: &str, group: &str, name: &str, role: &str) -> (String, Browser) {
    let id = app.create_user(name, PASSWORD, false).await;
    app.grant(admin, group, &id, role).await;
    let mut browser = Browser::new(app);
    browser.sign_in(name, PASSWORD).await.expect(303);
    (id, browser)
}

/// The device page's stream brings the device's own values (formatted as the page shows them)
/// and events, not another device's; the group page's stream brings the events of every
/// device of the group and no values; the pages carry what the script needs.
#[tokio::test]
async fn device_and_group_pages_get_what_their_devices_commit() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Live plant").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "LIVE-GW-1", "PLUS").await;
    let mut other = TestGateway::connect(&app, &admin, &group, "LIVE-GW-2", "PLUS").await;
    let (_, mut viewer) = member(&app, &admin, &group, "live-viewer@example.com", "viewer").await;

    let page = viewer.get(&format!("/devices/{}", gw.id)).await.expect(200).text;
    assert!(
        page.contains(&format!("data-live=\"/devices/{}/live\"", gw.id)),
        "{page}"
    );
    assert!(page.contains("data-live-events") && page.contains("data-live-commands"));
    let group_page = viewer.get(&format!("/groups/{group}")).await.expect(200).text;
    assert!(group_page.contains(&format!("data-live=\"/groups/{group}/live\"")));
    assert!(group_page.contains("data-live-events"));

    let mut device_stream = live(&app, &viewer, &format!("/devices/{}/live", gw.id)).await;
    let mut group_stream = live(&app, &viewer, &format!("/groups/{group}/live")).await;

    other.measurements(&json!([{"ts": T0, "values": {"12": 99.0}}])).await;
    other.events(&json!([{"ts": T0, "type": 310, "value": "1"}])).await;
    gw.measurements(&json!([{"ts": T0 + 1, "values": {"12": 21.5}}])).await;
    gw.events(&json!([{"ts": T0 + 2, "type": 310, "value": "1"}])).await;

    let latest = record(&mut device_stream).await;
    assert_eq!(latest.name(), "latest");
    assert!(latest.id.is_some());
    let value = latest.json();
    assert_eq!(
        (&value["datatype"], &value["value"], &value["measured_utc"]),
        (&json!(12), &json!("21.5"), &json!("2025-11-21 12:00:01 UTC"))
    );
    let event = record(&mut device_stream).await;
    assert_eq!(event.name(), "event");
    let row = event.json()["html"].as_str().unwrap().to_string();
    assert!(
        row.starts_with("<tr>") && row.contains("2025-11-21 12:00:02 UTC"),
        "{row}"
    );
    assert!(row.contains(&format!("href=\"/devices/{}\"", gw.id)) && row.contains("310"));
    assert!(device_stream.records_for(Duration::from_millis(300)).await.is_empty());

    let events: Vec<SseEvent> = vec![record(&mut group_stream).await, record(&mut group_stream).await];
    assert!(events.iter().all(|e| e.name() == "event"));
    let rows: Vec<String> = events
        .iter()
        .map(|e| e.json()["html"].as_str().unwrap().to_string())
        .collect();
    assert!(rows[0].contains(&format!("/devices/{}", other.id)), "{}", rows[0]);
    assert!(rows[1].contains(&format!("/devices/{}", gw.id)), "{}", rows[1]);
    assert!(group_stream.records_for(Duration::from_millis(300)).await.is_empty());
}

/// The streams answer to the page's rights: no session is sent to sign in, another group's
/// device or group is not found, and a stream ends once its viewer loses the group.
#[tokio::test]
async fn streams_answer_to_the_viewer_rights() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Mine").await;
    let elsewhere = app.create_group(&admin, "Not mine").await;
    let gw = TestGateway::connect(&app, &admin, &group, "LIVE-GW-R1", "PLUS").await;
    let foreign = TestGateway::connect(&app, &admin, &elsewhere, "LIVE-GW-R2", "PLUS").await;
    let (id, viewer) = member(&app, &admin, &group, "live-rights@example.com", "viewer").await;

    let stranger = Browser::new(&app);
    let refused = open(&app, &stranger, &format!("/devices/{}/live", gw.id)).await;
    assert_eq!(refused.status(), 303);
    assert!(refused.headers()["location"].to_str().unwrap().starts_with("/login"));
    for path in [
        format!("/devices/{}/live", foreign.id),
        format!("/groups/{elsewhere}/live"),
    ] {
        assert_eq!(open(&app, &viewer, &path).await.status(), 404, "{path}");
    }

    let mut stream = live(&app, &viewer, &format!("/devices/{}/live", gw.id)).await;
    let path = format!("/api/v2/group/{group}/member/{id}");
    send(app.request(Method::DELETE, &path, &admin)).await.expect(204);
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(event) = stream.next().await {
            assert!(event.comment.is_some(), "sent after the group was lost: {event:?}");
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream stayed open after the viewer lost the group");
}

/// A command sent from the page (or anywhere) comes back on the device's stream as the list
/// item of its outcome.
#[tokio::test]
async fn a_command_outcome_arrives_on_the_device_page() {
    let app = TestApp::spawn_with(Settings {
        command_timeout: Duration::from_secs(5),
        ..Settings::default()
    })
    .await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Commands").await;
    let spec = Provisioner::new(&app.base, &admin)
        .gateway(&group, "LIVE-CMD-1", ModuleKind::Plus)
        .await
        .expect("provisioned");
    let id = spec.id.clone().unwrap();
    let fleet = Fleet::start(vec![spec], FleetOptions::new(app.mqtt_addr, Duration::ZERO));
    assert!(fleet.wait_connected(1, Duration::from_secs(20)).await);
    let (_, mut operator) = member(&app, &admin, &group, "live-operator@example.com", "operator").await;
    operator.get(&format!("/devices/{id}")).await.expect(200);
    let mut stream = live(&app, &operator, &format!("/devices/{id}/live")).await;

    operator
        .post(&format!("/devices/{id}/command"), &[("command", "ping")])
        .await
        .expect(200);
    let outcome = loop {
        let event = record(&mut stream).await;
        if event.name() == "command" {
            break event;
        }
    };
    let item = outcome.json()["html"].as_str().unwrap().to_string();
    assert!(
        item.starts_with("<li>") && item.contains("<strong>ping</strong>"),
        "{item}"
    );
    assert!(
        item.contains(&format!("href=\"/devices/{id}\"")) && item.contains("status 200"),
        "{item}"
    );
}
