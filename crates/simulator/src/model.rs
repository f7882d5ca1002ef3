//! What one simulated gateway is and does, without any I/O: its assets, its signals, and its answer
//! to every command of docs/gateway-protocol.md, "Commands". The MQTT side (`gateway`) only carries
//! it.

use std::collections::BTreeMap;

use devicecloud_protocol::firmware::UpdateParams;
use devicecloud_protocol::{
    Asset, CommandMethod, CommandRequest, CommandResponse, ConnectionKind, Hello, Measurement, ModuleKind, Timestamp,
    parse_modbus_writes,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::signals::{Counter, Trend};

/// Datatypes the gateways report; Modbus registers are the datatypes the gateway assigned.
pub mod datatype {
    /// Module temperature, °C.
    pub const TEMPERATURE: u32 = 1;
    /// Input voltage, V.
    pub const INPUT_VOLTAGE: u32 = 2;
    /// Flow-meter main counter, m³ (CORE and PLUS).
    pub const MAIN_COUNTER: u32 = 10;
    /// Flow-meter daily counter, m³ (CORE and PLUS).
    pub const DAILY_COUNTER: u32 = 11;
    /// Modbus holding register: flow set point (writable).
    pub const SETPOINT: u32 = 12;
    /// Modbus holding register: pump mode (writable).
    pub const MODE: u32 = 13;
    /// Modbus input: measured flow, m³/h.
    pub const FLOW: u32 = 14;
    /// Vibration of the GO module's sensor, mm/s.
    pub const VIBRATION: u32 = 20;
    /// Z-wave node temperature, °C.
    pub const NODE_TEMPERATURE: u32 = 30;
}

/// Outcome code of event 420 (docs/gateway-protocol.md, "Commands").
pub const ZWAVE_EXCLUDED: &str = "0";
/// Event type of the Z-wave exclusion outcome.
pub const ZWAVE_EXCLUSION_EVENT: i64 = 420;

/// What the gateway does after answering a command.
#[derive(Debug, Clone, PartialEq)]
pub enum FollowUp {
    /// `restart`: disconnect and connect again (a new hello).
    Restart,
    /// `request-measurement`: publish the latest values of every asset now.
    PublishLatest,
    /// `zwave-exclude`: report the outcome as event 420 on the node.
    ZwaveOutcome { node: String, value: String },
    /// `update` accepted: download, check and install the image, restart, and say hello with
    /// the new version (docs/gateway-protocol.md, "Firmware update").
    Install(Box<UpdateParams>),
}

/// How a rehearsed firmware failure shows (`--fail-updates`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateFailure {
    /// The install fails and the gateway says so: event 221 with the cause.
    Reported,
    /// The new image does not boot: the gateway restarts on the old version (a rollback).
    RolledBack,
}

/// Event type a gateway publishes when it cannot install an image.
pub const FIRMWARE_FAILED_EVENT: i64 = 221;

/// One simulated gateway's state.
#[derive(Debug)]
pub struct Model {
    pub serial: String,
    pub kind: ModuleKind,
    pub wifi_enabled: bool,
    wifi_ssid: Option<String>,
    /// Writable Modbus registers by datatype (CORE and PLUS).
    registers: BTreeMap<u32, f64>,
    /// Serials of the Z-wave nodes still included (PLUS).
    zwave_nodes: Vec<String>,
    main_counter: Counter,
    daily_counter: Counter,
    temperature: Trend,
    flow: Trend,
    rng: StdRng,
    boot_at: f64,
    last_tick: Option<f64>,
    reset_cause: &'static str,
    /// The installed versions, as hello reports them.
    platform_version: String,
    app_version: String,
    /// The key firmware images are checked with; `None`: updates are refused.
    firmware_key: Option<String>,
}

