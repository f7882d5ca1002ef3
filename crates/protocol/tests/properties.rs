//! Property tests: random bytes, JSON-ish text and mutated valid messages never make a parser
//! panic; whatever a parser accepts obeys the protocol's rules and writes back to itself; valid
//! messages built at random survive `to_payload` → parse unchanged.
//! Cases: `PROPTEST_CASES` (proptest's default 256 otherwise).

use devicecloud_protocol::timestamp::{MAX_AHEAD_SECONDS, MIN_SECONDS};
use devicecloud_protocol::{
    Asset, CommandMethod, CommandRequest, CommandResponse, ConnectionKind, Event, GatewayTopic, Hello, MAX_BATCH,
    Measurement, ModbusWrite, ModuleKind, Power, PowerState, Rejection, Timestamp, command_topic, devices_payload,
    events_payload, measurements_payload, parse_devices, parse_events, parse_hello, parse_measurements,
    parse_modbus_writes, parse_power, parse_response, subscription_allowed, zwave_exclude,
};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};

/// The cloud's clock in every test.
const NOW: i64 = 1_763_726_400;

/// Pieces of the protocol's JSON: structure, keys, good and bad values.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    " ",
    "\"",
    "\\",
    "{\"values\":{",
    "\"device\"",
    "\"ts\"",
    "\"values\"",
    "\"type\"",
    "\"value\"",
    "\"datatype\"",
    "\"kind\"",
    "\"connection\"",
    "\"signal\"",
    "\"wifi_enabled\"",
    "\"sim\"",
    "\"location\"",
    "\"modbus_template\"",
    "\"name\"",
    "\"registers\"",
    "\"serial\"",
    "\"label\"",
    "\"state\"",
    "\"status\"",
    "\"payload\"",
    "\"method\"",
    "\"params\"",
    "\"writes\"",
    "\"ssid\"",
    "\"password\"",
    "\"node\"",
    "\"platform_software_version\"",
    "\"12\"",
    "\"0\"",
    "\"01\"",
    "\"-1\"",
    "\"1.5\"",
    "\"4294967295\"",
    "\"4294967296\"",
    "\"GO\"",
    "\"CORE\"",
    "\"PLUS\"",
    "\"go\"",
    "\"wifi\"",
    "\"cellular\"",
    "\"ethernet\"",
    "\"off\"",
    "\"ping\"",
    "\"modbus-write\"",
    "\"wifi-connect\"",
    "\"zwave-exclude\"",
    "\"MB-7781\"",
    "\"\"",
    "\"é\"",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"a\\nb\"",
    "0",
    "-0",
    "-1",
    "12",
    "200",
    "599",
    "600",
    "21.5",
    "1013",
    "1763726400",
    "1763726400.25",
    "1763726400.9999996",
    "1763812800",
    "1763812800.000001",
    "946684799.9999999",
    "946684799",
    "1e400",
    "-1e400",
    "1e308",
    "2.5e-324",
    "18446744073709551616",
    "9223372036854775808",
    "1e3",
    "0.1",
    "true",
    "false",
    "null",
    "NaN",
];

fn token() -> impl Strategy<Value = &'static str> {
    select(TOKENS)
}

/// Text stitched from protocol tokens and a few random characters.
fn jsonish() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        8 => token().prop_map(str::to_owned),
        1 => any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat().into_bytes())
}

/// A finite `f64` whose shortest decimal form has at most 15 significant digits and a small
/// exponent: serde_json (without `float_roundtrip`) reads those back exactly.
fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-999_999_999_999_999_i64..=999_999_999_999_999, -8_i32..=7).prop_map(|(m, e)| {
            if e >= 0 {
                m as f64 * 10_f64.powi(e)
            } else {
                m as f64 / 10_f64.powi(-e)
            }
        }),
        (-1000_i64..1000).prop_map(|v| v as f64),
        Just(0.0),
        Just(-0.0),
    ]
}

fn datatype() -> impl Strategy<Value = u32> {
    prop_oneof![0_u32..64, any::<u32>()]
}

/// 1 to 64 characters, no control character: a valid serial, type or device.
fn identifier() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9-]{1,16}",
        prop::collection::vec(any::<char>(), 1..=64).prop_map(|chars| chars
            .into_iter()
            .map(|c| if c.is_control() { '~' } else { c })
            .collect()),
    ]
}

/// Any text without U+0000.
fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..24).prop_map(|chars| chars.into_iter().filter(|&c| c != '\0').collect())
}

