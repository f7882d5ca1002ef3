//! A fleet of simulated gateways speaking the gateway protocol (`docs/gateway-protocol.md`) over MQTT
//! against any devicecloud server: GO, CORE and PLUS modules with assets behind them, signals
//! that trend and counters that reset, and an answer to every command — Modbus registers that
//! a write really changes, Wi-Fi that can be disabled, restarts that reconnect, GO power cycles,
//! Z-wave nodes that can be excluded, and optional misbehaviour (slow or silent answers).
//!
//! Used by `devicecloud simulate`, by `devicecloud demo`, by the tests and by the benchmarks.

pub mod firmware;
pub mod gateway;
pub mod model;
pub mod provision;
pub mod signals;
pub mod spec;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use provision::Provisioner;
pub use spec::{Behaviour, FleetOptions, FleetStats, GatewaySpec, History, SimulatorError, Snapshot, mixed_kinds};

/// A running fleet; stopped by [`Fleet::stop`] or on drop.
#[derive(Debug)]
pub struct Fleet {
    stats: Arc<FleetStats>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    size: usize,
}

impl Fleet {
    /// Starts one task per gateway (inside a tokio runtime).
    pub fn start(specs: Vec<GatewaySpec>, options: FleetOptions) -> Fleet {
        let stats = Arc::new(FleetStats::default());
        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        let options = Arc::new(options);
        let size = specs.len();
        for (i, spec) in specs.into_iter().enumerate() {
            tracker.spawn(gateway::run(
                spec,
                i as u64 + 1,
                options.clone(),
                stats.clone(),
                shutdown.clone(),
            ));
        }
        tracker.close();
        Fleet {
            stats,
            shutdown,
            tracker,
            size,
        }
    }

    /// How many gateways it runs.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Its counters now.
    pub fn stats(&self) -> Snapshot {
        self.stats.snapshot()
    }

    /// Waits until `count` gateways are connected at the same time; `false` after `limit`.
    pub async fn wait_connected(&self, count: usize, limit: Duration) -> bool {
        self.wait_until(limit, |s| s.connected >= count as u64).await
    }

    /// Waits until `done` holds for the counters; `false` after `limit`.
    pub async fn wait_until(&self, limit: Duration, done: impl Fn(&Snapshot) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline {
            if done(&self.stats()) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        done(&self.stats())
    }

    /// Disconnects every gateway and waits for them to end.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.tracker.wait().await;
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