impl Model {
    /// A gateway of `kind`; `seed` makes its signals differ from its neighbours' yet repeatable.
    pub fn new(serial: &str, kind: ModuleKind, wifi_enabled: bool, seed: u64, now: f64) -> Model {
        let mut rng = StdRng::seed_from_u64(seed);
        let phase = rng.random_range(0.0..1.0);
        let (registers, zwave_nodes) = match kind {
            ModuleKind::Go => (BTreeMap::new(), Vec::new()),
            ModuleKind::Core => (Self::initial_registers(), Vec::new()),
            ModuleKind::Plus => (
                Self::initial_registers(),
                vec![format!("{serial}-ZW1"), format!("{serial}-ZW2")],
            ),
        };
        Model {
            serial: serial.to_string(),
            kind,
            wifi_enabled: wifi_enabled && kind != ModuleKind::Go,
            wifi_ssid: None,
            registers,
            zwave_nodes,
            main_counter: Counter::default(),
            daily_counter: Counter::default(),
            temperature: Trend {
                base: 21.0,
                amplitude: 4.0,
                period_s: 86_400.0,
                noise: 0.3,
                phase,
            },
            flow: Trend {
                base: 40.0,
                amplitude: 15.0,
                period_s: 6.0 * 3600.0,
                noise: 2.0,
                phase,
            },
            rng,
            boot_at: now,
            last_tick: None,
            reset_cause: "POWERON",
            platform_version: "5.1.2".into(),
            app_version: "2.4.0".into(),
            firmware_key: None,
        }
    }

    fn initial_registers() -> BTreeMap<u32, f64> {
        BTreeMap::from([(datatype::SETPOINT, 50.0), (datatype::MODE, 1.0)])
    }

    fn modbus_serial(&self) -> String {
        format!("{}-MB1", self.serial)
    }

    fn sensor_serial(&self) -> String {
        format!("{}-S1", self.serial)
    }

    /// The birth message (docs/gateway-protocol.md, "Messages").
    pub fn hello(&self) -> Hello {
        let connection = match (self.kind, &self.wifi_ssid) {
            (ModuleKind::Go, _) => ConnectionKind::Cellular,
            (_, Some(_)) => ConnectionKind::Wifi,
            _ => ConnectionKind::Ethernet,
        };
        let mut hello = Hello::new(self.kind, connection);
        hello.signal = Some(17);
        hello.platform_software_version = Some(self.platform_version.clone());
        hello.app_software_version = Some(self.app_version.clone());
        hello.wifi_enabled = Some(self.wifi_enabled);
        if !self.registers.is_empty() {
            hello.modbus_template = Some(json!({"name": "flowmeter-v2", "registers": [
                {"datatype": datatype::SETPOINT, "address": 40001, "type": "u16", "scale": 1, "label": "Flow set point", "unit": "m3/h"},
                {"datatype": datatype::MODE, "address": 40002, "type": "u16", "scale": 1, "label": "Pump mode", "unit": ""},
            ]}));
        }
        hello
    }

    /// The assets behind the gateway (docs/gateway-protocol.md, "Messages").
    pub fn assets(&self) -> Vec<Asset> {
        let mut assets = Vec::new();
        if self.kind == ModuleKind::Go {
            assets.push(Asset {
                serial: self.sensor_serial(),
                r#type: "sensor".into(),
                label: Some("Vibration sensor".into()),
            });
        }
        if !self.registers.is_empty() {
            assets.push(Asset {
                serial: self.modbus_serial(),
                r#type: "modbus".into(),
                label: Some("Flow meter".into()),
            });
        }
        for node in &self.zwave_nodes {
            assets.push(Asset {
                serial: node.clone(),
                r#type: "zwave".into(),
                label: Some("Room sensor".into()),
            });
        }
        assets
    }