/// A timestamp inside the window the cloud accepts at [`NOW`].
fn timestamp() -> impl Strategy<Value = Timestamp> {
    (MIN_SECONDS..=NOW + MAX_AHEAD_SECONDS, 0_u32..1_000_000).prop_map(|(seconds, micros)| {
        let micros = if seconds == NOW + MAX_AHEAD_SECONDS { 0 } else { micros };
        Timestamp::new(seconds, micros).unwrap()
    })
}

fn measurement() -> impl Strategy<Value = Measurement> {
    (
        prop::option::of(identifier()),
        prop::option::of(timestamp()),
        prop::collection::vec((datatype(), value()), 0..8),
    )
        .prop_map(|(device, ts, mut values)| {
            // One value per datatype, in the generated order.
            let mut seen = std::collections::HashSet::new();
            values.retain(|(d, _)| seen.insert(*d));
            Measurement { device, ts, values }
        })
}

fn event() -> impl Strategy<Value = Event> {
    (
        prop::option::of(identifier()),
        prop::option::of(timestamp()),
        any::<i64>(),
        text(),
        prop::option::of(datatype()),
    )
        .prop_map(|(device, ts, event_type, value, datatype)| Event {
            device,
            ts,
            event_type,
            value,
            datatype,
        })
}

/// A small JSON object of the kind hello blocks carry.
fn block() -> impl Strategy<Value = Value> {
    (text(), -100_i64..100, any::<bool>()).prop_map(|(s, n, b)| json!({"text": s, "n": n, "b": b, "list": [n]}))
}

fn hello() -> impl Strategy<Value = Hello> {
    (
        (select(ModuleKind::ALL.to_vec()), select(ConnectionKind::ALL.to_vec())),
        prop::option::of(any::<i64>()),
        prop::option::of("[0-9.]{0,12}"),
        prop::option::of("[0-9a-z.-]{0,12}"),
        prop::option::of(any::<bool>()),
        prop::option::of(block()),
        prop::option::of(block()),
        prop::option::of((identifier(), prop::collection::vec(block(), 0..3))),
    )
        .prop_map(
            |((kind, connection), signal, platform, app, wifi, sim, location, template)| Hello {
                kind,
                connection,
                signal,
                platform_software_version: platform,
                app_software_version: app,
                wifi_enabled: wifi,
                sim,
                location,
                modbus_template: template.map(|(name, registers)| json!({"name": name, "registers": registers})),
            },
        )
}

fn asset() -> impl Strategy<Value = Asset> {
    (identifier(), identifier(), prop::option::of(text())).prop_map(|(serial, r#type, label)| Asset {
        serial,
        r#type,
        label: label.map(|l| l.chars().filter(|c| !c.is_control()).collect()),
    })
}

/// The methods without parameters.
const PLAIN_METHODS: &[CommandMethod] = &[
    CommandMethod::Ping,
    CommandMethod::Restart,
    CommandMethod::Status,
    CommandMethod::RequestMeasurement,
    CommandMethod::WifiScan,
    CommandMethod::WifiDisconnect,
    CommandMethod::ResetMainCounter,
    CommandMethod::ResetDailyCounter,
];

fn command() -> impl Strategy<Value = CommandRequest> {
    let write = (datatype(), value()).prop_map(|(datatype, value)| ModbusWrite { datatype, value });
    prop_oneof![
        select(PLAIN_METHODS).prop_map(CommandRequest::new),
        ("[^\u{0}]{1,32}", prop::option::of(text()))
            .prop_map(|(ssid, password)| CommandRequest::wifi_connect(&ssid, password.as_deref())),
        prop::collection::vec(write, 1..6).prop_map(|writes| CommandRequest::modbus_write(&writes)),
        identifier().prop_map(|node| zwave_exclude(&node)),
    ]
}

fn response() -> impl Strategy<Value = CommandResponse> {
    (100_u16..=599, block()).prop_map(|(status, payload)| CommandResponse { status, payload })
}

/// The payload of some valid message, of any topic.
fn valid_payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        measurement().prop_map(|m| m.to_payload()),
        prop::collection::vec(measurement(), 0..4).prop_map(|ms| measurements_payload(&ms)),
        event().prop_map(|e| e.to_payload()),
        prop::collection::vec(event(), 0..4).prop_map(|es| events_payload(&es)),
        hello().prop_map(|h| h.to_payload()),
        prop::collection::vec(asset(), 0..4).prop_map(|a| devices_payload(&a)),
        Just(Power { state: PowerState::Off }.to_payload()),
        response().prop_map(|r| r.to_payload()),
        command().prop_map(|c| c.to_payload()),
    ]
}

