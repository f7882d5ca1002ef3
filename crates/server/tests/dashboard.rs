//! The web dashboard over real HTTP, with gateways over real MQTT: sign-in, session cookie,
//! CSRF, the sign-in rate limit, every page, every form (and its CSRF and rights refusals),
//! commands from the panel to a simulated gateway, and no page revealing another group.

mod common;

use std::time::Duration;

use common::browser::{Browser, hidden};
use common::gateway_client::TestGateway;
use common::{TestApp, send};
use devicecloud_protocol::ModuleKind;
use devicecloud_server::Settings;
use devicecloud_simulator::{Fleet, FleetOptions, Provisioner};
use serde_json::json;

const PASSWORD: &str = "dashboard-password";
const T0: i64 = 1_763_726_400;

/// An administrator (API token and a signed-in browser), with one group.
struct Setup {
    app: TestApp,
    admin_token: String,
    admin: Browser,
    group: String,
}

async fn setup() -> Setup {
    let app = TestApp::spawn_with(Settings {
        webhook_allow_private: true,
        command_timeout: Duration::from_secs(5),
        ..Settings::default()
    })
    .await;
    app.create_user("root@example.com", PASSWORD, true).await;
    let admin_token = app.token("root@example.com", PASSWORD).await;
    let group = app.create_group(&admin_token, "Plant A").await;
    let mut admin = Browser::new(&app);
    admin.sign_in("root@example.com", PASSWORD).await.expect(303);
    Setup {
        app,
        admin_token,
        admin,
        group,
    }
}

impl Setup {
    /// A normal user with `role` in the setup's group, signed in.
    async fn member(&self, name: &str, role: &str) -> (String, Browser) {
        let id = self.app.create_user(name, PASSWORD, false).await;
        self.app.grant(&self.admin_token, &self.group, &id, role).await;
        let mut browser = Browser::new(&self.app);
        browser.sign_in(name, PASSWORD).await.expect(303);
        (id, browser)
    }
}

#[tokio::test]
async fn sign_in_session_cookie_and_sign_out() {
    let app = TestApp::spawn().await;
    app.create_user("ann@example.com", PASSWORD, false).await;
    let mut b = Browser::new(&app);

    // Signed out: every page sends to the form, remembering where it was going.
    let reply = b.get("/devices/x?range=1w").await.expect(303);
    assert_eq!(
        reply.header("location"),
        Some("/login?next=%2Fdevices%2Fx%3Frange%3D1w")
    );
    let form = b.get("/login?next=/events").await.expect(200);
    assert!(form.text.contains("<form method=\"post\" action=\"/login\""));
    assert_eq!(hidden(&form.text, "next").as_deref(), Some("/events"));
    let login_cookie = form.header("set-cookie").unwrap();
    assert!(login_cookie.contains("HttpOnly") && login_cookie.contains("SameSite=Strict"));

    // The form's token must match its cookie.
    let mut stranger = Browser::new(&app);
    stranger.csrf = b.csrf.clone();
    stranger
        .post("/login", &[("username", "ann@example.com"), ("password", PASSWORD)])
        .await
        .expect(403);

    let wrong = b
        .post("/login", &[("username", "ann@example.com"), ("password", "nope-nope")])
        .await
        .expect(401);
    assert!(wrong.text.contains("Invalid username or password."));
    assert!(!b.cookies.contains_key("dc_session"));

    let ok = b
        .post(
            "/login",
            &[
                ("username", "ANN@example.com"),
                ("password", PASSWORD),
                ("next", "/events"),
            ],
        )
        .await
        .expect(303);
    assert_eq!(ok.header("location"), Some("/events"));
    let session_cookie = ok
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .find(|v| v.starts_with("dc_session="))
        .unwrap();
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=43200"] {
        assert!(session_cookie.contains(attribute), "{session_cookie}");
    }
    let page = b.get("/").await.expect(200);
    assert!(page.text.contains("ann@example.com"));
    assert!(page.text.contains("You hold no role in any group yet."));
    // An offsite `next` is not followed.
    let mut other = Browser::new(&app);
    other.get("/login").await;
    let reply = other
        .post(
            "/login",
            &[
                ("username", "ann@example.com"),
                ("password", PASSWORD),
                ("next", "//evil.example/"),
            ],
        )
        .await
        .expect(303);
    assert_eq!(reply.header("location"), Some("/"));

    // Sign-out needs the token, then ends the session in the store, not only in the browser.
    let stolen = b.cookies.get("dc_session").cloned().unwrap();
    b.post_without_token("/logout", &[]).await.expect(403);
    let out = b.post("/logout", &[]).await.expect(303);
    assert_eq!(out.header("location"), Some("/login"));
    let mut replay = Browser::new(&app);
    replay.cookies.insert("dc_session".into(), stolen);
    replay.get("/").await.expect(303);
}

