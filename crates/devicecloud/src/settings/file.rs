//! The settings file (`--config`): the same keys as the variables, read over the defaults and
//! under the variables and flags (docs/operations.md).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use devicecloud_engine::settings::RateLimit;
use devicecloud_server::FrontEnd;
use serde::Deserialize;

use super::{LogFormat, Settings, proxies};

/// The TOML file: the same keys as the variables, lower-case, without the prefix.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    data_dir: Option<PathBuf>,
    database_url: Option<String>,
    http_addr: Option<SocketAddr>,
    mqtt_addr: Option<SocketAddr>,
    mqtt_tls_addr: Option<SocketAddr>,
    mqtt_tls_cert: Option<PathBuf>,
    mqtt_tls_key: Option<PathBuf>,
    command_timeout_s: Option<u64>,
    command_timeout_ms: Option<u64>,
    webhook_allow_private: Option<bool>,
    max_body_bytes: Option<usize>,
    mqtt_max_packet_bytes: Option<u32>,
    webhook_timeout_s: Option<u64>,
    webhook_retry_window_s: Option<u64>,
    webhook_batch_max: Option<usize>,
    webhook_attempt_retention_days: Option<u64>,
    ingest_batch_points: Option<usize>,
    ingest_writers: Option<usize>,
    log: Option<String>,
    log_format: Option<LogFormat>,
    public_url: Option<String>,
    /// A list of CIDR ranges or addresses.
    trusted_proxies: Option<Vec<String>>,
    /// `N/S` or `off`.
    rate_limit: Option<String>,
    secret_key_file: Option<PathBuf>,
    node_id: Option<String>,
    node_lease_s: Option<u64>,
}

impl Settings {
    /// Applies the TOML file at `path` over these settings: its limits, then every other key
    /// it sets (an unknown key is an error, so that a misspelt one is not silently ignored).
    pub(super) fn apply_file(&mut self, path: &Path) -> Result<()> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read settings file {}", path.display()))?;
        let mut table: toml::Table =
            toml::from_str(&text).with_context(|| format!("invalid settings file {}", path.display()))?;
        self.limits.apply_table(&mut table, &path.display().to_string())?;
        self.retention.apply_table(&mut table, &path.display().to_string())?;
        let file: FileSettings = toml::Value::Table(table)
            .try_into()
            .with_context(|| format!("invalid settings file {}", path.display()))?;
        let FileSettings {
            data_dir,
            database_url,
            http_addr,
            mqtt_addr,
            mqtt_tls_addr,
            mqtt_tls_cert,
            mqtt_tls_key,
            command_timeout_s,
            command_timeout_ms,
            webhook_allow_private,
            max_body_bytes,
            mqtt_max_packet_bytes,
            webhook_timeout_s,
            webhook_retry_window_s,
            webhook_batch_max,
            webhook_attempt_retention_days,
            ingest_batch_points,
            ingest_writers,
            log,
            log_format,
            public_url,
            trusted_proxies,
            rate_limit,
            secret_key_file,
            node_id,
            node_lease_s,
        } = file;
        self.data_dir = data_dir.unwrap_or(self.data_dir.clone());
        self.database_url = database_url.or(self.database_url.take());
        self.http_addr = http_addr.unwrap_or(self.http_addr);
        self.mqtt_addr = mqtt_addr.unwrap_or(self.mqtt_addr);
        self.mqtt_tls_addr = mqtt_tls_addr.or(self.mqtt_tls_addr);
        self.mqtt_tls_cert = mqtt_tls_cert.or(self.mqtt_tls_cert.take());
        self.mqtt_tls_key = mqtt_tls_key.or(self.mqtt_tls_key.take());
        self.command_timeout_s = command_timeout_s.unwrap_or(self.command_timeout_s);
        self.command_timeout_ms = command_timeout_ms.or(self.command_timeout_ms);
        self.webhook_allow_private = webhook_allow_private.unwrap_or(self.webhook_allow_private);
        self.max_body_bytes = max_body_bytes.unwrap_or(self.max_body_bytes);
        self.mqtt_max_packet_bytes = mqtt_max_packet_bytes.unwrap_or(self.mqtt_max_packet_bytes);
        self.webhook_timeout_s = webhook_timeout_s.unwrap_or(self.webhook_timeout_s);
        self.webhook_retry_window_s = webhook_retry_window_s.unwrap_or(self.webhook_retry_window_s);
        for (key, value) in [
            ("webhook_batch_max", webhook_batch_max),
            ("ingest_batch_points", ingest_batch_points),
            ("ingest_writers", ingest_writers),
        ] {
            if value == Some(0) {
                bail!("{key} in {} must be at least 1", path.display());
            }
        }
        self.webhook_batch_max = webhook_batch_max.unwrap_or(self.webhook_batch_max);
        self.ingest_batch_points = ingest_batch_points.unwrap_or(self.ingest_batch_points);
        self.ingest_writers = ingest_writers.or(self.ingest_writers);
        self.webhook_attempt_retention_days =
            webhook_attempt_retention_days.unwrap_or(self.webhook_attempt_retention_days);
        self.log = log.unwrap_or(self.log.clone());
        self.log_format = log_format.unwrap_or(self.log_format);
        if let Some(url) = public_url {
            self.public_url =
                Some(FrontEnd::public_url(&url).map_err(|e| anyhow::anyhow!("public_url in {}: {e}", path.display()))?);
        }
        if let Some(list) = trusted_proxies {
            self.trusted_proxies = proxies(list.iter().map(String::as_str))
                .with_context(|| format!("trusted_proxies in {}", path.display()))?;
        }
        if let Some(text) = rate_limit {
            self.rate_limit =
                RateLimit::parse(&text).map_err(|e| anyhow::anyhow!("rate_limit in {}: {e}", path.display()))?;
        }
        self.secret_key_file = secret_key_file.or(self.secret_key_file.take());
        if let Some(id) = node_id {
            self.node_id = Some(super::node_id(&id).with_context(|| format!("node_id in {}", path.display()))?);
        }
        if let Some(s) = node_lease_s {
            self.node_lease_s =
                super::lease(&s.to_string()).with_context(|| format!("node_lease_s in {}", path.display()))?;
        }
        Ok(())
    }
}
