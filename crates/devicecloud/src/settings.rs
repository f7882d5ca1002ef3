//! Settings of the binary: defaults, then a TOML file (`--config`), then `DEVICECLOUD_*`
//! variables, then command-line flags, each later source winning (docs/operations.md).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use devicecloud_engine::settings::RateLimit;
use devicecloud_server::FrontEnd;
use ipnet::IpNet;

use crate::limits::Limits;
use crate::retention::RetentionSettings;

mod file;

/// Everything `serve` and the admin commands need to know.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub data_dir: PathBuf,
    /// `None` means the SQLite file `devicecloud.db` in the data dir.
    pub database_url: Option<String>,
    pub http_addr: SocketAddr,
    pub mqtt_addr: SocketAddr,
    /// The TLS listener of the gateway endpoint, beside the plain one; `None`: no TLS listener.
    pub mqtt_tls_addr: Option<SocketAddr>,
    /// PEM certificate chain of the TLS listener: the server's certificate, then intermediates.
    pub mqtt_tls_cert: Option<PathBuf>,
    /// PEM private key of the TLS listener (PKCS#8, PKCS#1 or SEC1).
    pub mqtt_tls_key: Option<PathBuf>,
    pub command_timeout_s: u64,
    /// Milliseconds; when set, wins over `command_timeout_s` (sub-second timeouts for tests).
    pub command_timeout_ms: Option<u64>,
    pub webhook_allow_private: bool,
    pub max_body_bytes: usize,
    pub mqtt_max_packet_bytes: u32,
    pub webhook_timeout_s: u64,
    pub webhook_retry_window_s: u64,
    pub webhook_batch_max: usize,
    pub webhook_attempt_retention_days: u64,
    /// Most points in one ingest transaction.
    pub ingest_batch_points: usize,
    /// Ingest writers; `None`: one on SQLite, more on PostgreSQL.
    pub ingest_writers: Option<usize>,
    pub log: String,
    /// How log lines are written on stderr.
    pub log_format: LogFormat,
    /// The limits that keep one client from taking the service down.
    pub limits: Limits,
    /// The retention of groups without their own, and the pass interval.
    pub retention: RetentionSettings,
    /// Base of every absolute link, checked and without a trailing slash.
    pub public_url: Option<String>,
    /// Peers whose forwarding headers are believed.
    pub trusted_proxies: Vec<IpNet>,
    /// Requests per account on `/api/v2/`; `None`: off.
    pub rate_limit: Option<RateLimit>,
    /// The key that encrypts webhook secrets; `None`: `secret.key` in the data dir.
    pub secret_key_file: Option<PathBuf>,
    /// This node's name among the nodes sharing a database; `None`: host name and process id.
    pub node_id: Option<String>,
    /// How long a node's lease lasts without renewal (at least 3 s).
    pub node_lease_s: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            data_dir: PathBuf::from("./data"),
            database_url: None,
            http_addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            mqtt_addr: SocketAddr::from(([127, 0, 0, 1], 1883)),
            mqtt_tls_addr: None,
            mqtt_tls_cert: None,
            mqtt_tls_key: None,
            command_timeout_s: 10,
            command_timeout_ms: None,
            webhook_allow_private: false,
            max_body_bytes: 1024 * 1024,
            mqtt_max_packet_bytes: 256 * 1024,
            webhook_timeout_s: 10,
            webhook_retry_window_s: 24 * 3600,
            webhook_batch_max: 1000,
            webhook_attempt_retention_days: 7,
            ingest_batch_points: devicecloud_engine::settings::INGEST_BATCH_POINTS,
            ingest_writers: None,
            log: "info".into(),
            log_format: LogFormat::Text,
            limits: Limits::default(),
            retention: RetentionSettings::default(),
            public_url: None,
            trusted_proxies: Vec::new(),
            rate_limit: devicecloud_server::Settings::default().rate_limit,
            secret_key_file: None,
            node_id: None,
            node_lease_s: 15,
        }
    }
}

