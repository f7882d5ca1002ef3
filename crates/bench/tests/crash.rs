//! Acknowledged data survives SIGKILL: a short run of `devicecloud-bench crash` (docs/benchmarks.md
//! records the 20-cycle run), which exits non-zero if any acknowledged point is missing or counted
//! twice.
//!
//! The benchmark runs the `devicecloud` executable beside its own in the target directory: run
//! these tests together with the `devicecloud` package (`cargo test --workspace`, or
//! `cargo nextest run -p devicecloud -p devicecloud-bench`) so that cargo builds it in the same
//! invocation.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_devicecloud-bench");

#[test]
fn acknowledged_data_survives_sigkill() {
    let out = Command::new(BIN)
        .args(["crash", "--cycles", "3", "--gateways", "2"])
        .env("DEVICECLOUD_LOG", "error")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" 0 missing, 0 series miscounted"), "{stdout}");
}
