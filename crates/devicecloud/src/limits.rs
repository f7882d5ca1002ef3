//! The limits among the settings (docs/operations.md, "Limits"): positive whole numbers, each
//! a TOML key, a `DEVICECLOUD_*` variable (the key in capitals) and a `--limit KEY=VALUE` flag,
//! in the same order of precedence as every other setting.

use std::time::Duration;

use anyhow::{Context, Result, bail};

/// The limits as configured, in the units their names say.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    pub expand_max_depth: u64,
    pub filter_max_values: u64,
    pub http_header_timeout_s: u64,
    pub http_body_timeout_s: u64,
    pub http_max_connections: u64,
    pub mqtt_max_connections: u64,
    pub query_timeout_s: u64,
    pub page_cache_mb: u64,
    pub signin_failures_max: u64,
    pub signin_window_s: u64,
    pub token_lifetime_days: u64,
    pub webhooks_per_group: u64,
    pub webhook_backlog_max: u64,
    pub assets_per_gateway: u64,
    pub datatypes_per_device: u64,
    pub stream_buffer_mb: u64,
    pub expand_max_entries: u64,
    pub streams_per_account: u64,
    pub connections_per_address: u64,
    pub signin_address_failures_max: u64,
    pub mqtt_unauthenticated_max: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        let d = devicecloud_engine::settings::Limits::default();
        Limits {
            expand_max_depth: d.expand_max_depth as u64,
            filter_max_values: d.filter_max_values as u64,
            http_header_timeout_s: d.http_header_timeout.as_secs(),
            http_body_timeout_s: d.http_body_timeout.as_secs(),
            http_max_connections: d.http_max_connections as u64,
            mqtt_max_connections: d.mqtt_max_connections as u64,
            query_timeout_s: d.query_timeout.as_secs(),
            page_cache_mb: (d.page_cache_bytes / (1024 * 1024)) as u64,
            signin_failures_max: u64::from(d.signin_failures_max),
            signin_window_s: d.signin_window.as_secs(),
            token_lifetime_days: d.token_lifetime.as_secs() / 86_400,
            webhooks_per_group: d.webhooks_per_group as u64,
            webhook_backlog_max: d.webhook_backlog_max,
            assets_per_gateway: d.assets_per_gateway as u64,
            datatypes_per_device: d.datatypes_per_device as u64,
            stream_buffer_mb: (d.stream_buffer_bytes / (1024 * 1024)) as u64,
            expand_max_entries: d.expand_max_entries as u64,
            streams_per_account: d.streams_per_account as u64,
            connections_per_address: d.connections_per_address as u64,
            signin_address_failures_max: u64::from(d.signin_address_failures_max),
            mqtt_unauthenticated_max: d.mqtt_unauthenticated_max as u64,
        }
    }
}

impl Limits {
    /// Each limit by its key (the TOML key; the variable is the key in capitals).
    fn slots(&mut self) -> [(&'static str, &mut u64); 21] {
        [
            ("expand_max_depth", &mut self.expand_max_depth),
            ("filter_max_values", &mut self.filter_max_values),
            ("http_header_timeout_s", &mut self.http_header_timeout_s),
            ("http_body_timeout_s", &mut self.http_body_timeout_s),
            ("http_max_connections", &mut self.http_max_connections),
            ("mqtt_max_connections", &mut self.mqtt_max_connections),
            ("query_timeout_s", &mut self.query_timeout_s),
            ("page_cache_mb", &mut self.page_cache_mb),
            ("signin_failures_max", &mut self.signin_failures_max),
            ("signin_window_s", &mut self.signin_window_s),
            ("token_lifetime_days", &mut self.token_lifetime_days),
            ("webhooks_per_group", &mut self.webhooks_per_group),
            ("webhook_backlog_max", &mut self.webhook_backlog_max),
            ("assets_per_gateway", &mut self.assets_per_gateway),
            ("datatypes_per_device", &mut self.datatypes_per_device),
            ("stream_buffer_mb", &mut self.stream_buffer_mb),
            ("expand_max_entries", &mut self.expand_max_entries),
            ("streams_per_account", &mut self.streams_per_account),
            ("connections_per_address", &mut self.connections_per_address),
            ("signin_address_failures_max", &mut self.signin_address_failures_max),
            ("mqtt_unauthenticated_max", &mut self.mqtt_unauthenticated_max),
        ]
    }

    /// Takes the limit keys out of a settings file's table, leaving the other keys.
    pub fn apply_table(&mut self, table: &mut toml::Table, file: &str) -> Result<()> {
        for (key, slot) in self.slots() {
            if let Some(n) = take_number(table, key, file, |n| n > 0, "a positive whole number")? {
                *slot = n;
            }
        }
        Ok(())
    }

    /// Applies the `DEVICECLOUD_*` variables that `env` finds (by name without the prefix).
    pub fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) -> Result<()> {
        for (key, slot) in self.slots() {
            let name = key.to_ascii_uppercase();
            if let Some(v) = env(&name) {
                *slot =
                    positive(&v).with_context(|| format!("DEVICECLOUD_{name}={v} is not a positive whole number"))?;
            }
        }
        Ok(())
    }