#[tokio::test]
async fn sign_in_is_rate_limited() {
    let app = TestApp::spawn().await;
    app.create_user("bob@example.com", PASSWORD, false).await;
    let mut b = Browser::new(&app);
    b.get("/login").await;
    for _ in 0..10 {
        b.post(
            "/login",
            &[("username", "bob@example.com"), ("password", "wrong-password")],
        )
        .await
        .expect(401);
    }
    // Even the right password now waits.
    let reply = b
        .post("/login", &[("username", "bob@example.com"), ("password", PASSWORD)])
        .await
        .expect(429);
    let retry: u64 = reply.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=300).contains(&retry), "{retry}");
    assert!(reply.text.contains("Too many failed sign-in attempts"));
    // The API's password grant counts the same failures (same username, same address).
    assert_eq!(
        app.token_request(&[
            ("grant_type", "password"),
            ("client_id", &app.client_id),
            ("client_secret", &app.client_secret),
            ("username", "bob@example.com"),
            ("password", PASSWORD),
        ])
        .await
        .status(),
        429
    );
}

#[tokio::test]
async fn pages_show_only_the_viewers_groups() {
    let mut s = setup().await;
    let other = s.app.create_group(&s.admin_token, "Plant B").await;
    let mut gw = TestGateway::connect(&s.app, &s.admin_token, &s.group, "DASH-GW-1", "PLUS").await;
    let template = json!({"name": "flowmeter-v2", "registers": [{"datatype": 12, "address": 40001, "type": "u16", "label": "Flow", "unit": "m3/h"}]});
    gw.hello("PLUS", json!({"modbus_template": template})).await;
    let now = devicecloud_store::unix_now();
    // Ten minutes of one value a minute (the newest 2.5), a Z-wave node's value, and one value
    // a month ago. The ten minutes end within the UTC day they start in, so the year chart
    // draws them as one daily bucket whatever the time of day the test runs.
    let end = if now % 86_400 < 600 {
        now - now % 86_400 - 1
    } else {
        now
    };
    let mut batch: Vec<serde_json::Value> = (0..10)
        .map(|i| json!({"ts": end - 540 + i * 60, "values": {"12": 1.6 + i as f64 * 0.1}}))
        .collect();
    batch.push(json!({"device": "DASH-ZW-1", "ts": now - 30, "values": {"4": 20.25}}));
    batch.push(json!({"ts": now - 30 * 86_400, "values": {"12": 9.0}}));
    gw.measurements(&serde_json::Value::Array(batch)).await;
    gw.events(&json!({"ts": now - 10, "type": 310, "value": "1"})).await;
    let mut hidden_gw = TestGateway::connect(&s.app, &s.admin_token, &other, "DASH-GW-2", "CORE").await;
    hidden_gw
        .measurements(&json!({"ts": now - 5, "values": {"12": 77.0}}))
        .await;
    let (_, mut viewer) = s.member("viewer@example.com", "viewer").await;

    let overview = viewer.get("/").await.expect(200);
    assert!(overview.text.contains("Plant A") && !overview.text.contains("Plant B"));
    assert!(overview.text.contains(&format!("/groups/{}", s.group)));
    // Admins see both groups, with counts: the gateway and its Z-wave node are online.
    let admin_overview = s.admin.get("/").await.expect(200);
    assert!(admin_overview.text.contains("Plant B"));
    assert!(
        admin_overview
            .text
            .contains("<td class=\"num\">2</td><td class=\"num\">2</td><td class=\"num\">0</td>"),
        "{}",
        admin_overview.text
    );

    let group = viewer.get(&format!("/groups/{}", s.group)).await.expect(200);
    assert!(group.text.contains("DASH-GW-1") && group.text.contains("DASH-ZW-1"));
    assert!(!group.text.contains("DASH-GW-2"));
    let sorted = viewer
        .get(&format!("/groups/{}?sort=-serial_hardware", s.group))
        .await
        .expect(200);
    assert!(sorted.text.find("DASH-ZW-1").unwrap() < sorted.text.find("DASH-GW-1").unwrap());
    viewer.get(&format!("/groups/{other}")).await.expect(404);

    let device = viewer.get(&format!("/devices/{}", gw.id)).await.expect(200);
    for expected in [
        "Flow · datatype 12",
        "m3/h",
        "<svg class=\"chart\"",
        "class=\"band\"",
        "2.5",
        "310",
        "DASH-ZW-1",
        "serial_hardware",
    ] {
        assert!(device.text.contains(expected), "missing {expected}");
    }
    // A viewer gets no command panel, and the command route refuses them.
    assert!(!device.text.contains("/command\""));
    viewer
        .post(&format!("/devices/{}/command", gw.id), &[("command", "ping")])
        .await
        .expect(403);
    for (range, band) in [
        ("1h", "1 hour"),
        ("1d", "1 day"),
        ("1w", "1 week"),
        ("3w", "3 weeks"),
        ("1y", "1 year"),
    ] {
        let page = viewer
            .get(&format!("/devices/{}?range={range}", gw.id))
            .await
            .expect(200);
        assert!(
            page.text.contains(&format!("range={range}\" class=\"active\">{band}")),
            "{range}"
        );
    }
    // A year: two daily buckets a month apart, each alone (a gap, no line across it); a day:
    // ten adjacent minutes joined by a line.
    let year = viewer.get(&format!("/devices/{}?range=1y", gw.id)).await;
    assert_eq!(year.text.matches("class=\"dot\"").count(), 2, "{}", year.text);
    assert!(!year.text.contains("class=\"line\""));
    let day = viewer.get(&format!("/devices/{}?range=1d", gw.id)).await;
    assert!(day.text.contains("class=\"line\"") && !day.text.contains("class=\"dot\""));
    let latest = viewer.get(&format!("/devices/{}/latest", gw.id)).await.expect(200);
    assert!(latest.text.starts_with("<table>") && latest.text.contains("2.5"));
    viewer.get(&format!("/devices/{}", hidden_gw.id)).await.expect(404);
    viewer
        .get(&format!("/devices/{}/latest", hidden_gw.id))
        .await
        .expect(404);

    let events = viewer.get("/events").await.expect(200);
    assert!(events.text.contains("310"));
    let filtered = viewer
        .get(&format!("/events?device={}", hidden_gw.id))
        .await
        .expect(200);
    assert!(filtered.text.contains("No events."));
    let by_type = viewer.get("/events?type=208&from=2000-01-01T00:00").await.expect(200);
    assert!(by_type.text.contains("<td>208 · ") && !by_type.text.contains("<td>310 · "));
    let bad_time = viewer.get("/events?from=yesterday").await.expect(200);
    assert!(bad_time.text.contains("is not a time"));

    viewer.get("/sessions").await.expect(200);
    let webhooks = viewer.get("/webhooks").await.expect(200);
    assert!(!webhooks.text.contains("New webhook"));
    viewer.get("/webhooks/new").await.expect(403);
    viewer.get("/admin").await.expect(403);
    viewer.post("/admin/clients", &[("name", "x")]).await.expect(403);

    // Pages are HTML with their protections; assets are embedded.
    assert!(device.header("content-type").unwrap().starts_with("text/html"));
    assert!(
        device
            .header("content-security-policy")
            .unwrap()
            .contains("script-src 'self'")
    );
    assert_eq!(device.header("x-frame-options"), Some("DENY"));
    let css = viewer.get("/assets/dashboard.css").await.expect(200);
    assert!(css.header("content-type").unwrap().starts_with("text/css"));
    let js = viewer.get("/assets/dashboard.js").await.expect(200);
    assert!(js.text.contains("data-refresh"));
    // The API's JSON errors are untouched by the dashboard.
    let api = send(s.app.get("/api/v2/nothing", &s.admin_token)).await.expect(404);
    assert!(api.header("content-type").unwrap().starts_with("application/json"));
}

