//! The one cloneable state every handler and task receives; nothing in the service is global
//! except the Prometheus recorder (see `metrics`).

use std::sync::Arc;
use std::time::Duration;

use devicecloud_store::Db;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::auth::cache::AuthCache;
use crate::http::page_cache::PageCache;

/// Settings of the running service that handlers need (the binary fills them from flags, the
/// TOML file and `DEVICECLOUD_*` variables).
#[derive(Clone, Debug)]
pub struct Settings {
    /// How long a command waits for the gateway's answer (`DEVICECLOUD_COMMAND_TIMEOUT_S`).
    pub command_timeout: Duration,
    /// Whether webhook URLs may resolve to private addresses (`DEVICECLOUD_WEBHOOK_ALLOW_PRIVATE`).
    pub webhook_allow_private: bool,
    /// Largest request body accepted, in bytes; larger ones answer 413.
    pub max_body_bytes: usize,
    /// How long a token or a set of roles is trusted from memory.
    pub auth_cache_ttl: Duration,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            command_timeout: Duration::from_secs(10),
            webhook_allow_private: false,
            max_body_bytes: 1024 * 1024,
            auth_cache_ttl: Duration::from_secs(5),
        }
    }
}

/// Shared state of the service.
#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    pub settings: Arc<Settings>,
    pub auth: Arc<AuthCache>,
    pub pages: Arc<PageCache>,
    pub metrics: PrometheusHandle,
}

impl AppState {
    pub fn new(db: Db, settings: Settings) -> AppState {
        AppState {
            db,
            pages: Arc::default(),
            auth: Arc::new(AuthCache::new(settings.auth_cache_ttl)),
            settings: Arc::new(settings),
            metrics: crate::metrics::handle(),
        }
    }
}