    /// Applies `--limit KEY=VALUE` flags.
    pub fn apply_flags(&mut self, flags: &[String]) -> Result<()> {
        for flag in flags {
            let Some((key, value)) = flag.split_once('=') else {
                bail!("--limit {flag}: expected KEY=VALUE, such as query_timeout_s=5");
            };
            let Some((_, slot)) = self.slots().into_iter().find(|(k, _)| *k == key) else {
                let known: Vec<&str> = Limits::default().slots().iter().map(|(k, _)| *k).collect();
                bail!("--limit {flag}: unknown limit; the limits are {}", known.join(", "));
            };
            *slot = positive(value).with_context(|| format!("--limit {flag}: not a positive whole number"))?;
        }
        Ok(())
    }

    /// The limits as the server takes them.
    pub fn server(&self) -> devicecloud_engine::settings::Limits {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        devicecloud_engine::settings::Limits {
            expand_max_depth: size(self.expand_max_depth),
            filter_max_values: size(self.filter_max_values),
            http_header_timeout: Duration::from_secs(self.http_header_timeout_s),
            http_body_timeout: Duration::from_secs(self.http_body_timeout_s),
            // Beyond the semaphore's own bound a cap means nothing anyway.
            http_max_connections: size(self.http_max_connections).min(tokio::sync::Semaphore::MAX_PERMITS),
            mqtt_max_connections: size(self.mqtt_max_connections).min(tokio::sync::Semaphore::MAX_PERMITS),
            query_timeout: Duration::from_secs(self.query_timeout_s),
            page_cache_bytes: size(self.page_cache_mb.saturating_mul(1024 * 1024)),
            signin_failures_max: u32::try_from(self.signin_failures_max).unwrap_or(u32::MAX),
            signin_window: Duration::from_secs(self.signin_window_s),
            token_lifetime: Duration::from_secs(self.token_lifetime_days.saturating_mul(86_400)),
            webhooks_per_group: size(self.webhooks_per_group),
            webhook_backlog_max: self.webhook_backlog_max,
            assets_per_gateway: size(self.assets_per_gateway),
            datatypes_per_device: size(self.datatypes_per_device),
            stream_buffer_bytes: size(self.stream_buffer_mb.saturating_mul(1024 * 1024)),
            expand_max_entries: size(self.expand_max_entries),
            streams_per_account: size(self.streams_per_account),
            connections_per_address: size(self.connections_per_address),
            signin_address_failures_max: u32::try_from(self.signin_address_failures_max).unwrap_or(u32::MAX),
            mqtt_unauthenticated_max: size(self.mqtt_unauthenticated_max).min(tokio::sync::Semaphore::MAX_PERMITS),
        }
    }
}

/// Takes `key` out of a settings file's table: `None` when absent, else a whole number that
/// `accept` takes, or an error naming the key, the file and what was `expected`.
pub fn take_number(
    table: &mut toml::Table,
    key: &str,
    file: &str,
    accept: impl Fn(u64) -> bool,
    expected: &str,
) -> Result<Option<u64>> {
    let Some(value) = table.remove(key) else {
        return Ok(None);
    };
    let number = value
        .as_integer()
        .and_then(|n| u64::try_from(n).ok())
        .filter(|n| accept(*n));
    number
        .map(Some)
        .with_context(|| format!("{key} in {file} must be {expected}"))
}

/// A whole number above zero, from a variable's or a flag's text.
pub fn positive(text: &str) -> Option<u64> {
    text.trim().parse().ok().filter(|n| *n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_applies_and_zero_is_refused() {
        let mut limits = Limits::default();
        assert_eq!(limits.server().query_timeout, Duration::from_secs(10));
        let mut table: toml::Table = toml::from_str("query_timeout_s = 3\nlog = \"debug\"\n").unwrap();
        limits.apply_table(&mut table, "f.toml").unwrap();
        assert_eq!(limits.query_timeout_s, 3);
        assert!(table.contains_key("log") && !table.contains_key("query_timeout_s"));
        limits
            .apply_env(|name| (name == "PAGE_CACHE_MB").then(|| "8".to_string()))
            .unwrap();
        assert_eq!(limits.server().page_cache_bytes, 8 << 20);
        limits.apply_flags(&["expand_max_depth=6".into()]).unwrap();
        assert_eq!(limits.server().expand_max_depth, 6);
        assert!(limits.apply_flags(&["expand_max_depth=0".into()]).is_err());
        assert!(limits.apply_flags(&["nope=1".into()]).is_err());
        assert!(limits.apply_env(|_| Some("-1".into())).is_err());
        let mut zero: toml::Table = toml::from_str("http_max_connections = 0\n").unwrap();
        assert!(limits.apply_table(&mut zero, "f.toml").is_err());
    }
}
