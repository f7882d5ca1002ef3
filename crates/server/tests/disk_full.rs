//! A full disk (docs/operations.md, "Limits"): a write the store cannot make answers 503 with
//! `Retry-After: 5` and the error body, never 500, and writes work again once there is room.
//! The SQLite store lives on a small tmpfs mounted for the test, which needs root: without it
//! the test says so and passes, unless `DEVICECLOUD_REQUIRE_TMPFS` is set (CI sets it).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{TempDir, TestApp, assert_error, send};
use devicecloud_server::Settings;
use reqwest::Method;
use serde_json::json;

/// A tmpfs of a few MiB, unmounted when dropped.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(at: &Path) -> Option<SmallDisk> {
        std::fs::create_dir_all(at).ok()?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=6m,mode=0700", "tmpfs"])
            .arg(at)
            .status()
            .ok()?
            .success();
        mounted.then(|| SmallDisk(at.to_path_buf()))
    }

    /// Writes a file until the disk is full; returns its path.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.0.join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let block = vec![0u8; 64 * 1024];
        while file.write_all(&block).is_ok() {}
        // The last, partial block.
        while file.write_all(&block[..512]).is_ok() {}
        let _ = file.sync_all();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[tokio::test]
async fn a_write_on_a_full_disk_is_a_503_and_works_again_with_room() {
    if std::env::var_os("DEVICECLOUD_TEST_DATABASE_URL").is_some() {
        // The PostgreSQL store's disk is the database server's.
        return;
    }
    let parent = TempDir::new();
    let Some(disk) = SmallDisk::mount(&parent.0.join("disk")) else {
        assert!(
            std::env::var_os("DEVICECLOUD_REQUIRE_TMPFS").is_none(),
            "cannot mount a tmpfs (needs root)"
        );
        eprintln!("skipped: cannot mount a tmpfs (needs root)");
        return;
    };
    let db_url = format!("sqlite://{}", disk.0.join("test.db").display());
    let app = TestApp::start(TempDir(disk.0.clone()), db_url, Settings::default(), None).await;
    let (_, admin) = app.admin().await;
    app.create_group(&admin, "before").await;

    let filler = disk.fill();
    let mut refused = 0;
    for i in 0..200 {
        let body = json!({"label": format!("group {i} {}", "x".repeat(200))});
        let reply = send(app.request(Method::POST, "/api/v2/group", &admin).json(&body)).await;
        match reply.status {
            201 => {}
            503 => {
                assert_eq!(reply.header("retry-after"), Some("5"));
                let body = reply.json();
                assert_error(&body, 503);
                assert!(body["message"].as_str().unwrap().contains("disk is full"), "{body}");
                refused += 1;
                if refused >= 3 {
                    break;
                }
            }
            other => panic!("a write on a full disk answered {other}: {}", reply.text),
        }
    }
    assert!(refused >= 3, "the full disk never refused a write");
    // Reads still work.
    assert_eq!(send(app.get("/api/v2/group", &admin)).await.status, 200);

    std::fs::remove_file(filler).unwrap();
    let again = send(
        app.request(Method::POST, "/api/v2/group", &admin)
            .json(&json!({"label": "after"})),
    )
    .await;
    assert_eq!(again.status, 201, "{}", again.text);
    app.stop();
    drop(app);
    drop(disk);
}