#[tokio::test]
async fn operators_run_commands_from_the_panel() {
    let s = setup().await;
    let spec = Provisioner::new(&s.app.base, &s.admin_token)
        .gateway(&s.group, "DASH-CORE-1", ModuleKind::Core)
        .await
        .unwrap();
    let id = spec.id.clone().unwrap();
    let fleet = Fleet::start(vec![spec], FleetOptions::new(s.app.mqtt_addr, Duration::ZERO));
    assert!(fleet.wait_connected(1, Duration::from_secs(20)).await);
    let (operator_id, mut operator) = s.member("op@example.com", "operator").await;

    let page = operator.get(&format!("/devices/{id}")).await.expect(200);
    for command in [
        "ping",
        "status",
        "restart",
        "wifi-scan",
        "wifi-connect",
        "modbus-write",
        "reset-main-counter",
    ] {
        assert!(
            page.text.contains(&format!("name=\"command\" value=\"{command}\"")),
            "{command}"
        );
    }
    let path = format!("/devices/{id}/command");
    let ping = operator.post(&path, &[("command", "ping")]).await.expect(200);
    assert!(ping.text.contains("ping</strong>: done (HTTP 200, device status 200)"));
    assert!(ping.text.contains("<th>data</th><td>pong</td>"));
    let test = operator.post(&path, &[("command", "status")]).await.expect(200);
    assert!(test.text.contains("<th>isModemConnected</th>"));
    // The self-test is kept and shown on the device page.
    let page = operator.get(&format!("/devices/{id}")).await;
    assert!(page.text.contains("Last self-test"));
    let write = operator
        .post(
            &path,
            &[("command", "modbus-write"), ("datatype", "abc"), ("value", "1")],
        )
        .await
        .expect(200);
    assert!(write.text.contains("failed (HTTP 400)"), "{}", write.text);
    let scan = operator.post(&path, &[("command", "wifi-scan")]).await.expect(200);
    assert!(scan.text.contains("<th>ssid</th>"));
    operator
        .post_without_token(&path, &[("command", "ping")])
        .await
        .expect(403);
    // The command is recorded like one sent through the API (written in the background), with
    // the operator as caller.
    let path_213 = format!("/api/v2/event?filter[source_device]={id}&filter[event_type]=213");
    let mut events = serde_json::Value::Null;
    for _ in 0..50 {
        events = send(s.app.get(&path_213, &s.admin_token)).await.expect(200).json();
        if events["items"].as_array().unwrap().len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let items = events["items"].as_array().unwrap();
    // ping, status, wifi-scan: the malformed Modbus write never left the server.
    assert_eq!(items.len(), 3, "{events}");
    assert!(
        items.iter().any(|e| e["event_value_description"]
            .as_str()
            .unwrap_or("")
            .contains(&operator_id)),
        "{events}"
    );
    // Offline: the answer says so, on a page that still works.
    fleet.stop().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let offline = operator.post(&path, &[("command", "ping")]).await.expect(200);
    assert!(offline.text.contains("Device is not online"));
}

#[tokio::test]
async fn data_session_chart_and_csv() {
    let mut s = setup().await;
    let mut gw = TestGateway::connect(&s.app, &s.admin_token, &s.group, "DASH-GO-1", "GO").await;
    let template = json!({"name": "vib", "registers": [{"datatype": 3, "address": 1, "type": "u16", "label": "Vibration", "unit": "mm/s"}]});
    gw.hello("GO", json!({"modbus_template": template})).await;
    gw.measurements(&json!([
        {"ts": T0, "values": {"3": 1.0}},
        {"ts": T0 + 1, "values": {"3": 3.0}},
    ]))
    .await;
    gw.power_off().await;
    let list = s.admin.get("/sessions").await.expect(200);
    let start = list.text.find("/sessions/").unwrap() + "/sessions/".len();
    let session: String = list.text[start..]
        .chars()
        .take_while(|c| *c != '"' && *c != '/')
        .collect();
    let page = s.admin.get(&format!("/sessions/{session}")).await.expect(200);
    assert!(page.text.contains("<svg class=\"chart\"") && page.text.contains("Download CSV"));
    assert!(
        page.text.contains("Vibration · datatype 3") && page.text.contains("(mm/s)"),
        "{}",
        page.text
    );
    let csv = s.admin.get(&format!("/sessions/{session}/csv")).await.expect(200);
    assert!(csv.header("content-type").unwrap().starts_with("text/csv"));
    let lines: Vec<&str> = csv.text.lines().collect();
    assert_eq!(
        lines[0],
        "timestamp,microseconds,source_device,serial_hardware,datatype,value"
    );
    assert_eq!(lines.len(), 3);
    let other = s.app.create_group(&s.admin_token, "elsewhere").await;
    let outsider_id = s.app.create_user("out@example.com", PASSWORD, false).await;
    s.app.grant(&s.admin_token, &other, &outsider_id, "manager").await;
    let mut outsider = Browser::new(&s.app);
    outsider.sign_in("out@example.com", PASSWORD).await.expect(303);
    outsider.get(&format!("/sessions/{session}")).await.expect(404);
    outsider.get(&format!("/sessions/{session}/csv")).await.expect(404);
    assert!(!outsider.get("/sessions").await.text.contains(&session));

    // The group page links to the export of every point of the group, in both formats.
    let group_page = s.admin.get(&format!("/groups/{}", s.group)).await.expect(200);
    assert!(
        group_page
            .text
            .contains(&format!("/groups/{}/export?format=parquet", s.group))
    );
    let export = s
        .admin
        .get(&format!("/groups/{}/export?format=csv", s.group))
        .await
        .expect(200);
    assert!(export.header("content-type").unwrap().starts_with("text/csv"));
    let lines: Vec<&str> = export.text.lines().collect();
    assert_eq!(
        lines[0],
        "id_container_data_latest,id_group,datatype,source_device,timestamp_seconds,microseconds,value"
    );
    assert_eq!(lines.len(), 3, "{}", export.text);
    assert!(lines[1].ends_with(&format!(",{T0},0,1.0")), "{}", lines[1]);
    outsider.get(&format!("/groups/{}/export", s.group)).await.expect(404);
}

#[tokio::test]
async fn webhook_forms_create_edit_toggle_and_delete() {
    let s = setup().await;
    let (_, mut manager) = s.member("manager@example.com", "manager").await;
    let (_, mut viewer) = s.member("hooks-viewer@example.com", "viewer").await;

    let form = manager.get("/webhooks/new").await.expect(200);
    assert!(form.text.contains(&s.group));
    let fields = |url: &'static str| {
        [
            ("id_group", s.group.as_str()),
            ("forwarding_type", "measurements"),
            ("label", "to the historian"),
            ("formatter", "ndjson"),
            ("url", url),
            ("authorization", "Bearer abcdefghijklmnop1234"),
            ("is_active", "1"),
        ]
    };
    let bad = fields("ftp://nowhere");
    let refused = manager.post("/webhooks", &bad).await.expect(422);
    assert!(refused.text.contains("class=\"error\""), "{}", refused.text);
    assert!(refused.text.contains("value=\"to the historian\""));
    manager.post_without_token("/webhooks", &bad).await.expect(403);

    let good = fields("http://127.0.0.1:9/hook");
    let created = manager.post("/webhooks", &good).await.expect(201);
    assert!(created.text.contains("shown this once"));
    let start = created.text.find("/webhooks/").unwrap() + "/webhooks/".len();
    let id: String = created.text[start..].chars().take_while(|c| *c != '"').collect();
    let record = send(s.app.get(&format!("/api/v2/webhook/{id}"), &s.admin_token))
        .await
        .expect(200)
        .json();
    assert_eq!(record["formatter"], "ndjson");
    assert_eq!(record["authorization"], "Bearer ****1234");

    let page = manager.get(&format!("/webhooks/{id}")).await.expect(200);
    assert!(page.text.contains("Bearer ****1234") && !page.text.contains("abcdefghijklmnop1234"));
    assert!(page.text.contains("Delivery attempts"));
    let edited = manager
        .post(
            &format!("/webhooks/{id}"),
            &[
                ("label", "renamed"),
                ("formatter", "json"),
                ("url", "http://127.0.0.1:9/other"),
                ("is_active", "1"),
            ],
        )
        .await
        .expect(303);
    assert_eq!(edited.header("location"), Some(format!("/webhooks/{id}").as_str()));
    let record = send(s.app.get(&format!("/api/v2/webhook/{id}"), &s.admin_token))
        .await
        .json();
    assert_eq!(
        (record["label"].as_str(), record["formatter"].as_str()),
        (Some("renamed"), Some("json"))
    );
    assert_eq!(
        record["authorization"], "Bearer ****1234",
        "an empty field keeps the header"
    );
    let invalid = manager
        .post(
            &format!("/webhooks/{id}"),
            &[("label", ""), ("formatter", "xml"), ("url", "http://127.0.0.1:9/")],
        )
        .await
        .expect(422);
    assert!(invalid.text.contains("class=\"error\""));

    manager.post(&format!("/webhooks/{id}/toggle"), &[]).await.expect(303);
    let record = send(s.app.get(&format!("/api/v2/webhook/{id}"), &s.admin_token))
        .await
        .json();
    assert_eq!(record["is_active"], 0);
    // The edit form of a disabled webhook shows it disabled, so saving it keeps it so.
    let page = manager.get(&format!("/webhooks/{id}")).await.expect(200);
    assert!(page.text.contains("name=\"is_active\" value=\"1\">"), "{}", page.text);

    // A viewer reads it but changes nothing.
    viewer.get(&format!("/webhooks/{id}")).await.expect(200);
    viewer.post(&format!("/webhooks/{id}/toggle"), &[]).await.expect(403);
    viewer.post(&format!("/webhooks/{id}/delete"), &[]).await.expect(403);
    viewer
        .post(&format!("/webhooks/{id}"), &[("label", "mine")])
        .await
        .expect(403);

    manager
        .post_without_token(&format!("/webhooks/{id}/delete"), &[])
        .await
        .expect(403);
    manager.post(&format!("/webhooks/{id}/delete"), &[]).await.expect(303);
    manager.get(&format!("/webhooks/{id}")).await.expect(404);
}

