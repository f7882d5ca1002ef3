//! Unit tests of command methods and requests.

use serde_json::json;

use super::*;
use crate::RejectReason;

#[test]
fn method_names() {
    let names: Vec<_> = CommandMethod::ALL.iter().map(CommandMethod::as_str).collect();
    assert_eq!(
        names,
        [
            "ping",
            "restart",
            "status",
            "request-measurement",
            "wifi-scan",
            "wifi-connect",
            "wifi-disconnect",
            "reset-main-counter",
            "reset-daily-counter",
            "modbus-write",
            "zwave-exclude",
        ]
    );
    for method in CommandMethod::ALL {
        assert_eq!(CommandMethod::parse(method.as_str()), Some(method));
        assert_eq!(method.to_string(), method.as_str());
        // serde agrees with as_str.
        assert_eq!(serde_json::to_value(method).unwrap(), json!(method.as_str()));
        assert_eq!(
            serde_json::from_value::<CommandMethod>(json!(method.as_str())).unwrap(),
            method
        );
    }
    for bad in ["", "Ping", "PING", "wifi_connect", "wifi", "self-test", "ping "] {
        assert_eq!(CommandMethod::parse(bad), None, "{bad}");
    }
}

#[test]
fn supported_kinds() {
    for method in CommandMethod::ALL {
        let wifi = matches!(
            method,
            CommandMethod::WifiScan | CommandMethod::WifiConnect | CommandMethod::WifiDisconnect
        );
        assert_eq!(method.supported_by(ModuleKind::Go), !wifi, "{method}");
        assert!(method.supported_by(ModuleKind::Core), "{method}");
        assert!(method.supported_by(ModuleKind::Plus), "{method}");
    }
}

#[test]
fn builds_requests() {
    let ping = CommandRequest::new(CommandMethod::Ping);
    assert_eq!(
        String::from_utf8(ping.to_payload()).unwrap(),
        r#"{"method":"ping","params":{}}"#
    );
    let wifi = CommandRequest::wifi_connect("plant-3", Some("secret"));
    assert_eq!(
        String::from_utf8(wifi.to_payload()).unwrap(),
        r#"{"method":"wifi-connect","params":{"ssid":"plant-3","password":"secret"}}"#
    );
    assert_eq!(
        CommandRequest::wifi_connect("open", None).params,
        json!({"ssid": "open"})
    );
    let modbus = CommandRequest::modbus_write(&[
        ModbusWrite {
            datatype: 12,
            value: 5.0,
        },
        ModbusWrite {
            datatype: 13,
            value: 0.5,
        },
    ]);
    assert_eq!(
        String::from_utf8(modbus.to_payload()).unwrap(),
        r#"{"method":"modbus-write","params":{"writes":[{"datatype":12,"value":5},{"datatype":13,"value":0.5}]}}"#
    );
    let zwave = zwave_exclude("Z-1");
    assert_eq!(
        String::from_utf8(zwave.to_payload()).unwrap(),
        r#"{"method":"zwave-exclude","params":{"node":"Z-1"}}"#
    );
    for request in [ping, wifi, modbus, zwave] {
        assert_eq!(CommandRequest::parse(&request.to_payload()), Ok(request));
    }
    for method in CommandMethod::ALL {
        let bare = CommandRequest::new(method);
        let needs_params = matches!(
            method,
            CommandMethod::WifiConnect | CommandMethod::ModbusWrite | CommandMethod::ZwaveExclude
        );
        assert_eq!(
            CommandRequest::parse(&bare.to_payload()).is_err(),
            needs_params,
            "{method}"
        );
    }
}

#[test]
fn parses_requests() {
    let parse = |text: &str| CommandRequest::parse(text.as_bytes());
    assert_eq!(
        parse(r#"{"method": "ping"}"#),
        Ok(CommandRequest::new(CommandMethod::Ping))
    );
    assert_eq!(
        parse(r#"{"method": "restart", "params": null, "id": 7}"#),
        Ok(CommandRequest::new(CommandMethod::Restart))
    );
    assert_eq!(
        parse(r#"{"method": "status", "params": {"x": 1}}"#).unwrap().params,
        json!({"x": 1})
    );
    assert_eq!(
        parse(r#"{"method": "wifi-connect", "params": {"ssid": "plant-3", "password": null}}"#)
            .unwrap()
            .method,
        CommandMethod::WifiConnect
    );
}

#[test]
fn refuses_requests() {
    let cases = [
        (r#"{}"#, "method is required"),
        (r#"{"method": 1}"#, "method must be a string"),
        (r#"{"method": "reboot"}"#, "unknown method \"reboot\""),
        (r#"{"method": "ping", "params": []}"#, "params must be a JSON object"),
        (r#"{"method": "ping", "params": "x"}"#, "params must be a JSON object"),
        (
            r#"{"method": "wifi-connect"}"#,
            "params.ssid must be a non-empty string",
        ),
        (
            r#"{"method": "wifi-connect", "params": {"ssid": ""}}"#,
            "params.ssid must be a non-empty string",
        ),
        (
            r#"{"method": "wifi-connect", "params": {"ssid": 5}}"#,
            "params.ssid must be a non-empty string",
        ),
        (
            r#"{"method": "wifi-connect", "params": {"ssid": "a", "password": 5}}"#,
            "params.password must be a string",
        ),
        (
            r#"{"method": "modbus-write", "params": {}}"#,
            "params.writes must be an array",
        ),
        (
            r#"{"method": "modbus-write", "params": {"writes": {"datatype": 1, "value": 1}}}"#,
            "params.writes must be an array",
        ),
        (
            r#"{"method": "modbus-write", "params": {"writes": []}}"#,
            "params.writes: at least one write is required",
        ),
        (
            r#"{"method": "modbus-write", "params": {"writes": [{"datatype": 1}]}}"#,
            "params.writes: item 0: value is required",
        ),
        (
            r#"{"method": "zwave-exclude", "params": {}}"#,
            "params.node is required",
        ),
        (
            r#"{"method": "zwave-exclude", "params": {"node": ""}}"#,
            "params.node must not be empty",
        ),
        (r#"["ping"]"#, "a command request must be a JSON object"),
    ];
    for (text, message) in cases {
        let err = CommandRequest::parse(text.as_bytes()).unwrap_err();
        assert_eq!(err.reason(), RejectReason::BadField, "{text}");
        assert_eq!(err.description(), message, "{text}");
    }
    assert_eq!(CommandRequest::parse(b"\xfe"), Err(Rejection::NotUtf8));
    assert!(matches!(CommandRequest::parse(b"ping"), Err(Rejection::NotJson(_))));
}
