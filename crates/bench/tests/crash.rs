//! Acknowledged data survives SIGKILL: short runs of `devicecloud-bench crash` (every
//! acknowledged point stored once) and `webhook-crash` (every acknowledged point reaches the
//! webhook after kills and restarts while the receiver is down). docs/benchmarks.md records the
//! long runs; each program exits non-zero when a point is missing or counted twice.
//!
//! The benchmark runs the `devicecloud` executable beside its own in the target directory: run
//! these tests together with the `devicecloud` package (`cargo test --workspace`, or
//! `cargo nextest run -p devicecloud -p devicecloud-bench`) so that cargo builds it in the same
//! invocation.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_devicecloud-bench");

/// Runs the benchmark `name` for 3 kill cycles with 2 gateways: it must succeed and its report
/// contain `expected`.
fn three_kills(name: &str, expected: &str) {
    let out = Command::new(BIN)
        .args([name, "--cycles", "3", "--gateways", "2"])
        .env("DEVICECLOUD_LOG", "error")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(expected), "{stdout}");
}

#[test]
fn acknowledged_data_survives_sigkill() {
    three_kills("crash", " 0 missing, 0 series miscounted");
}

#[test]
fn acknowledged_points_reach_the_webhook_after_kills_and_restarts() {
    three_kills("webhook-crash", ", 0 missing");
}