#[tokio::test]
async fn administration_forms() {
    let mut s = setup().await;
    let page = s.admin.get("/admin").await.expect(200);
    assert!(page.text.contains("root@example.com") && page.text.contains("tests"));

    let created = s
        .admin
        .post(
            "/admin/users",
            &[
                ("username", "new@example.com"),
                ("password", "long-enough"),
                ("is_admin", ""),
            ],
        )
        .await
        .expect(200);
    assert!(created.text.contains("Account new@example.com created."));
    let taken = s
        .admin
        .post(
            "/admin/users",
            &[("username", "NEW@example.com"), ("password", "long-enough")],
        )
        .await
        .expect(422);
    assert!(taken.text.contains("username"));
    let short = s
        .admin
        .post("/admin/users", &[("username", "x@example.com"), ("password", "short")])
        .await
        .expect(422);
    assert!(short.text.contains("at least 8 characters"));

    let new_id = {
        let token = s.app.token("new@example.com", "long-enough").await;
        let me = send(s.app.get("/api/v2/group", &token)).await.json();
        assert_eq!(me["items"], json!([]));
        let users = s.admin.get("/admin").await.text;
        let before = users.find("new@example.com").unwrap();
        let tail = &users[before..];
        let start = tail.find("<code class=\"muted\">").unwrap() + "<code class=\"muted\">".len();
        tail[start..].split('<').next().unwrap().to_string()
    };
    let saved = s
        .admin
        .post(
            "/admin/members",
            &[("id_user", &new_id), ("id_group", &s.group), ("role", "operator")],
        )
        .await
        .expect(200);
    assert!(saved.text.contains("Role saved.") && saved.text.contains("Plant A: operator"));
    let token = s.app.token("new@example.com", "long-enough").await;
    let groups = send(s.app.get("/api/v2/group", &token)).await.json();
    assert_eq!(groups["items"].as_array().unwrap().len(), 1);
    let bad_role = s
        .admin
        .post(
            "/admin/members",
            &[("id_user", &new_id), ("id_group", &s.group), ("role", "owner")],
        )
        .await
        .expect(422);
    assert!(bad_role.text.contains("role"));
    s.admin
        .post("/admin/members/remove", &[("id_user", &new_id), ("id_group", &s.group)])
        .await
        .expect(200);
    tokio::time::sleep(Duration::from_millis(5100)).await; // the role cache's lifetime
    let groups = send(s.app.get("/api/v2/group", &token)).await.json();
    assert_eq!(groups["items"], json!([]));

    // A registered client works at once with the secret shown once.
    let registered = s
        .admin
        .post("/admin/clients", &[("name", "integration")])
        .await
        .expect(200);
    let start = registered.text.find("registered as ").unwrap() + "registered as ".len();
    let client_id: String = registered.text[start..].chars().take_while(|c| *c != '.').collect();
    let start = registered.text.find("<p class=\"secret\">").unwrap() + "<p class=\"secret\">".len();
    let secret: String = registered.text[start..].chars().take_while(|c| *c != '<').collect();
    let reply = s
        .app
        .token_request(&[
            ("grant_type", "password"),
            ("client_id", &client_id),
            ("client_secret", &secret),
            ("username", "new@example.com"),
            ("password", "long-enough"),
        ])
        .await;
    assert_eq!(reply.status(), 200);
    s.admin.post("/admin/clients", &[("name", "")]).await.expect(422);
    s.admin
        .post_without_token("/admin/clients", &[("name", "x")])
        .await
        .expect(403);
    s.admin
        .post_without_token(
            "/admin/users",
            &[("username", "y@example.com"), ("password", "long-enough")],
        )
        .await
        .expect(403);

    // Managers manage their group's webhooks, not accounts.
    let (_, mut manager) = s.member("boss@example.com", "manager").await;
    manager.get("/admin").await.expect(403);
    manager
        .post(
            "/admin/members",
            &[("id_user", &new_id), ("id_group", &s.group), ("role", "viewer")],
        )
        .await
        .expect(403);
}