/// One edit of a payload; positions are taken modulo its length.
#[derive(Clone, Debug)]
enum Edit {
    Replace(usize, u8),
    Insert(usize, &'static str),
    Delete(usize, usize),
    Truncate(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::Replace(at, b)),
        (any::<usize>(), token()).prop_map(|(at, t)| Edit::Insert(at, t)),
        (any::<usize>(), 1_usize..8).prop_map(|(at, n)| Edit::Delete(at, n)),
        any::<usize>().prop_map(Edit::Truncate),
    ]
}

fn apply(mut payload: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for edit in edits {
        let len = payload.len().max(1);
        match *edit {
            Edit::Replace(at, b) => {
                if let Some(slot) = payload.get_mut(at % len) {
                    *slot = b;
                }
            }
            Edit::Insert(at, t) => {
                let at = (at % len).min(payload.len());
                payload.splice(at..at, t.bytes());
            }
            Edit::Delete(at, n) => {
                let at = (at % len).min(payload.len());
                let end = (at + n).min(payload.len());
                payload.drain(at..end);
            }
            Edit::Truncate(at) => payload.truncate(at % len),
        }
    }
    payload
}

/// Equal, or within a few ulps: serde_json's default float reading is not always exact, so a
/// value read from arbitrary text may come back one ulp away after writing it out again.
fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 4.0 * f64::EPSILON * a.abs().max(b.abs()) || (a - b).abs() < 1e-300
}

fn check_rejection(e: &Rejection) {
    let text = e.description();
    assert!(!text.is_empty());
    assert!(text.len() <= 300, "{text}");
    let _ = e.reason().as_str();
}

fn check_timestamp(ts: Option<Timestamp>) {
    if let Some(ts) = ts {
        assert!(ts.microseconds < 1_000_000);
        assert!(ts.seconds >= MIN_SECONDS);
        assert!(ts <= Timestamp::new(NOW + MAX_AHEAD_SECONDS, 0).unwrap());
    }
}

fn check_identifier(s: &str) {
    assert!(
        !s.is_empty() && s.chars().count() <= 64 && !s.chars().any(char::is_control),
        "{s:?}"
    );
}

