//! Webhook delivery survives SIGKILL: the real binary runs `bench webhook-crash`, which kills
//! and restarts the server under load while the receiver is down, then brings the receiver up
//! and fails unless every acknowledged point reaches it.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_devicecloud");

#[test]
fn acknowledged_points_reach_the_webhook_after_kills_and_restarts() {
    let out = Command::new(BIN)
        .args(["bench", "webhook-crash", "--cycles", "3", "--gateways", "2"])
        .env("DEVICECLOUD_LOG", "error")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(", 0 missing"), "{stdout}");
}
