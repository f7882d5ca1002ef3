//! Webhook delivery survives SIGKILL: `devicecloud-bench webhook-crash` kills and restarts the
//! real server under load while the receiver is down, then brings the receiver up and fails
//! unless every acknowledged point reaches it.
//!
//! The benchmark runs the `devicecloud` executable beside its own in the target directory: run
//! these tests together with the `devicecloud` package (`cargo test --workspace`, or
//! `cargo nextest run -p devicecloud -p devicecloud-bench`) so that cargo builds it in the same
//! invocation.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_devicecloud-bench");

#[test]
fn acknowledged_points_reach_the_webhook_after_kills_and_restarts() {
    let out = Command::new(BIN)
        .args(["webhook-crash", "--cycles", "3", "--gateways", "2"])
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