#[tokio::test]
async fn every_form_refuses_a_missing_token_and_a_role_too_low() {
    let mut s = setup().await;
    let gw = TestGateway::connect(&s.app, &s.admin_token, &s.group, "DASH-FORMS-1", "CORE").await;
    let created = s
        .admin
        .post(
            "/webhooks",
            &[
                ("id_group", s.group.as_str()),
                ("forwarding_type", "events"),
                ("label", "audit"),
                ("formatter", "json"),
                ("url", "http://127.0.0.1:9/audit"),
                ("is_active", "1"),
            ],
        )
        .await
        .expect(201);
    let start = created.text.find("/webhooks/").unwrap() + "/webhooks/".len();
    let hook: String = created.text[start..].chars().take_while(|c| *c != '"').collect();
    let (viewer_id, mut viewer) = s.member("forms-viewer@example.com", "viewer").await;
    let forms: Vec<(String, Vec<(&str, String)>)> = vec![
        (format!("/devices/{}/command", gw.id), vec![("command", "ping".into())]),
        (
            "/webhooks".into(),
            vec![
                ("id_group", s.group.clone()),
                ("forwarding_type", "events".into()),
                ("label", "x".into()),
                ("formatter", "json".into()),
                ("url", "http://127.0.0.1:9/x".into()),
            ],
        ),
        (format!("/webhooks/{hook}"), vec![("label", "x".into())]),
        (format!("/webhooks/{hook}/toggle"), vec![]),
        (format!("/webhooks/{hook}/delete"), vec![]),
        (
            "/admin/users".into(),
            vec![("username", "z@example.com".into()), ("password", "long-enough".into())],
        ),
        (
            "/admin/members".into(),
            vec![
                ("id_user", viewer_id.clone()),
                ("id_group", s.group.clone()),
                ("role", "manager".into()),
            ],
        ),
        (
            "/admin/members/remove".into(),
            vec![("id_user", viewer_id.clone()), ("id_group", s.group.clone())],
        ),
        ("/admin/clients".into(), vec![("name", "x".into())]),
    ];
    for (path, fields) in &forms {
        let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let no_token = s.admin.post_without_token(path, &fields).await;
        assert_eq!(no_token.status, 403, "{path} without a token");
        assert!(no_token.text.contains("security token"), "{path}");
        let mut wrong = fields.clone();
        wrong.push(("_csrf", "0000"));
        assert_eq!(
            s.admin.post_without_token(path, &wrong).await.status,
            403,
            "{path} with a wrong token"
        );
        assert_eq!(viewer.post(path, &fields).await.status, 403, "{path} as a viewer");
    }
    // Nothing of it happened.
    let record = send(s.app.get(&format!("/api/v2/webhook/{hook}"), &s.admin_token))
        .await
        .expect(200)
        .json();
    assert_eq!(
        (record["label"].as_str(), record["is_active"].as_i64()),
        (Some("audit"), Some(1))
    );
    assert_eq!(viewer.get("/").await.status, 200, "still a viewer, still signed in");
    let page = s.admin.get("/admin").await;
    assert!(!page.text.contains("z@example.com") && page.text.contains("Plant A: viewer"));
}