    /// The readings at Unix time `now`: the module's own, and one per asset. Counters advance
    /// with the flow since the previous reading.
    pub fn measurements(&mut self, now: f64) -> Vec<Measurement> {
        let ts = Timestamp::from_unix_f64(now);
        let elapsed = self.last_tick.map_or(0.0, |last| (now - last).max(0.0));
        self.last_tick = Some(now);
        let temperature = self.temperature.at(now, &mut self.rng);
        let voltage = ((12.0 + self.rng.random_range(-0.2..0.2_f64)) * 100.0).round() / 100.0;
        let mut own = vec![(datatype::TEMPERATURE, temperature), (datatype::INPUT_VOLTAGE, voltage)];
        let mut out = Vec::new();
        if !self.registers.is_empty() {
            // The flow follows the set point the operator wrote, so a write shows in the data.
            let setpoint = self.registers.get(&datatype::SETPOINT).copied().unwrap_or(0.0);
            let flow = (self.flow.at(now, &mut self.rng) * setpoint / 50.0).max(0.0);
            let amount = flow * elapsed / 3600.0;
            self.main_counter.advance(now, amount, false);
            self.daily_counter.advance(now, amount, true);
            own.push((datatype::MAIN_COUNTER, self.main_counter.value));
            own.push((datatype::DAILY_COUNTER, self.daily_counter.value));
            let mut values: Vec<(u32, f64)> = self.registers.iter().map(|(d, v)| (*d, *v)).collect();
            values.push((datatype::FLOW, (flow * 1000.0).round() / 1000.0));
            out.push(Measurement {
                device: Some(self.modbus_serial()),
                ts,
                values,
            });
        }
        if self.kind == ModuleKind::Go {
            let vibration = (self.rng.random_range(0.5..4.0_f64) * 100.0).round() / 100.0;
            out.push(Measurement {
                device: Some(self.sensor_serial()),
                ts,
                values: vec![(datatype::VIBRATION, vibration)],
            });
        }
        for node in &self.zwave_nodes {
            let t = ((temperature - 2.0 + self.rng.random_range(-0.5..0.5)) * 10.0).round() / 10.0;
            out.push(Measurement {
                device: Some(node.clone()),
                ts,
                values: vec![(datatype::NODE_TEMPERATURE, t)],
            });
        }
        out.insert(
            0,
            Measurement {
                device: None,
                ts,
                values: own,
            },
        );
        out
    }

    /// The current register values (what a later measurement reports).
    pub fn register(&self, datatype: u32) -> Option<f64> {
        self.registers.get(&datatype).copied()
    }

    /// Answers one command (docs/gateway-protocol.md, "Commands") and says what follows it.
    pub fn answer(&mut self, request: &CommandRequest, now: f64) -> (CommandResponse, Option<FollowUp>) {
        let success = |payload: Value| CommandResponse::success(payload);
        match request.method {
            CommandMethod::Ping => (success(json!({"data": "pong", "result": "success"})), None),
            CommandMethod::Restart => {
                self.reset_cause = "SW_RESET";
                (success(json!({"result": "success"})), Some(FollowUp::Restart))
            }
            CommandMethod::Status => (success(self.self_test(now)), None),
            CommandMethod::RequestMeasurement => (success(json!({"result": "success"})), Some(FollowUp::PublishLatest)),
            CommandMethod::WifiScan | CommandMethod::WifiConnect | CommandMethod::WifiDisconnect => {
                (self.wifi(request), None)
            }
            CommandMethod::ResetMainCounter => {
                self.main_counter.reset();
                (success(json!({"status": "200"})), None)
            }
            CommandMethod::ResetDailyCounter => {
                self.daily_counter.reset();
                (success(json!({"status": "200"})), None)
            }
            CommandMethod::ModbusWrite => (self.modbus_write(request), None),
            CommandMethod::ZwaveExclude => self.zwave_exclude(request),
            CommandMethod::Update => match self.update(request) {
                Ok(params) => (
                    CommandResponse {
                        status: 202,
                        payload: json!({"result": "accepted"}),
                    },
                    Some(FollowUp::Install(Box::new(params))),
                ),
                Err(cause) => (
                    CommandResponse {
                        status: 400,
                        payload: json!({"result": "failed", "cause": cause}),
                    },
                    None,
                ),
            },
        }
    }

    /// The image an `update` names, if this gateway may install it: it has the service's key, and
    /// the manifest's signature holds, says what the command says and is for its kind. The
    /// cause otherwise (docs/gateway-protocol.md, "Firmware update").
    fn update(&self, request: &CommandRequest) -> Result<UpdateParams, String> {
        let key = self
            .firmware_key
            .as_deref()
            .ok_or("this gateway has no firmware source")?;
        let params = UpdateParams::read(&request.params).map_err(|e| e.to_string())?;
        crate::firmware::check_manifest(&params, self.kind.as_str(), key)?;
        Ok(params)
    }