/// Feeds one payload to every parser; whatever is accepted must obey the rules and survive
/// being written back.
fn check_all(payload: &[u8]) {
    match parse_measurements(payload, NOW) {
        Ok(ms) => {
            assert!(ms.len() <= MAX_BATCH);
            for m in &ms {
                check_timestamp(m.ts);
                m.device.as_deref().map(check_identifier);
                assert!(m.values.iter().all(|(_, v)| v.is_finite()));
            }
            let again = parse_measurements(&measurements_payload(&ms), NOW).unwrap();
            assert_eq!(again.len(), ms.len());
            for (a, b) in again.iter().zip(&ms) {
                assert_eq!((&a.device, a.ts, a.values.len()), (&b.device, b.ts, b.values.len()));
                for ((da, va), (db, vb)) in a.values.iter().zip(&b.values) {
                    assert!(da == db && close(*va, *vb), "{va} {vb}");
                }
            }
        }
        Err(e) => check_rejection(&e),
    }
    match parse_events(payload, NOW) {
        Ok(es) => {
            for e in &es {
                check_timestamp(e.ts);
                e.device.as_deref().map(check_identifier);
                assert!(!e.value.contains('\0'));
            }
            assert_eq!(parse_events(&events_payload(&es), NOW).unwrap(), es);
        }
        Err(e) => check_rejection(&e),
    }
    match parse_hello(payload) {
        Ok(h) => {
            let again = parse_hello(&h.to_payload()).unwrap();
            assert_eq!(
                (again.kind, again.connection, again.signal),
                (h.kind, h.connection, h.signal)
            );
            assert!(h.sim.as_ref().is_none_or(Value::is_object));
            assert!(h.location.as_ref().is_none_or(Value::is_object));
        }
        Err(e) => check_rejection(&e),
    }
    match parse_devices(payload) {
        Ok(assets) => {
            for a in &assets {
                check_identifier(&a.serial);
                check_identifier(&a.r#type);
            }
            assert_eq!(parse_devices(&devices_payload(&assets)).unwrap(), assets);
        }
        Err(e) => check_rejection(&e),
    }
    match parse_power(payload) {
        Ok(p) => assert_eq!(parse_power(&p.to_payload()), Ok(p)),
        Err(e) => check_rejection(&e),
    }
    match parse_response(payload) {
        Ok(r) => {
            assert!((100..=599).contains(&r.status) && !r.payload.is_null());
            assert_eq!(parse_response(&r.to_payload()).unwrap().status, r.status);
        }
        Err(e) => check_rejection(&e),
    }
    match CommandRequest::parse(payload) {
        Ok(c) => {
            assert!(c.params.is_object());
            assert_eq!(CommandRequest::parse(&c.to_payload()).unwrap().method, c.method);
        }
        Err(e) => check_rejection(&e),
    }
    if let Ok(body) = serde_json::from_slice::<Value>(payload)
        && let Ok(writes) = parse_modbus_writes(&body)
    {
        assert!(!writes.is_empty() && writes.iter().all(|w| w.value.is_finite()));
    }
    let topic = String::from_utf8_lossy(payload);
    if let Some(parsed) = GatewayTopic::parse(&topic) {
        assert_eq!(parsed.as_topic(), topic);
    }
    let _ = subscription_allowed(&topic);
}

proptest! {
    #[test]
    fn random_bytes_never_panic(payload in prop::collection::vec(any::<u8>(), 0..256)) {
        check_all(&payload);
    }

    #[test]
    fn jsonish_text_never_panics(payload in jsonish()) {
        check_all(&payload);
    }

    #[test]
    fn mutated_messages_never_panic(payload in valid_payload(), edits in prop::collection::vec(edit(), 0..4)) {
        check_all(&apply(payload, &edits));
    }

    #[test]
    fn measurements_round_trip(m in measurement()) {
        prop_assert_eq!(parse_measurements(&m.to_payload(), NOW), Ok(vec![m]));
    }

    #[test]
    fn measurement_batches_round_trip(ms in prop::collection::vec(measurement(), 0..6)) {
        prop_assert_eq!(parse_measurements(&measurements_payload(&ms), NOW), Ok(ms));
    }

    #[test]
    fn events_round_trip(es in prop::collection::vec(event(), 1..4)) {
        prop_assert_eq!(parse_events(&es[0].to_payload(), NOW), Ok(vec![es[0].clone()]));
        prop_assert_eq!(parse_events(&events_payload(&es), NOW), Ok(es));
    }

    #[test]
    fn other_messages_round_trip(
        h in hello(),
        assets in prop::collection::vec(asset(), 0..4),
        c in command(),
        r in response(),
    ) {
        prop_assert_eq!(parse_hello(&h.to_payload()), Ok(h));
        prop_assert_eq!(parse_devices(&devices_payload(&assets)), Ok(assets));
        prop_assert_eq!(CommandRequest::parse(&c.to_payload()), Ok(c));
        prop_assert_eq!(parse_response(&r.to_payload()), Ok(r));
    }

    #[test]
    fn timestamps_round_trip(seconds in 0_i64..(1 << 33), micros in 0_u32..1_000_000, unix in any::<f64>()) {
        let ts = Timestamp::new(seconds, micros).unwrap();
        prop_assert_eq!(Timestamp::from_unix_f64(ts.to_f64()), Some(ts));
        if let Some(rounded) = Timestamp::from_unix_f64(unix) {
            prop_assert!(rounded.microseconds < 1_000_000);
            if unix.abs() < 1e9 {
                let back = rounded.seconds as f64 + f64::from(rounded.microseconds) / 1e6;
                // Half a microsecond, plus the rounding of `back` itself.
                let slack = 0.5e-6 + 4.0 * f64::EPSILON * unix.abs();
                prop_assert!((back - unix).abs() <= slack, "{} → {:?}", unix, rounded);
            }
        }
    }

    #[test]
    fn request_ids_round_trip(id in "[A-Za-z0-9_-]{1,64}", other in "\\PC{0,80}") {
        let topic = GatewayTopic::Response { request_id: id.clone() };
        prop_assert_eq!(GatewayTopic::parse(&topic.as_topic()), Some(topic));
        prop_assert!(subscription_allowed(&command_topic(&id)));
        let valid = !other.is_empty()
            && other.len() <= 64
            && other.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        // `+` makes the commands filter itself.
        prop_assert_eq!(subscription_allowed(&command_topic(&other)), valid || other == "+");
        prop_assert_eq!(GatewayTopic::parse(&format!("v1/gateway/responses/{other}")).is_some(), valid);
    }
}