/// How log lines are written (docs/operations.md, "Logs").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One line of text per event, for people.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Values given on the command line (global flags of every subcommand).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct Flags {
    /// TOML settings file (also `DEVICECLOUD_CONFIG`).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// A limit, such as `query_timeout_s=5` (repeatable; see docs/operations.md, "Limits").
    #[arg(long = "limit", value_name = "KEY=VALUE", global = true)]
    pub limits: Vec<String>,
    /// Directory of the embedded store and other files.
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    /// `sqlite:…` or `postgres://…`.
    #[arg(long, global = true)]
    pub database_url: Option<String>,
    /// HTTP listen address (port 0 picks a free port).
    #[arg(long, global = true)]
    pub http_addr: Option<SocketAddr>,
    /// MQTT listen address (port 0 picks a free port).
    #[arg(long, global = true)]
    pub mqtt_addr: Option<SocketAddr>,
    /// MQTT over TLS listen address; the listener runs only when this is set.
    #[arg(long, global = true)]
    pub mqtt_tls_addr: Option<SocketAddr>,
    /// PEM certificate chain of the MQTT over TLS listener.
    #[arg(long, global = true)]
    pub mqtt_tls_cert: Option<PathBuf>,
    /// PEM private key of the MQTT over TLS listener.
    #[arg(long, global = true)]
    pub mqtt_tls_key: Option<PathBuf>,
}

/// The TLS listener of the gateway endpoint, once its settings are known to be complete.
#[derive(Clone, Copy, Debug)]
pub struct MqttTls<'a> {
    pub addr: SocketAddr,
    pub cert: &'a Path,
    pub key: &'a Path,
}

