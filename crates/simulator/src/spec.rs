//! What a simulated fleet is made of: its gateways and their behaviour, the options of a run,
//! the counters it keeps, and the simulator's errors.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use devicecloud_protocol::ModuleKind;

/// Errors of the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimulatorError {
    /// The REST API refused or failed a provisioning call.
    #[error("API: {0}")]
    Api(String),
    /// A `SERIAL:TOKEN:KIND` text that does not parse.
    #[error("{0}")]
    BadSpec(String),
}

/// How a gateway answers commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Behaviour {
    /// At once.
    #[default]
    Normal,
    /// After this delay.
    Slow(Duration),
    /// Never (the server's timeout then answers).
    Silent,
}

/// One gateway of the fleet: its credentials and how it behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewaySpec {
    /// The device id, when known (provisioned by the simulator).
    pub id: Option<String>,
    pub serial: String,
    pub token: String,
    pub kind: ModuleKind,
    /// Whether Wi-Fi commands work (CORE and PLUS); disabled ones answer 501 `Wifi disabled`.
    pub wifi_enabled: bool,
    pub behaviour: Behaviour,
}

impl GatewaySpec {
    /// A well-behaved gateway with Wi-Fi enabled.
    pub fn new(serial: &str, token: &str, kind: ModuleKind) -> GatewaySpec {
        GatewaySpec {
            id: None,
            serial: serial.to_string(),
            token: token.to_string(),
            kind,
            wifi_enabled: true,
            behaviour: Behaviour::Normal,
        }
    }

    /// Parses `SERIAL:TOKEN:KIND` (kind GO, CORE or PLUS).
    pub fn parse(text: &str) -> Result<GatewaySpec, SimulatorError> {
        let bad = || SimulatorError::BadSpec(format!("{text:?} is not SERIAL:TOKEN:KIND (kind GO, CORE or PLUS)"));
        let mut parts = text.splitn(3, ':');
        let (Some(serial), Some(token), Some(kind)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad());
        };
        let kind: ModuleKind = kind.parse().map_err(|_| bad())?;
        if serial.is_empty() || token.is_empty() {
            return Err(bad());
        }
        Ok(GatewaySpec::new(serial, token, kind))
    }
}

/// GO, CORE, PLUS, GO, … for `count` gateways.
pub fn mixed_kinds(count: usize) -> Vec<ModuleKind> {
    [ModuleKind::Go, ModuleKind::Core, ModuleKind::Plus]
        .into_iter()
        .cycle()
        .take(count)
        .collect()
}

/// Settings shared by the gateways of a fleet.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    pub mqtt_host: String,
    pub mqtt_port: u16,
    /// Time between two measurement messages of one gateway; zero sends none (commands only).
    pub interval: Duration,
    /// GO modules turn off (power message, data session closed) and on again this often.
    pub power_cycle: Option<Duration>,
    /// How long a GO module stays off in a power cycle (a parked van sends nothing).
    pub power_off: Duration,
    /// Past readings each CORE and PLUS gateway sends once, oldest first, after its first
    /// connection and before live data, so that charts have a history from the start.
    pub history: Option<History>,
    /// Where `update` commands are downloaded from and checked with; `None`: the gateways
    /// refuse updates (400, no source).
    pub firmware: Option<crate::firmware::FirmwareSource>,
}

/// A stretch of past readings: one every `step` over the `span` before the fleet started.
/// GO modules send none: their data belongs to the data session of each power-on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct History {
    pub span: Duration,
    pub step: Duration,
}

impl FleetOptions {
    /// Gateways that measure every `interval` against the MQTT endpoint at `addr`.
    pub fn new(addr: std::net::SocketAddr, interval: Duration) -> FleetOptions {
        FleetOptions {
            mqtt_host: addr.ip().to_string(),
            mqtt_port: addr.port(),
            interval,
            power_cycle: None,
            power_off: Duration::from_secs(2),
            history: None,
            firmware: None,
        }
    }
}

/// Counters of a running fleet.
#[derive(Debug, Default)]
pub struct FleetStats {
    /// Gateways connected now (hello and subscription acknowledged).
    pub connected: AtomicU64,
    /// Connections made, reconnects included.
    pub connects: AtomicU64,
    /// Measurements (one timestamp of one device) published.
    pub measurements: AtomicU64,
    /// Commands answered.
    pub commands: AtomicU64,
    /// GO power cycles.
    pub power_cycles: AtomicU64,
    /// Firmware images installed (checked, then booted).
    pub updates: AtomicU64,
    /// Firmware updates that failed: refused, a download or check that failed, a rehearsed
    /// failure or rollback.
    pub update_failures: AtomicU64,
}

/// A point-in-time copy of [`FleetStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    pub connected: u64,
    pub connects: u64,
    pub measurements: u64,
    pub commands: u64,
    pub power_cycles: u64,
    pub updates: u64,
    pub update_failures: u64,
}

impl FleetStats {
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            connected: self.connected.load(Ordering::Relaxed),
            connects: self.connects.load(Ordering::Relaxed),
            measurements: self.measurements.load(Ordering::Relaxed),
            commands: self.commands.load(Ordering::Relaxed),
            power_cycles: self.power_cycles.load(Ordering::Relaxed),
            updates: self.updates.load(Ordering::Relaxed),
            update_failures: self.update_failures.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        let spec = GatewaySpec::parse("GW-1:abc:def:PLUS").unwrap_err();
        assert!(spec.to_string().contains("SERIAL:TOKEN:KIND"));
        let spec = GatewaySpec::parse("GW-1:tok:PLUS").unwrap();
        assert_eq!(
            (spec.serial.as_str(), spec.token.as_str(), spec.kind),
            ("GW-1", "tok", ModuleKind::Plus)
        );
        assert!(GatewaySpec::parse("GW-1:tok").is_err());
        assert!(GatewaySpec::parse(":tok:GO").is_err());
        assert_eq!(
            mixed_kinds(4),
            [ModuleKind::Go, ModuleKind::Core, ModuleKind::Plus, ModuleKind::Go]
        );
    }
}
