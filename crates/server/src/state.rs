//! The one cloneable state every handler and task receives; nothing in the service is global
//! except the Prometheus recorder (see `metrics`).

use std::sync::Arc;
use std::time::Duration;

use devicecloud_store::Db;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::auth::cache::AuthCache;
use crate::commands::CommandLog;
use crate::http::dashboard::login_limit::LoginLimiter;
use crate::http::page_cache::PageCache;
use crate::ingest::IngestQueue;
use crate::mqtt::registry::GatewayRegistry;
use crate::webhooks::WebhookHub;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

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
    /// Largest MQTT packet accepted, in bytes; a larger one closes the connection.
    pub mqtt_max_packet_bytes: u32,
    /// How long one webhook request may take before it counts as failed.
    pub webhook_timeout: Duration,
    /// How long a webhook batch is retried before it is marked failed (contract §5: 24 h).
    pub webhook_retry_window: Duration,
    /// Most records in one webhook request.
    pub webhook_batch_max: usize,
    /// How long webhook attempts (and failed batches) are kept.
    pub webhook_attempt_retention: Duration,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            command_timeout: Duration::from_secs(10),
            webhook_allow_private: false,
            max_body_bytes: 1024 * 1024,
            auth_cache_ttl: Duration::from_secs(5),
            mqtt_max_packet_bytes: 256 * 1024,
            webhook_timeout: Duration::from_secs(10),
            webhook_retry_window: Duration::from_secs(24 * 3600),
            webhook_batch_max: 1000,
            webhook_attempt_retention: Duration::from_secs(7 * 86_400),
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
    /// The submitting side of the ingest queue.
    pub ingest: IngestQueue,
    /// Live gateway connections of this node.
    pub gateways: Arc<GatewayRegistry>,
    /// Where commands sent through the API are recorded as events.
    pub command_log: CommandLog,
    /// This process's identity among the nodes sharing a database.
    pub node_id: String,
    /// Webhook routes and the signals between the ingest path, the API and the worker.
    pub webhooks: Arc<WebhookHub>,
    /// Failed dashboard sign-ins, for the rate limit.
    pub login_limiter: Arc<LoginLimiter>,
}

impl AppState {
    /// The state of a service, with its ingest writer started on `tracker` (stopped, after
    /// draining, when `shutdown` is cancelled).
    pub fn start(db: Db, settings: Settings, tracker: &TaskTracker, shutdown: &CancellationToken) -> AppState {
        let webhooks = Arc::new(WebhookHub::new(settings.auth_cache_ttl));
        AppState {
            ingest: IngestQueue::start(db.clone(), webhooks.clone(), tracker, shutdown.clone()),
            command_log: CommandLog::start(db.clone(), tracker, shutdown.clone()),
            webhooks,
            db,
            pages: Arc::default(),
            auth: Arc::new(AuthCache::new(settings.auth_cache_ttl)),
            settings: Arc::new(settings),
            metrics: crate::metrics::handle(),
            gateways: Arc::default(),
            node_id: uuid::Uuid::new_v4().to_string(),
            login_limiter: Arc::default(),
        }
    }
}
