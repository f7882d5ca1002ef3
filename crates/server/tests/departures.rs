//! Many gateways losing their connection at once (docs/gateway-protocol.md, "Transport"): every
//! one is marked disconnected with one connectivity event, however many end together.

mod common;

use std::time::Duration;

use common::gateway_client::TestGateway;
use common::{TestApp, count};

/// Gateways that connect, say hello, and then all drop their connection together.
const GATEWAYS: usize = 150;

#[tokio::test]
async fn gateways_that_leave_together_are_all_marked_disconnected_once() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Outage").await;
    let mut gateways = Vec::with_capacity(GATEWAYS);
    for i in 0..GATEWAYS {
        let mut gateway = TestGateway::connect(&app, &admin, &group, &format!("OUT-{i:03}"), "CORE").await;
        gateway.hello("CORE", serde_json::json!({})).await;
        gateways.push(gateway);
    }
    let db = &app.state.db;
    let connected = "SELECT COUNT(*) FROM physical_devices WHERE is_connected = 1";
    assert_eq!(count(db, connected).await, GATEWAYS as i64);

    // Every connection closes at the same moment (the sockets are dropped, no DISCONNECT).
    drop(gateways);
    let settled = "SELECT COUNT(*) FROM iot_devices WHERE last_disconnect_at IS NOT NULL";
    for _ in 0..200 {
        if count(db, settled).await == GATEWAYS as i64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(count(db, settled).await, GATEWAYS as i64, "every departure is written");
    assert_eq!(count(db, connected).await, 0);
    // One loss event (208, value 0, from the cloud) per gateway, and no other.
    let losses =
        "SELECT COUNT(DISTINCT source_device) FROM events WHERE event_type = 208 AND value = '0' AND from_device = 0";
    assert_eq!(count(db, losses).await, GATEWAYS as i64);
    let all_losses = "SELECT COUNT(*) FROM events WHERE event_type = 208 AND value = '0'";
    assert_eq!(count(db, all_losses).await, GATEWAYS as i64);
}
