//! Firmware (docs/api.md, "Firmware") over real HTTP: the public key gateways check manifests
//! with is the one of the signing key file, the same after a restart and on every node that
//! has the file, and a signature made with the key holds under it.

mod common;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::{TestApp, send};
use devicecloud_engine::firmware::signing::Signer;
use devicecloud_engine::settings::Settings;
use devicecloud_protocol::firmware::signature_holds;

#[tokio::test]
async fn the_public_key_is_the_signing_key_files_on_every_node() {
    let dir = std::env::temp_dir().join(format!("dc-firmware-key-{}", uuid::Uuid::new_v4()));
    let file = dir.join("signing.key");
    let settings = || Settings {
        signing_key_file: Some(file.clone()),
        ..Settings::default()
    };
    let first = TestApp::spawn_with(settings()).await;
    let (_, admin) = first.admin().await;
    let answer = send(first.get("/api/v2/firmware/public-key", &admin))
        .await
        .expect(200)
        .json();
    assert_eq!(answer["algorithm"], "ed25519");
    let key = answer["public_key"].as_str().unwrap().to_string();
    assert_eq!(STANDARD.decode(&key).unwrap().len(), 32);
    assert_eq!(answer.as_object().unwrap().len(), 2);

    // Another service with the same file (a second node, or this one restarted) signs alike.
    let second = TestApp::spawn_with(settings()).await;
    let (_, admin2) = second.admin().await;
    let again = send(second.get("/api/v2/firmware/public-key", &admin2))
        .await
        .expect(200)
        .json();
    assert_eq!(again["public_key"], key.as_str());
    let signer = Signer::load(Some(&file)).unwrap();
    assert!(signature_holds(&key, "manifest", &signer.sign("manifest")));

    // A service with no file has a key of its own.
    let other = TestApp::spawn().await;
    let (_, admin3) = other.admin().await;
    let theirs = send(other.get("/api/v2/firmware/public-key", &admin3))
        .await
        .expect(200)
        .json();
    assert_ne!(theirs["public_key"], key.as_str());

    let anonymous = send(first.http.get(first.url("/api/v2/firmware/public-key"))).await;
    assert_eq!(anonymous.status, 401);
    std::fs::remove_dir_all(dir).unwrap();
}
