//! Settings of the binary: its own (where the store and the listeners are, logging) beside the
//! service's ([`devicecloud_engine::settings::Settings`], flattened: one set of keys), read
//! from the defaults, then a TOML file (`--config`), then `DEVICECLOUD_*` variables, then
//! command-line flags, each later source winning ([`layers`]; docs/operations.md, "Settings").

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use devicecloud_engine::settings::units;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod layers;

pub use layers::Layers;

/// Everything `serve` and the admin commands need to know.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    pub data_dir: PathBuf,
    /// `None` means the SQLite file `devicecloud.db` in the data dir.
    pub database_url: Option<String>,
    #[serde(with = "address")]
    pub http_addr: SocketAddr,
    #[serde(with = "address")]
    pub mqtt_addr: SocketAddr,
    /// The TLS listener of the gateway endpoint, beside the plain one; `None`: no TLS listener.
    #[serde(with = "address::optional")]
    pub mqtt_tls_addr: Option<SocketAddr>,
    /// PEM certificate chain of the TLS listener: the server's certificate, then intermediates.
    pub mqtt_tls_cert: Option<PathBuf>,
    /// PEM private key of the TLS listener (PKCS#8, PKCS#1 or SEC1).
    pub mqtt_tls_key: Option<PathBuf>,
    /// Milliseconds; when set, wins over `command_timeout_s` (sub-second timeouts for tests).
    #[serde(with = "units::positive_option")]
    pub command_timeout_ms: Option<usize>,
    pub log: String,
    /// How log lines are written on stderr.
    pub log_format: LogFormat,
    /// The service's settings, under their own keys.
    #[serde(flatten)]
    pub service: devicecloud_engine::settings::Settings,
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
            command_timeout_ms: None,
            log: "info".into(),
            log_format: LogFormat::Text,
            service: devicecloud_engine::settings::Settings::default(),
        }
    }
}

/// How log lines are written (docs/operations.md, "Logs").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
        let env = |name: &str| std::env::var(name).ok();
        let mut layers = Layers::<Settings>::new();
        let config = flags
            .config
            .clone()
            .or_else(|| env("DEVICECLOUD_CONFIG").filter(|v| !v.is_empty()).map(PathBuf::from));
        if let Some(path) = config {
            layers.file(&path)?;
        }
        layers.environment("DEVICECLOUD_", env)?;
        flags.apply(&mut layers)?;
        let settings = layers.settings()?;
        // Checked here, whatever the command, so an incomplete TLS setup is reported at once
        // rather than when a gateway first tries to connect.
        settings.mqtt_tls()?;
        Ok(settings)
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

    /// The service settings handed to the server: the secret key file in the data dir unless
    /// set, and a timeout in milliseconds over the one in seconds.
    pub fn server(&self) -> devicecloud_engine::settings::Settings {
        let mut service = self.service.clone();
        service.secret_key_file = Some(self.secret_key_file());
        service.signing_key_file = Some(self.signing_key_file());
        if let Some(ms) = self.command_timeout_ms {
            service.command_timeout = Duration::from_millis(ms as u64);
        }
        service
    }

    /// The key file that encrypts webhook secrets: the configured one, or `secret.key` in the
    /// data dir.
    pub fn secret_key_file(&self) -> PathBuf {
        self.service
            .secret_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("secret.key"))
    }

    /// The key file that signs firmware manifests: the configured one, or `signing.key` in the
    /// data dir.
    pub fn signing_key_file(&self) -> PathBuf {
        self.service
            .signing_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("signing.key"))
    }
}

impl Flags {
    /// Sets what the flags give, over the file and the variables.
    fn apply(&self, layers: &mut Layers<Settings>) -> Result<()> {
        let text = |v: &dyn std::fmt::Display| Value::String(v.to_string());
        let paths = [
            ("data_dir", &self.data_dir),
            ("mqtt_tls_cert", &self.mqtt_tls_cert),
            ("mqtt_tls_key", &self.mqtt_tls_key),
        ];
        for (key, value) in paths {
            if let Some(path) = value {
                layers.set(key, text(&path.display()), &format!("--{}", key.replace('_', "-")))?;
            }
        }
        if let Some(url) = &self.database_url {
            layers.set("database_url", text(url), "--database-url")?;
        }
        let addresses = [
            ("http_addr", self.http_addr),
            ("mqtt_addr", self.mqtt_addr),
            ("mqtt_tls_addr", self.mqtt_tls_addr),
        ];
        for (key, value) in addresses {
            if let Some(addr) = value {
                layers.set(key, text(&addr), &format!("--{}", key.replace('_', "-")))?;
            }
        }
        let limits: Vec<String> = layers::keys_of(&devicecloud_engine::settings::Limits::default())
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        for flag in &self.limits {
            let Some((key, value)) = flag.split_once('=') else {
                bail!("--limit {flag}: expected KEY=VALUE, such as query_timeout_s=5");
            };
            if !limits.iter().any(|k| k == key) {
                bail!("--limit {flag}: unknown limit; the limits are {}", limits.join(", "));
            }
            layers.set(key, text(&value), &format!("--limit {flag}"))?;
        }
        Ok(())
    }
}

/// A listen address, from the file or from text.
mod address {
    use std::net::SocketAddr;

    use serde::{Deserialize, Deserializer, Serializer, de};

    pub fn serialize<S: Serializer>(v: &SocketAddr, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
        let text = String::deserialize(d)?;
        text.trim()
            .parse()
            .map_err(|_| de::Error::custom(format!("{text:?} is not an address such as 127.0.0.1:8080")))
    }

    /// A listen address, or unset.
    pub mod optional {
        use super::*;

        pub fn serialize<S: Serializer>(v: &Option<SocketAddr>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(addr) => s.collect_str(addr),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
            match Option::<String>::deserialize(d)? {
                Some(text) if !text.trim().is_empty() => text
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| de::Error::custom(format!("{text:?} is not an address such as 0.0.0.0:8883"))),
                _ => Ok(None),
            }
        }
    }
}

#[cfg(test)]
mod tests;