impl Settings {
    /// Loads the settings from every source.
    pub fn load(flags: &Flags) -> Result<Settings> {
        let env = |name: &str| {
            std::env::var(format!("DEVICECLOUD_{name}"))
                .ok()
                .filter(|v| !v.is_empty())
        };
        let mut s = Settings::default();
        let config = flags.config.clone().or_else(|| env("CONFIG").map(PathBuf::from));
        if let Some(path) = config {
            s.apply_file(&path)?;
        }
        if let Some(v) = env("DATA_DIR") {
            s.data_dir = v.into();
        }
        if let Some(v) = env("DATABASE_URL") {
            s.database_url = Some(v);
        }
        if let Some(v) = env("HTTP_ADDR") {
            s.http_addr = v
                .parse()
                .with_context(|| format!("DEVICECLOUD_HTTP_ADDR={v} is not an address such as 127.0.0.1:8080"))?;
        }
        if let Some(v) = env("MQTT_ADDR") {
            s.mqtt_addr = v
                .parse()
                .with_context(|| format!("DEVICECLOUD_MQTT_ADDR={v} is not an address such as 127.0.0.1:1883"))?;
        }
        if let Some(v) = env("MQTT_TLS_ADDR") {
            s.mqtt_tls_addr =
                Some(v.parse().with_context(|| {
                    format!("DEVICECLOUD_MQTT_TLS_ADDR={v} is not an address such as 0.0.0.0:8883")
                })?);
        }
        if let Some(v) = env("MQTT_TLS_CERT") {
            s.mqtt_tls_cert = Some(v.into());
        }
        if let Some(v) = env("MQTT_TLS_KEY") {
            s.mqtt_tls_key = Some(v.into());
        }
        if let Some(v) = env("COMMAND_TIMEOUT_S") {
            s.command_timeout_s = v
                .parse()
                .with_context(|| format!("DEVICECLOUD_COMMAND_TIMEOUT_S={v} is not a whole number of seconds"))?;
        }
        if let Some(v) = env("COMMAND_TIMEOUT_MS") {
            s.command_timeout_ms = Some(v.parse().with_context(|| {
                format!("DEVICECLOUD_COMMAND_TIMEOUT_MS={v} is not a whole number of milliseconds")
            })?);
        }
        if let Some(v) = env("WEBHOOK_ALLOW_PRIVATE") {
            s.webhook_allow_private = match v.as_str() {
                "1" | "true" => true,
                "0" | "false" => false,
                _ => bail!("DEVICECLOUD_WEBHOOK_ALLOW_PRIVATE={v} must be 0 or 1"),
            };
        }
        if let Some(v) = env("MAX_BODY_BYTES") {
            s.max_body_bytes = v
                .parse()
                .with_context(|| format!("DEVICECLOUD_MAX_BODY_BYTES={v} is not a number of bytes"))?;
        }
        if let Some(v) = env("MQTT_MAX_PACKET_BYTES") {
            s.mqtt_max_packet_bytes = v
                .parse()
                .with_context(|| format!("DEVICECLOUD_MQTT_MAX_PACKET_BYTES={v} is not a number of bytes"))?;
        }
        for (name, slot) in [
            ("WEBHOOK_TIMEOUT_S", &mut s.webhook_timeout_s),
            ("WEBHOOK_RETRY_WINDOW_S", &mut s.webhook_retry_window_s),
            ("WEBHOOK_ATTEMPT_RETENTION_DAYS", &mut s.webhook_attempt_retention_days),
        ] {
            if let Some(v) = env(name) {
                *slot = v
                    .parse()
                    .with_context(|| format!("DEVICECLOUD_{name}={v} is not a whole number"))?;
            }
        }
        for (name, slot) in [
            ("WEBHOOK_BATCH_MAX", &mut s.webhook_batch_max),
            ("INGEST_BATCH_POINTS", &mut s.ingest_batch_points),
        ] {
            if let Some(v) = env(name) {
                *slot = v
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .with_context(|| format!("DEVICECLOUD_{name}={v} is not a positive number"))?;
            }
        }
        if let Some(v) = env("INGEST_WRITERS") {
            let writers = v.parse().ok().filter(|n| *n > 0);
            s.ingest_writers =
                Some(writers.with_context(|| format!("DEVICECLOUD_INGEST_WRITERS={v} is not a positive number"))?);
        }
        if let Some(v) = env("LOG") {
            s.log = v;
        }
        if let Some(v) = env("LOG_FORMAT") {
            s.log_format = match v.as_str() {
                "text" => LogFormat::Text,
                "json" => LogFormat::Json,
                _ => bail!("DEVICECLOUD_LOG_FORMAT={v} must be text or json"),
            };
        }
        if let Some(v) = env("PUBLIC_URL") {
            s.public_url = Some(FrontEnd::public_url(&v).map_err(|e| anyhow::anyhow!("DEVICECLOUD_PUBLIC_URL: {e}"))?);
        }
        if let Some(v) = env("TRUSTED_PROXIES") {
            s.trusted_proxies = proxies(v.split(',')).with_context(|| format!("DEVICECLOUD_TRUSTED_PROXIES={v}"))?;
        }
        if let Some(v) = env("RATE_LIMIT") {
            s.rate_limit = RateLimit::parse(&v).map_err(|e| anyhow::anyhow!("DEVICECLOUD_RATE_LIMIT: {e}"))?;
        }
        if let Some(v) = env("SECRET_KEY_FILE") {
            s.secret_key_file = Some(v.into());
        }
        if let Some(v) = env("NODE_ID") {
            s.node_id = Some(node_id(&v).context("DEVICECLOUD_NODE_ID")?);
        }
        if let Some(v) = env("NODE_LEASE_S") {
            s.node_lease_s = lease(&v).context("DEVICECLOUD_NODE_LEASE_S")?;
        }
        s.limits.apply_env(env)?;
        s.retention.apply_env(env)?;
        if let Some(v) = &flags.data_dir {
            s.data_dir = v.clone();
        }
        if let Some(v) = &flags.database_url {
            s.database_url = Some(v.clone());
        }
        if let Some(v) = flags.http_addr {
            s.http_addr = v;
        }
        if let Some(v) = flags.mqtt_addr {
            s.mqtt_addr = v;
        }
        if let Some(v) = flags.mqtt_tls_addr {
            s.mqtt_tls_addr = Some(v);
        }
        if let Some(v) = &flags.mqtt_tls_cert {
            s.mqtt_tls_cert = Some(v.clone());
        }
        if let Some(v) = &flags.mqtt_tls_key {
            s.mqtt_tls_key = Some(v.clone());
        }
        s.limits.apply_flags(&flags.limits)?;
        // Checked here, whatever the command, so an incomplete TLS setup is reported at once
        // rather than when a gateway first tries to connect.
        s.mqtt_tls()?;
        Ok(s)
    }