    /// This gateway checks images with `key` (the service's public key); without one it refuses
    /// every update.
    pub fn with_firmware_key(mut self, key: Option<String>) -> Model {
        self.firmware_key = key;
        self
    }

    /// Installs `version` of `component` (it shows from the next hello).
    pub fn install(&mut self, component: &str, version: &str) {
        if component == "platform" {
            self.platform_version = version.to_string();
        } else {
            self.app_version = version.to_string();
        }
    }

    /// Whether this install is one of the `percent` made to fail, and how.
    pub fn update_fails(&mut self, percent: u8) -> Option<UpdateFailure> {
        if self.rng.random_range(0..100) >= u32::from(percent.min(100)) {
            return None;
        }
        Some(if self.rng.random_bool(0.5) {
            UpdateFailure::Reported
        } else {
            UpdateFailure::RolledBack
        })
    }

    fn self_test(&mut self, now: f64) -> Value {
        let uptime = (now - self.boot_at).max(0.0) as i64;
        let sats = if self.kind == ModuleKind::Go { 9 } else { 0 };
        json!({
            "isGnssOk": self.kind == ModuleKind::Go,
            "isModemConnected": self.kind == ModuleKind::Go || self.wifi_ssid.is_none(),
            "isInputVoltageOk": true,
            "isAteccOk": true,
            "isSpiffsOk": true,
            "inputVoltage": ((12.0 + self.rng.random_range(-0.2..0.2)) * 100.0_f64).round() / 100.0,
            "ModemInfo": "BG95-M3 rev 2.0",
            "WifiInfo": match (&self.wifi_ssid, self.wifi_enabled) {
                (Some(ssid), _) => format!("connected to {ssid}"),
                (None, true) => "idle".to_string(),
                (None, false) => "disabled".to_string(),
            },
            "EthernetInfo": if self.kind == ModuleKind::Go { "absent" } else { "link up 100 Mbit/s" },
            "resetCause": self.reset_cause,
            "result": "success",
            "SatsInView": sats + 3,
            "SatsInUse": sats,
            "uptime": uptime,
            "minFreeHeap": 81_920,
            "freeHeap": 98_304 + self.rng.random_range(0..4096),
            "internalFreeHeap": 65_536,
            "minInternalFreeHeap": 49_152,
            "externalFreeHeap": 2_097_152,
            "minExternalFreeHeap": 1_966_080,
            "nvsUsedEntries": 112,
            "nvsFreeEntries": 392,
            "spiffsUsage": 143_360,
            "spiffsTotal": 1_048_576,
        })
    }

    /// Access points in reach: the same three networks, with signals that move a little.
    fn access_points(&mut self) -> Value {
        let aps: Vec<Value> = [
            ("plant-3", "A4C1380F2B10", 1),
            ("plant-guest", "A4C1380F2B11", 6),
            ("", "F09FC2A1B2C3", 11),
        ]
        .iter()
        .map(|(ssid, mac, channel)| {
            json!({"ssid": ssid, "macAddress": mac, "signalStrength": -50 - self.rng.random_range(0..30), "channel": channel})
        })
        .collect();
        Value::Array(aps)
    }

    fn wifi(&mut self, request: &CommandRequest) -> CommandResponse {
        if !self.wifi_enabled {
            return CommandResponse::failure(501, "Wifi disabled");
        }
        match request.method {
            CommandMethod::WifiConnect => {
                self.wifi_ssid = request.params.get("ssid").and_then(Value::as_str).map(str::to_string);
            }
            CommandMethod::WifiDisconnect => self.wifi_ssid = None,
            _ => {}
        }
        CommandResponse::success(json!({"wifiAccessPoints": self.access_points(), "result": "success"}))
    }

    /// Writes every register or none: an unknown datatype fails the whole request.
    fn modbus_write(&mut self, request: &CommandRequest) -> CommandResponse {
        let writes = match request.params.get("writes").map(parse_modbus_writes) {
            Some(Ok(writes)) => writes,
            _ => return CommandResponse::failure(400, "Invalid writes"),
        };
        if let Some(unknown) = writes.iter().find(|w| !self.registers.contains_key(&w.datatype)) {
            return CommandResponse::failure(400, &format!("No Modbus register with datatype {}", unknown.datatype));
        }
        for w in writes {
            self.registers.insert(w.datatype, w.value);
        }
        CommandResponse::success(json!({"result": "success"}))
    }

