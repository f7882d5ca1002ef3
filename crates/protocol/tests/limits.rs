//! Limits: batches at and past 10,000 items, nesting at and past serde_json's 128 levels on a
//! small stack, large messages and long strings: `Ok` or a short `Rejection`, never a crash.

use devicecloud_protocol::{
    CommandRequest, MAX_BATCH, RejectReason, Rejection, parse_devices, parse_events, parse_hello, parse_measurements,
    parse_power, parse_response,
};

const NOW: i64 = 1_763_726_400;

/// Runs `f` on a 256 KiB stack: bounded recursion fits easily, unbounded would not.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no panic, no overflow");
}

fn array_of(item: &str, n: usize) -> Vec<u8> {
    format!("[{}]", vec![item; n].join(",")).into_bytes()
}

#[test]
fn batch_sizes() {
    let m = r#"{"values":{"1":1}}"#;
    assert_eq!(
        parse_measurements(&array_of(m, MAX_BATCH), NOW).unwrap().len(),
        MAX_BATCH
    );
    let e = r#"{"type":1,"value":"1"}"#;
    assert_eq!(parse_events(&array_of(e, MAX_BATCH), NOW).unwrap().len(), MAX_BATCH);
    let a = r#"{"serial":"s","type":"t"}"#;
    assert_eq!(parse_devices(&array_of(a, MAX_BATCH)).unwrap().len(), MAX_BATCH);

    let too_many = [
        parse_measurements(&array_of(m, MAX_BATCH + 1), NOW).map(|_| ()),
        parse_events(&array_of(e, MAX_BATCH + 1), NOW).map(|_| ()),
        parse_devices(&array_of(a, MAX_BATCH + 1)).map(|_| ()),
    ];
    for result in too_many {
        assert_eq!(result.unwrap_err().reason(), RejectReason::TooLarge);
    }
}

#[test]
fn one_large_measurement() {
    // 40,000 values in one object (about 400 KiB): one item, so no batch limit applies.
    let values: Vec<String> = (0..40_000).map(|d| format!("\"{d}\":{d}.5")).collect();
    let payload = format!(r#"{{"values":{{{}}}}}"#, values.join(","));
    let got = parse_measurements(payload.as_bytes(), NOW).unwrap();
    assert_eq!(got[0].values.len(), 40_000);
    assert_eq!(got[0].values[39_999], (39_999, 39_999.5));
}

#[test]
fn nesting() {
    on_small_stack(|| {
        // Just inside serde_json's limit, in a hello block and in an ignored key.
        let inner = format!("{}{}", "{\"a\":".repeat(120), "}".repeat(120)).replacen('}', "1}", 1);
        let hello = format!(r#"{{"kind":"GO","connection":"wifi","sim":{inner},"x":{inner}}}"#);
        assert!(parse_hello(hello.as_bytes()).is_ok());
        let deep_values = format!(r#"{{"values":{{"1":{}1{}}}}}"#, "[".repeat(120), "]".repeat(120));
        assert_eq!(
            parse_measurements(deep_values.as_bytes(), NOW).unwrap_err().reason(),
            RejectReason::BadValue
        );
        // Far past it: refused by the JSON reader, whatever the parser.
        for deep in [
            "[".repeat(100_000),
            "{\"a\":".repeat(100_000),
            format!("[{}", "{\"values\":".repeat(50_000)),
        ] {
            let deep = deep.as_bytes();
            let results = [
                parse_measurements(deep, NOW).map(|_| ()),
                parse_events(deep, NOW).map(|_| ()),
                parse_hello(deep).map(|_| ()),
                parse_devices(deep).map(|_| ()),
                parse_power(deep).map(|_| ()),
                parse_response(deep).map(|_| ()),
                CommandRequest::parse(deep).map(|_| ()),
            ];
            for result in results {
                assert!(matches!(result, Err(Rejection::NotJson(_))));
            }
        }
    });
}

#[test]
fn long_strings_give_short_descriptions() {
    let key = "9".repeat(100_000);
    let payload = format!(r#"{{"values":{{"{key}":1}}}}"#);
    let err = parse_measurements(payload.as_bytes(), NOW).unwrap_err();
    assert_eq!(err.reason(), RejectReason::BadDatatype);
    assert!(err.description().len() < 200, "{}", err.description());

    let device = "x".repeat(100_000);
    let payload = format!(r#"[{{"values":{{}}}},{{"device":"{device}","values":{{}}}}]"#);
    let err = parse_measurements(payload.as_bytes(), NOW).unwrap_err();
    assert_eq!(err.description(), "item 1: device must be at most 64 characters");

    let method = "m".repeat(100_000);
    let err = CommandRequest::parse(format!(r#"{{"method":"{method}"}}"#).as_bytes()).unwrap_err();
    assert!(err.description().len() < 100, "{}", err.description());
}