    /// The TLS listener, `None` when `mqtt_tls_addr` is unset; an error names the missing file
    /// setting when the address is set without both. The files themselves are read by `serve`.
    pub fn mqtt_tls(&self) -> Result<Option<MqttTls<'_>>> {
        let Some(addr) = self.mqtt_tls_addr else {
            return Ok(None);
        };
        let Some(cert) = &self.mqtt_tls_cert else {
            bail!(
                "DEVICECLOUD_MQTT_TLS_ADDR is set but DEVICECLOUD_MQTT_TLS_CERT is not: the TLS listener needs a PEM certificate chain"
            );
        };
        let Some(key) = &self.mqtt_tls_key else {
            bail!(
                "DEVICECLOUD_MQTT_TLS_ADDR is set but DEVICECLOUD_MQTT_TLS_KEY is not: the TLS listener needs a PEM private key"
            );
        };
        Ok(Some(MqttTls { addr, cert, key }))
    }

    /// The database URL in force: the configured one, or the SQLite file in the data dir.
    pub fn database_url(&self) -> Result<String> {
        if let Some(url) = &self.database_url {
            return Ok(url.clone());
        }
        std::fs::create_dir_all(&self.data_dir)
            .with_context(|| format!("cannot create data dir {}", self.data_dir.display()))?;
        Ok(format!("sqlite://{}", self.data_dir.join("devicecloud.db").display()))
    }

    /// The key file that encrypts webhook secrets: the configured one, or `secret.key` in the
    /// data dir.
    pub fn secret_key_file(&self) -> PathBuf {
        self.secret_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("secret.key"))
    }

    /// The service settings handed to the server.
    pub fn server(&self) -> devicecloud_server::Settings {
        devicecloud_server::Settings {
            command_timeout: self
                .command_timeout_ms
                .map_or(Duration::from_secs(self.command_timeout_s), Duration::from_millis),
            webhook_allow_private: self.webhook_allow_private,
            max_body_bytes: self.max_body_bytes,
            mqtt_max_packet_bytes: self.mqtt_max_packet_bytes,
            webhook_timeout: Duration::from_secs(self.webhook_timeout_s),
            webhook_retry_window: Duration::from_secs(self.webhook_retry_window_s),
            webhook_batch_max: self.webhook_batch_max,
            ingest_batch_points: self.ingest_batch_points,
            ingest_writers: self.ingest_writers,
            webhook_attempt_retention: Duration::from_secs(self.webhook_attempt_retention_days.saturating_mul(86_400)),
            limits: self.limits.server(),
            retention: self.retention.defaults(),
            retention_interval: self.retention.interval(),
            front_end: FrontEnd {
                public_url: self.public_url.clone(),
                trusted_proxies: self.trusted_proxies.clone(),
            },
            rate_limit: self.rate_limit,
            secret_key_file: Some(self.secret_key_file()),
            node_id: self.node_id.clone(),
            node_lease: Duration::from_secs(self.node_lease_s),
            ..devicecloud_server::Settings::default()
        }
    }
}

/// A node id: 1 to 64 letters, digits, `.`, `_` or `-`.
fn node_id(text: &str) -> Result<String> {
    let ok = (1..=64).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !ok {
        bail!("{text:?} is not a node id: 1 to 64 letters, digits, '.', '_' or '-'");
    }
    Ok(text.to_string())
}

/// A node lease in whole seconds, at least 3 (it is renewed every third of it).
fn lease(text: &str) -> Result<u64> {
    match text.parse::<u64>() {
        Ok(s) if s >= 3 => Ok(s),
        _ => bail!("{text:?} is not a whole number of seconds of at least 3"),
    }
}

/// Trusted proxies: CIDR ranges (`10.0.0.0/8`, `fd00::/8`) or single addresses; blanks skipped.
fn proxies<'a>(items: impl Iterator<Item = &'a str>) -> Result<Vec<IpNet>> {
    items
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            item.parse::<IpNet>()
                .or_else(|_| item.parse::<IpAddr>().map(IpNet::from))
                .map(|net| net.trunc())
                .map_err(|_| anyhow::anyhow!("{item} is not an address or a CIDR range such as 10.0.0.0/8"))
        })
        .collect()
}

#[cfg(test)]
mod tests;