    fn zwave_exclude(&mut self, request: &CommandRequest) -> (CommandResponse, Option<FollowUp>) {
        let node = request.params.get("node").and_then(Value::as_str).unwrap_or_default();
        match self.zwave_nodes.iter().position(|n| n == node) {
            Some(i) => {
                let node = self.zwave_nodes.remove(i);
                (
                    CommandResponse::success(json!({"result": "accepted"})),
                    Some(FollowUp::ZwaveOutcome {
                        node,
                        value: ZWAVE_EXCLUDED.to_string(),
                    }),
                )
            }
            None => (CommandResponse::failure(404, "Unknown Z-wave node"), None),
        }
    }

    /// The Z-wave nodes still included.
    pub fn zwave_nodes(&self) -> &[String] {
        &self.zwave_nodes
    }

    /// A restart: uptime starts again.
    pub fn rebooted(&mut self, now: f64) {
        self.boot_at = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devicecloud_protocol::{ModbusWrite, zwave_exclude};

    fn model(kind: ModuleKind, wifi: bool) -> Model {
        Model::new("SIM-1", kind, wifi, 7, 1_763_726_400.0)
    }

    #[test]
    fn modbus_writes_show_in_later_measurements() {
        let mut m = model(ModuleKind::Core, true);
        let write = CommandRequest::modbus_write(&[ModbusWrite {
            datatype: datatype::SETPOINT,
            value: 75.0,
        }]);
        let (response, _) = m.answer(&write, 1_763_726_401.0);
        assert_eq!(response.status, 200);
        let readings = m.measurements(1_763_726_402.0);
        let modbus = readings
            .iter()
            .find(|r| r.device.as_deref() == Some("SIM-1-MB1"))
            .unwrap();
        assert!(modbus.values.contains(&(datatype::SETPOINT, 75.0)));
        let unknown = CommandRequest::modbus_write(&[ModbusWrite {
            datatype: 99,
            value: 1.0,
        }]);
        assert_eq!(m.answer(&unknown, 0.0).0.status, 400);
    }

    #[test]
    fn wifi_can_be_disabled() {
        let mut off = model(ModuleKind::Plus, false);
        let scan = CommandRequest::new(CommandMethod::WifiScan);
        assert_eq!(off.answer(&scan, 0.0).0, CommandResponse::failure(501, "Wifi disabled"));
        let mut on = model(ModuleKind::Plus, true);
        let (r, _) = on.answer(&CommandRequest::wifi_connect("plant-3", None), 0.0);
        assert_eq!(r.status, 200);
        assert_eq!(r.payload["wifiAccessPoints"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn zwave_nodes_are_excluded_once() {
        let mut m = model(ModuleKind::Plus, true);
        let (r, follow) = m.answer(&zwave_exclude("SIM-1-ZW1"), 0.0);
        assert_eq!(r.payload, json!({"result": "accepted"}));
        assert_eq!(
            follow,
            Some(FollowUp::ZwaveOutcome {
                node: "SIM-1-ZW1".into(),
                value: "0".into()
            })
        );
        assert_eq!(m.zwave_nodes(), ["SIM-1-ZW2"]);
        assert_eq!(m.answer(&zwave_exclude("SIM-1-ZW1"), 0.0).0.status, 404);
    }

    #[test]
    fn counters_reset_by_command() {
        let mut m = model(ModuleKind::Core, true);
        m.measurements(1_763_726_400.0);
        m.measurements(1_763_730_000.0);
        let counter = |m: &mut Model, t| {
            m.measurements(t)[0]
                .values
                .iter()
                .find(|(d, _)| *d == datatype::MAIN_COUNTER)
                .unwrap()
                .1
        };
        assert!(counter(&mut m, 1_763_730_001.0) > 0.0);
        let (r, _) = m.answer(&CommandRequest::new(CommandMethod::ResetMainCounter), 0.0);
        assert_eq!(r.payload, json!({"status": "200"}));
        assert!(counter(&mut m, 1_763_730_002.0) < 1.0);
    }
}
