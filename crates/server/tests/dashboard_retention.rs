//! A group's retention in the dashboard over real HTTP: every member sees it from the group
//! page; managers change it through the form, with the API's rules and messages.

mod common;

use common::browser::Browser;
use common::{TestApp, send};
use serde_json::json;

const PASSWORD: &str = "dashboard-password";

#[tokio::test]
async fn members_see_a_groups_retention_and_managers_change_it() {
    let app = TestApp::spawn().await;
    app.create_user("root@example.com", PASSWORD, true).await;
    let viewer_id = app.create_user("vic@example.com", PASSWORD, false).await;
    let admin_token = app.token("root@example.com", PASSWORD).await;
    let group = app.create_group(&admin_token, "Plant").await;
    app.grant(&admin_token, &group, &viewer_id, "viewer").await;
    let mut admin = Browser::new(&app);
    admin.sign_in("root@example.com", PASSWORD).await.expect(303);
    let mut viewer = Browser::new(&app);
    viewer.sign_in("vic@example.com", PASSWORD).await.expect(303);
    let page = format!("/groups/{group}/retention");

    let overview = admin.get(&format!("/groups/{group}")).await.expect(200).text;
    assert!(overview.contains("Keeps raw points forever"), "{overview}");
    assert!(overview.contains(&format!("href=\"{page}\"")));

    let form = admin.get(&page).await.expect(200).text;
    assert!(form.contains("name=\"raw_days\""), "{form}");
    let saved = admin
        .post(
            &page,
            &[
                ("raw_days", "30"),
                ("minute_days", "90"),
                ("hour_days", ""),
                ("day_days", ""),
            ],
        )
        .await
        .expect(200)
        .text;
    assert!(saved.contains("Retention saved."), "{saved}");
    let api = send(app.get(&format!("/api/v2/group/{group}/retention"), &admin_token))
        .await
        .expect(200)
        .json();
    assert_eq!(
        api,
        json!({"raw_days": 30, "minute_days": 90, "hour_days": null, "day_days": null})
    );
    let summary = admin.get(&format!("/groups/{group}")).await.expect(200).text;
    assert!(
        summary.contains("raw points 30 days · minute rollups 90 days · hour rollups forever"),
        "{summary}"
    );

    // A bad value: the form again with the API's message, nothing changed.
    let refused = admin.post(&page, &[("raw_days", "0")]).await.expect(422).text;
    assert!(refused.contains("Raw Days must be no less than 1."), "{refused}");
    let unchanged = send(app.get(&format!("/api/v2/group/{group}/retention"), &admin_token))
        .await
        .expect(200)
        .json();
    assert_eq!(unchanged, api);

    // A viewer reads it, without a form, and cannot change it.
    let read = viewer.get(&page).await.expect(200).text;
    assert!(
        read.contains("30 days") && !read.contains("name=\"raw_days\""),
        "{read}"
    );
    let denied = viewer.post(&page, &[("raw_days", "1")]).await;
    assert_ne!(denied.status, 200);
    let still = send(app.get(&format!("/api/v2/group/{group}/retention"), &admin_token))
        .await
        .expect(200)
        .json();
    assert_eq!(still, api);
}
