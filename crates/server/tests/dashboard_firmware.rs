//! The dashboard's firmware pages over real HTTP (docs/api.md, "Firmware"): an image uploaded
//! through the form (its CSRF token checked before a byte is stored) and listed, a form error
//! shown again with its values, a campaign started from the image and shown, a gateway's
//! versions and update history on its page, and deletion.

mod common;

use common::browser::Browser;
use common::{TestApp, count};
use devicecloud_protocol::ModuleKind;
use devicecloud_simulator::Provisioner;
use reqwest::multipart::{Form, Part};

const PASSWORD: &str = "firmware-password";

/// The upload form's parts, the CSRF token first as the page sends it.
fn form(csrf: Option<&str>, version: &str, id_group: &str, bytes: Vec<u8>) -> Form {
    let mut form = Form::new();
    if let Some(csrf) = csrf {
        form = form.text("_csrf", csrf.to_string());
    }
    form.text("kind", "CORE")
        .text("component", "app")
        .text("version", version.to_string())
        .text("id_group", id_group.to_string())
        .part("file", Part::bytes(bytes).file_name("app.bin"))
}

#[tokio::test]
async fn an_image_is_uploaded_through_the_form_and_a_campaign_started_with_it() {
    let app = TestApp::spawn().await;
    app.create_user("root@example.com", PASSWORD, true).await;
    let token = app.token("root@example.com", PASSWORD).await;
    let provisioner = Provisioner::new(&app.base, &token);
    let group = provisioner.create_group("Plant F").await.unwrap();
    let gateway = provisioner
        .gateway(&group, "FW-DASH-1", ModuleKind::Core)
        .await
        .unwrap();
    let mut browser = Browser::new(&app);
    browser.sign_in("root@example.com", PASSWORD).await.expect(303);

    let page = browser.get("/firmware").await.expect(200);
    assert!(page.text.contains("No firmware images yet"), "{}", page.text);
    assert!(page.text.contains(r#"enctype="multipart/form-data""#));

    // Without the CSRF token: refused before anything is stored.
    let refused = browser
        .post_multipart("/firmware", form(None, "1.0.0", &group, vec![7; 300 * 1024]))
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    assert_eq!(count(&app.state.db, "SELECT COUNT(*) FROM firmware_chunks").await, 0);

    let csrf = browser.csrf.clone();
    browser
        .post_multipart("/firmware", form(Some(&csrf), "1.0.0", &group, vec![7; 300 * 1024]))
        .await
        .expect(303);
    let page = browser.get("/firmware").await.expect(200);
    assert!(
        page.text.contains("1.0.0") && page.text.contains("300.0 KiB"),
        "{}",
        page.text
    );

    // The same version again: the form comes back with the error and the values sent.
    let csrf = browser.csrf.clone();
    let again = browser
        .post_multipart("/firmware", form(Some(&csrf), "1.0.0", &group, vec![8; 10]))
        .await
        .expect(422);
    assert!(again.text.contains("exists for this group"), "{}", again.text);
    assert!(again.text.contains(r#"value="1.0.0""#), "{}", again.text);

    // A campaign from the image's link: the form comes with the image chosen.
    let firmware: serde_json::Value = common::send(app.get("/api/v2/firmware", &token))
        .await
        .expect(200)
        .json();
    let id = firmware["items"][0]["id_firmware"].as_str().unwrap().to_string();
    let jobs = browser.get(&format!("/jobs?firmware={id}")).await.expect(200);
    assert!(
        jobs.text.contains(&format!(r#"<option value="{id}" selected>"#)),
        "{}",
        jobs.text
    );
    let created = browser
        .post(
            "/jobs",
            &[
                ("label", "app 1.0.0"),
                ("id_group", &group),
                ("kind", "firmware"),
                ("id_firmware", &id),
                ("timeout_s", "1"),
            ],
        )
        .await
        .expect(303);
    let job_path = created.header("location").unwrap().to_string();
    // The gateway never connects: the execution stays pending; the job's page shows it.
    let job = browser.get(&job_path).await.expect(200);
    assert!(
        job.text.contains(&format!("{{&quot;firmware&quot;:&quot;{id}&quot;}}")),
        "{}",
        job.text
    );
    assert!(job.text.contains("pending"), "{}", job.text);
    let device = browser
        .get(&format!("/devices/{}", gateway.id.as_deref().unwrap()))
        .await
        .expect(200);
    assert!(device.text.contains("<h2>Firmware</h2>"), "{}", device.text);
    assert!(
        device.text.contains(&format!(r#"<a href="{job_path}">app 1.0.0</a>"#)),
        "{}",
        device.text
    );

    // While the campaign has executions left, the image stays; cancelled, it goes.
    let busy = browser.post(&format!("/firmware/{id}/delete"), &[]).await;
    assert_eq!(busy.status, 409, "{}", busy.text);
    browser.post(&format!("{job_path}/cancel"), &[]).await.expect(303);
    browser.post(&format!("/firmware/{id}/delete"), &[]).await.expect(303);
    assert!(browser.get("/firmware").await.text.contains("No firmware images yet"));
}
