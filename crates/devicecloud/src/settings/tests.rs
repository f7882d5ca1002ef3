use super::*;

#[test]
fn file_values_apply_and_unknown_keys_fail() {
    let dir = std::env::temp_dir().join(format!("dc-settings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.toml");
    std::fs::write(&good, "http_addr = \"127.0.0.1:9999\"\ncommand_timeout_s = 3\n").unwrap();
    let mut s = Settings::default();
    s.apply_file(&good).unwrap();
    assert_eq!(s.http_addr.port(), 9999);
    assert_eq!(s.command_timeout_s, 3);
    assert_eq!(s.server().command_timeout, Duration::from_secs(3));
    assert_eq!(s.log_format, LogFormat::Text);
    let json = dir.join("json.toml");
    std::fs::write(&json, "log_format = \"json\"\n").unwrap();
    s.apply_file(&json).unwrap();
    assert_eq!(s.log_format, LogFormat::Json);
    std::fs::write(&json, "log_format = \"xml\"\n").unwrap();
    assert!(Settings::default().apply_file(&json).is_err());
    let ms = dir.join("ms.toml");
    std::fs::write(&ms, "command_timeout_s = 3\ncommand_timeout_ms = 250\n").unwrap();
    s.apply_file(&ms).unwrap();
    assert_eq!(s.server().command_timeout, Duration::from_millis(250));
    let hooks = dir.join("hooks.toml");
    std::fs::write(
        &hooks,
        "webhook_timeout_s = 3\nwebhook_batch_max = 50\ningest_batch_points = 20000\ningest_writers = 3\n",
    )
    .unwrap();
    let mut s = Settings::default();
    s.apply_file(&hooks).unwrap();
    assert_eq!(s.server().webhook_timeout, Duration::from_secs(3));
    assert_eq!(s.server().webhook_batch_max, 50);
    assert_eq!(s.server().ingest_batch_points, 20_000);
    assert_eq!(s.server().ingest_writers, Some(3));
    assert_eq!(Settings::default().server().ingest_writers, None);
    assert_eq!(s.server().webhook_retry_window, Duration::from_secs(86_400));
    let zero = dir.join("zero.toml");
    std::fs::write(&zero, "webhook_batch_max = 0\n").unwrap();
    assert!(Settings::default().apply_file(&zero).is_err());
    std::fs::write(&zero, "ingest_batch_points = 0\n").unwrap();
    assert!(Settings::default().apply_file(&zero).is_err());
    std::fs::write(&zero, "ingest_writers = 0\n").unwrap();
    assert!(Settings::default().apply_file(&zero).is_err());
    let limited = dir.join("limited.toml");
    std::fs::write(&limited, "rate_limit = \"100/10\"\n").unwrap();
    let mut s = Settings::default();
    s.apply_file(&limited).unwrap();
    assert_eq!(
        s.server().rate_limit,
        Some(RateLimit {
            requests: 100,
            per: Duration::from_secs(10)
        })
    );
    std::fs::write(&limited, "rate_limit = \"off\"\n").unwrap();
    s.apply_file(&limited).unwrap();
    assert_eq!(s.server().rate_limit, None);
    std::fs::write(&limited, "rate_limit = \"0/10\"\n").unwrap();
    assert!(Settings::default().apply_file(&limited).is_err());
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "htp_addr = \"x\"\n").unwrap();
    assert!(Settings::default().apply_file(&bad).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_front_end_settings_are_checked() {
    let dir = std::env::temp_dir().join(format!("dc-settings-front-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("front.toml");
    std::fs::write(
        &file,
        "public_url = \"https://iot.example.com/\"\ntrusted_proxies = [\"10.0.0.0/8\", \"192.0.2.7\", \"fd00::1/8\"]\n",
    )
    .unwrap();
    let mut s = Settings::default();
    s.apply_file(&file).unwrap();
    let front = s.server().front_end;
    assert_eq!(front.public_url.as_deref(), Some("https://iot.example.com"));
    let nets: Vec<String> = front.trusted_proxies.iter().map(ToString::to_string).collect();
    assert_eq!(nets, ["10.0.0.0/8", "192.0.2.7/32", "fd00::/8"]);
    for bad in [
        "public_url = \"iot.example.com\"\n",
        "trusted_proxies = [\"10.0.0.0/33\"]\n",
    ] {
        std::fs::write(&file, bad).unwrap();
        assert!(Settings::default().apply_file(&file).is_err(), "{bad}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_tls_address_needs_the_certificate_and_the_key() {
    let dir = std::env::temp_dir().join(format!("dc-settings-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut s = Settings::default();
    assert!(s.mqtt_tls().unwrap().is_none(), "no address: no TLS listener");

    let file = dir.join("tls.toml");
    std::fs::write(&file, "mqtt_tls_addr = \"127.0.0.1:8883\"\n").unwrap();
    s.apply_file(&file).unwrap();
    let missing = s.mqtt_tls().unwrap_err().to_string();
    assert!(missing.contains("DEVICECLOUD_MQTT_TLS_CERT"), "{missing}");

    std::fs::write(&file, "mqtt_tls_cert = \"/etc/dc/cert.pem\"\n").unwrap();
    s.apply_file(&file).unwrap();
    let missing = s.mqtt_tls().unwrap_err().to_string();
    assert!(missing.contains("DEVICECLOUD_MQTT_TLS_KEY"), "{missing}");

    std::fs::write(&file, "mqtt_tls_key = \"/etc/dc/key.pem\"\n").unwrap();
    s.apply_file(&file).unwrap();
    let tls = s.mqtt_tls().unwrap().expect("complete TLS settings");
    assert_eq!(tls.addr.port(), 8883);
    assert_eq!(tls.cert, Path::new("/etc/dc/cert.pem"));
    assert_eq!(tls.key, Path::new("/etc/dc/key.pem"));
    let _ = std::fs::remove_dir_all(&dir);
}