#[tokio::test]
async fn operators_edit_a_twin_and_the_delta_shows() {
    let s = setup().await;
    let spec = Provisioner::new(&s.app.base, &s.admin_token)
        .gateway(&s.group, "DASH-TWIN-1", ModuleKind::Plus)
        .await
        .unwrap();
    let id = spec.id.clone().unwrap();
    let (_, mut viewer) = s.member("twin-viewer@example.com", "viewer").await;
    let (_, mut operator) = s.member("twin-op@example.com", "operator").await;

    // A viewer sees the twin, without the editor.
    let page = viewer.get(&format!("/devices/{id}")).await.expect(200);
    assert!(page.text.contains("Configuration (twin)"), "{}", page.text);
    assert!(page.text.contains("in sync"));
    assert!(!page.text.contains("name=\"desired\""));

    let page = operator.get(&format!("/devices/{id}")).await.expect(200);
    assert_eq!(hidden(&page.text, "version").as_deref(), Some("0"));
    let path = format!("/devices/{id}/twin");
    operator
        .post(
            &path,
            &[
                ("desired", r#"{"reporting_interval_s": 1, "mode": "eco"}"#),
                ("version", "0"),
            ],
        )
        .await
        .expect(303);
    let twin = send(s.app.get(&format!("/api/v2/physical-device/{id}/twin"), &s.admin_token))
        .await
        .expect(200)
        .json();
    assert_eq!(twin["desired"], json!({"reporting_interval_s": 1, "mode": "eco"}));
    assert_eq!(twin["version"], json!(1));
    let page = operator.get(&format!("/devices/{id}")).await.expect(200);
    assert!(page.text.contains("not in sync"));
    assert!(page.text.contains("class=\"delta\""), "the delta is highlighted");

    // An edit over a newer version, or that is not a JSON object, is shown again with why.
    let stale = operator
        .post(&path, &[("desired", r#"{"mode": "boost"}"#), ("version", "0")])
        .await
        .expect(422);
    assert!(stale.text.contains("at version 1, not 0"), "{}", stale.text);
    assert!(stale.text.contains("boost"), "the draft is kept");
    operator
        .post(&path, &[("desired", "[1]"), ("version", "1")])
        .await
        .expect(422);
    operator
        .post(&path, &[("desired", "{"), ("version", "1")])
        .await
        .expect(422);
    // Removing a key in the editor removes it from the desired document.
    operator
        .post(
            &path,
            &[("desired", r#"{"reporting_interval_s": 1}"#), ("version", "1")],
        )
        .await
        .expect(303);
    let twin = send(s.app.get(&format!("/api/v2/physical-device/{id}/twin"), &s.admin_token))
        .await
        .expect(200)
        .json();
    assert_eq!(
        (&twin["desired"], &twin["version"]),
        (&json!({"reporting_interval_s": 1}), &json!(2))
    );
    viewer
        .post(&path, &[("desired", "{}"), ("version", "2")])
        .await
        .expect(403);
    operator
        .post_without_token(&path, &[("desired", "{}"), ("version", "2")])
        .await
        .expect(403);

    // The simulated gateway applies it once connected.
    let fleet = Fleet::start(vec![spec], FleetOptions::new(s.app.mqtt_addr, Duration::ZERO));
    assert!(fleet.wait_connected(1, Duration::from_secs(20)).await);
    let mut synced = false;
    for _ in 0..100 {
        let page = operator.get(&format!("/devices/{id}")).await.expect(200);
        if page.text.contains("applied 2") {
            synced = page.text.contains(">in sync<");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(synced, "the twin shows in sync once the gateway reported");
    fleet.stop().await;
}

#[tokio::test]
async fn managers_run_jobs_from_the_jobs_page() {
    let s = setup().await;
    let provisioner = Provisioner::new(&s.app.base, &s.admin_token);
    let mut specs = Vec::new();
    for serial in ["DASH-JOB-1", "DASH-JOB-2"] {
        specs.push(provisioner.gateway(&s.group, serial, ModuleKind::Plus).await.unwrap());
    }
    let fleet = Fleet::start(specs, FleetOptions::new(s.app.mqtt_addr, Duration::ZERO));
    assert!(fleet.wait_connected(2, Duration::from_secs(20)).await);
    let (_, mut manager) = s.member("job-manager@example.com", "manager").await;
    let (_, mut viewer) = s.member("job-viewer@example.com", "viewer").await;

    let page = manager.get("/jobs").await.expect(200);
    assert!(page.text.contains("New job"));
    assert!(!viewer.get("/jobs").await.expect(200).text.contains("New job"));
    // A document that is not JSON, then a job over the group.
    let ping = |document: &'static str| {
        [
            ("label", "Ping both"),
            ("id_group", s.group.as_str()),
            ("kind", "command"),
            ("method", "ping"),
            ("document", document),
        ]
    };
    let refused = manager.post("/jobs", &ping("{")).await.expect(422);
    assert!(refused.text.contains("Must be a JSON object."), "{}", refused.text);
    let created = manager.post("/jobs", &ping("")).await.expect(303);
    let location = created.header("location").unwrap().to_string();
    assert!(location.starts_with("/jobs/"));
    let mut page = manager.get(&location).await.expect(200);
    for _ in 0..100 {
        if page.text.contains("2 succeeded") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        page = manager.get(&location).await.expect(200);
    }
    assert!(page.text.contains("2 succeeded of 2"), "{}", page.text);
    assert!(page.text.contains("pong"), "the answers are shown");
    assert!(viewer.get("/jobs").await.expect(200).text.contains("Ping both"));

    // A twin job over a filter, cancelled while its device is offline.
    let filter = format!(r#"{{"id_group": "{}", "serial_hardware": "NO-SUCH-YET"}}"#, s.group);
    manager
        .post(
            "/jobs",
            &[
                ("label", "Nothing"),
                ("filter", &filter),
                ("kind", "twin"),
                ("document", r#"{"a": 1}"#),
            ],
        )
        .await
        .expect(422);
    fleet.stop().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let twin_job = manager
        .post(
            "/jobs",
            &[
                ("label", "Slow reporting"),
                ("id_group", &s.group),
                ("kind", "twin"),
                ("document", r#"{"reporting_interval_s": 600}"#),
            ],
        )
        .await
        .expect(303);
    let location = twin_job.header("location").unwrap().to_string();
    let page = manager.get(&location).await.expect(200);
    assert!(page.text.contains("Cancel the pending executions"), "{}", page.text);
    assert!(
        !viewer
            .get(&location)
            .await
            .expect(200)
            .text
            .contains("Cancel the pending")
    );
    viewer.post(&format!("{location}/cancel"), &[]).await.expect(403);
    manager.post(&format!("{location}/cancel"), &[]).await.expect(303);
    let page = manager.get(&location).await.expect(200);
    assert!(page.text.contains("cancelled"), "{}", page.text);
}
