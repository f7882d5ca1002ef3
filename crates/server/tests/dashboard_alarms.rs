//! The dashboard's alarm pages over real HTTP (docs/dashboard.md, "Alarms"): a rule created
//! through the form (a condition that does not compile shown again with where and why, and the
//! live check answering the same), an alarm raised over real MQTT shown open on the fleet, group
//! and device pages, acknowledged with its button, and the rule disabled.

mod common;

use common::TestApp;
use common::browser::Browser;
use common::gateway_client::TestGateway;
use serde_json::json;

const PASSWORD: &str = "alarms-password";

#[tokio::test]
async fn a_rule_made_in_the_browser_raises_an_alarm_acknowledged_there() {
    let app = TestApp::spawn().await;
    app.create_user("root@example.com", PASSWORD, true).await;
    let token = app.token("root@example.com", PASSWORD).await;
    let group = app.create_group(&token, "Boilers").await;
    let mut gw = TestGateway::connect(&app, &token, &group, "DASH-AL-1", "PLUS").await;
    let mut browser = Browser::new(&app);
    browser.sign_in("root@example.com", PASSWORD).await.expect(303);

    let empty = browser.get("/alarm-rules").await.expect(200);
    assert!(empty.text.contains("No alarm rules in your groups"), "{}", empty.text);
    let form = browser.get("/alarm-rules/new").await.expect(200);
    assert!(form.text.contains(r#"data-check="1""#));

    // The live check and the save refuse the same condition with the same words.
    let checked = browser.get("/alarm-rules/check?condition=value%20%3E").await;
    assert_eq!(checked.status, 422);
    assert!(checked.text.contains("line 1, column 8"), "{}", checked.text);
    let fine = browser
        .get("/alarm-rules/check?condition=value%20%3E%2030.0")
        .await
        .expect(200);
    assert!(fine.text.contains("compiles"));
    let refused = browser
        .post(
            "/alarm-rules",
            &[
                ("id_group", &group),
                ("label", "Hot"),
                ("severity", "major"),
                ("condition", "value >"),
                ("is_active", "1"),
            ],
        )
        .await;
    assert_eq!(refused.status, 422);
    assert!(
        refused.text.contains("does not compile at line 1, column 8"),
        "{}",
        refused.text
    );

    let created = browser
        .post(
            "/alarm-rules",
            &[
                ("id_group", &group),
                ("label", "Hot"),
                ("severity", "major"),
                ("condition", "value > 30.0"),
                ("datatype", "12"),
                ("is_active", "1"),
            ],
        )
        .await
        .expect(303);
    let rule_path = created.header("location").unwrap().to_string();
    let rule_page = browser.get(&rule_path).await.expect(200);
    assert!(rule_page.text.contains("value &gt; 30.0"), "{}", rule_page.text);

    gw.measurements(&json!([{"ts": 1_763_726_400, "values": {"12": 35.5}}]))
        .await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let fleet = loop {
        let fleet = browser.get("/").await.expect(200);
        if fleet.text.contains("Acknowledge") {
            break fleet;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no open alarm on the fleet page: {}",
            fleet.text
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(fleet.text.contains("35.5"), "{}", fleet.text);
    let group_page = browser.get(&format!("/groups/{group}")).await.expect(200);
    assert!(group_page.text.contains("Acknowledge"), "{}", group_page.text);

    let alarm: serde_json::Value = common::send(app.get("/api/v2/alarm", &token)).await.expect(200).json();
    let id = alarm["items"][0]["id_alarm"].as_str().unwrap().to_string();
    let back = format!("/devices/{}", gw.id);
    browser
        .post(&format!("/alarms/{id}/acknowledge"), &[("back", &back)])
        .await
        .expect(303);
    let device = browser.get(&back).await.expect(200);
    assert!(device.text.contains("acknowledged"), "{}", device.text);
    assert!(!device.text.contains(">Acknowledge<"), "{}", device.text);

    browser.post(&format!("{rule_path}/toggle"), &[]).await.expect(303);
    let rules = browser.get("/alarm-rules").await.expect(200);
    assert!(rules.text.contains("disabled"), "{}", rules.text);
    let alarms = browser.get("/alarms").await.expect(200);
    assert!(alarms.text.contains("cleared"), "{}", alarms.text);
}
