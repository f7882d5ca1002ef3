use std::time::Duration;

use devicecloud_engine::settings::RateLimit;
use devicecloud_store::retention::Retention;

use super::*;

/// The settings a TOML file gives over the defaults, or why it is refused.
fn from_file(text: &str) -> Result<Settings> {
    let dir = std::env::temp_dir().join(format!(
        "dc-settings-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("settings.toml");
    std::fs::write(&path, text).unwrap();
    let mut layers = Layers::<Settings>::new();
    let applied = layers.file(&path);
    let _ = std::fs::remove_dir_all(&dir);
    applied?;
    Ok(layers.settings()?)
}

/// The settings the variables `vars` give over the defaults, or why they are refused.
fn from_env(vars: &[(&str, &str)]) -> Result<Settings> {
    let mut layers = Layers::<Settings>::new();
    layers.environment("DEVICECLOUD_", |name| {
        vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    })?;
    Ok(layers.settings()?)
}

#[test]
fn file_values_apply_and_unknown_keys_fail() {
    let s = from_file("http_addr = \"127.0.0.1:9999\"\ncommand_timeout_s = 3\n").unwrap();
    assert_eq!(s.http_addr.port(), 9999);
    assert_eq!(s.server().command_timeout, Duration::from_secs(3));
    assert_eq!(s.log_format, LogFormat::Text);
    assert_eq!(
        from_file("log_format = \"json\"\n").unwrap().log_format,
        LogFormat::Json
    );
    assert!(from_file("log_format = \"xml\"\n").is_err());
    let s = from_file("command_timeout_s = 3\ncommand_timeout_ms = 250\n").unwrap();
    assert_eq!(s.server().command_timeout, Duration::from_millis(250));
    let s =
        from_file("webhook_timeout_s = 3\nwebhook_batch_max = 50\ningest_batch_points = 20000\ningest_writers = 3\n")
            .unwrap();
    assert_eq!(s.server().webhook_timeout, Duration::from_secs(3));
    assert_eq!(s.server().webhook_batch_max, 50);
    assert_eq!(s.server().ingest_batch_points, 20_000);
    assert_eq!(s.server().ingest_writers, Some(3));
    assert_eq!(Settings::default().server().ingest_writers, None);
    assert_eq!(s.server().webhook_retry_window, Duration::from_secs(86_400));
    for zero in ["webhook_batch_max = 0", "ingest_batch_points = 0", "ingest_writers = 0"] {
        let refused = from_file(zero).unwrap_err().to_string();
        assert!(refused.contains("is not a positive whole number"), "{zero}: {refused}");
    }
    let s = from_file("rate_limit = \"100/10\"\n").unwrap();
    let limit = RateLimit {
        requests: 100,
        per: Duration::from_secs(10),
    };
    assert_eq!(s.server().rate_limit, Some(limit));
    assert_eq!(from_file("rate_limit = \"off\"\n").unwrap().server().rate_limit, None);
    assert!(from_file("rate_limit = \"0/10\"\n").is_err());
    let unknown = from_file("htp_addr = \"x\"\n").unwrap_err().to_string();
    assert!(
        unknown.contains("unknown setting htp_addr") && unknown.contains("http_addr"),
        "{unknown}"
    );
    let wrong = from_file("http_addr = \"x\"\n").unwrap_err().to_string();
    assert!(
        wrong.starts_with("http_addr in ") && wrong.contains("is not an address"),
        "{wrong}"
    );
}

#[test]
fn the_front_end_settings_are_checked() {
    let s = from_file(
        "public_url = \"https://iot.example.com/\"\ntrusted_proxies = [\"10.0.0.0/8\", \"192.0.2.7\", \"fd00::1/8\"]\n",
    )
    .unwrap();
    let front = s.server().front_end;
    assert_eq!(front.public_url.as_deref(), Some("https://iot.example.com"));
    let nets: Vec<String> = front.trusted_proxies.iter().map(ToString::to_string).collect();
    assert_eq!(nets, ["10.0.0.0/8", "192.0.2.7/32", "fd00::/8"]);
    for bad in [
        "public_url = \"iot.example.com\"\n",
        "trusted_proxies = [\"10.0.0.0/33\"]\n",
    ] {
        assert!(from_file(bad).is_err(), "{bad}");
    }
    let s = from_env(&[("DEVICECLOUD_TRUSTED_PROXIES", "10.0.0.0/8, 192.0.2.7")]).unwrap();
    assert_eq!(s.service.front_end.trusted_proxies.len(), 2);
}

#[test]
fn a_tls_address_needs_the_certificate_and_the_key() {
    assert!(
        Settings::default().mqtt_tls().unwrap().is_none(),
        "no address: no TLS listener"
    );
    let s = from_file("mqtt_tls_addr = \"127.0.0.1:8883\"\n").unwrap();
    let missing = s.mqtt_tls().unwrap_err().to_string();
    assert!(missing.contains("DEVICECLOUD_MQTT_TLS_CERT"), "{missing}");
    let s = from_file("mqtt_tls_addr = \"127.0.0.1:8883\"\nmqtt_tls_cert = \"/etc/dc/cert.pem\"\n").unwrap();
    let missing = s.mqtt_tls().unwrap_err().to_string();
    assert!(missing.contains("DEVICECLOUD_MQTT_TLS_KEY"), "{missing}");
    let s = from_file(
        "mqtt_tls_addr = \"127.0.0.1:8883\"\nmqtt_tls_cert = \"/etc/dc/cert.pem\"\nmqtt_tls_key = \"/etc/dc/key.pem\"\n",
    )
    .unwrap();
    let tls = s.mqtt_tls().unwrap().expect("complete TLS settings");
    assert_eq!(tls.addr.port(), 8883);
    assert_eq!(tls.cert, Path::new("/etc/dc/cert.pem"));
    assert_eq!(tls.key, Path::new("/etc/dc/key.pem"));
}

#[test]
fn limits_come_from_every_source_and_zero_is_refused() {
    let limits = Settings::default().server().limits;
    assert_eq!(limits.query_timeout, Duration::from_secs(10));
    assert_eq!(
        from_file("query_timeout_s = 3\n")
            .unwrap()
            .server()
            .limits
            .query_timeout,
        Duration::from_secs(3)
    );
    let s = from_env(&[("DEVICECLOUD_PAGE_CACHE_MB", "8")]).unwrap();
    assert_eq!(s.server().limits.page_cache_bytes, 8 << 20);
    let mut layers = Layers::<Settings>::new();
    let flags = |limits: &[&str]| Flags {
        limits: limits.iter().map(ToString::to_string).collect(),
        ..Flags::default()
    };
    flags(&["expand_max_depth=6"]).apply(&mut layers).unwrap();
    assert_eq!(layers.settings().unwrap().server().limits.expand_max_depth, 6);
    let zero = flags(&["expand_max_depth=0"])
        .apply(&mut layers)
        .unwrap_err()
        .to_string();
    assert!(zero.starts_with("--limit expand_max_depth=0: "), "{zero}");
    assert!(flags(&["nope=1"]).apply(&mut layers).is_err());
    assert!(
        flags(&["log=debug"]).apply(&mut layers).is_err(),
        "only limits are --limit flags"
    );
    let negative = from_env(&[("DEVICECLOUD_QUERY_TIMEOUT_S", "-1")])
        .unwrap_err()
        .to_string();
    assert!(negative.starts_with("DEVICECLOUD_QUERY_TIMEOUT_S=-1: "), "{negative}");
    assert!(from_file("http_max_connections = 0\n").is_err());
    let huge = from_file("http_max_connections = 9223372036854775807\n").unwrap();
    assert_eq!(
        huge.server().limits.http_max_connections,
        tokio::sync::Semaphore::MAX_PERMITS
    );
}

#[test]
fn retention_defaults_come_from_the_file_and_the_variables_win() {
    assert_eq!(
        Retention::from(Settings::default().service.retention),
        Retention::default()
    );
    let mut layers = Layers::<Settings>::new();
    let dir = std::env::temp_dir().join(format!("dc-settings-retention-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("retention.toml");
    std::fs::write(&path, "retention_raw_days = 30\nretention_day_days = 3650\n").unwrap();
    layers.file(&path).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let vars = [
        ("DEVICECLOUD_RETENTION_RAW_DAYS", "7"),
        ("DEVICECLOUD_RETENTION_DAY_DAYS", ""),
        ("DEVICECLOUD_RETENTION_INTERVAL_S", "60"),
    ];
    layers
        .environment("DEVICECLOUD_", |name| {
            vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
        })
        .unwrap();
    let s = layers.settings().unwrap().server();
    let seven_days = Retention {
        raw_days: Some(7),
        ..Retention::default()
    };
    assert_eq!(Retention::from(s.retention), seven_days, "an empty variable unsets");
    assert_eq!(s.retention_interval, Duration::from_secs(60));
    for days in ["0", "36501"] {
        assert!(
            from_env(&[("DEVICECLOUD_RETENTION_HOUR_DAYS", days)]).is_err(),
            "{days}"
        );
    }
    assert!(from_file("retention_minute_days = -1\n").is_err());
}

#[test]
fn every_key_is_read_from_a_variable_of_its_name() {
    let layers = Layers::<Settings>::new();
    let keys: Vec<&str> = layers.keys().collect();
    for key in [
        "data_dir",
        "query_timeout_s",
        "retention_raw_days",
        "public_url",
        "node_lease_s",
        "rate_limit",
    ] {
        assert!(keys.contains(&key), "{key} in {keys:?}");
    }
    for internal in ["auth_cache_ttl", "stream_heartbeat", "limits", "front_end", "retention"] {
        assert!(!keys.contains(&internal), "{internal} is no setting");
    }
    let s = from_env(&[
        ("DEVICECLOUD_WEBHOOK_ALLOW_PRIVATE", "1"),
        ("DEVICECLOUD_NODE_ID", "edge-1"),
        ("DEVICECLOUD_NODE_LEASE_S", "30"),
        ("DEVICECLOUD_TOKEN_LIFETIME_DAYS", "2"),
        ("DEVICECLOUD_RATE_LIMIT", ""),
    ])
    .unwrap()
    .server();
    assert!(s.webhook_allow_private);
    assert_eq!(s.node_id.as_deref(), Some("edge-1"));
    assert_eq!(s.node_lease, Duration::from_secs(30));
    assert_eq!(s.limits.token_lifetime, Duration::from_secs(2 * 86_400));
    assert!(
        s.rate_limit.is_some(),
        "an empty variable leaves a setting that cannot be unset"
    );
    assert!(from_env(&[("DEVICECLOUD_NODE_LEASE_S", "2")]).is_err());
    assert!(from_env(&[("DEVICECLOUD_NODE_ID", "a b")]).is_err());
    assert!(from_env(&[("DEVICECLOUD_WEBHOOK_ALLOW_PRIVATE", "yes")]).is_err());
}
