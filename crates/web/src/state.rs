//! The state the front ends (the HTTP API, the dashboard and the service layer under both)
//! receive: the handles of the engines they call and the caches they read. Engines never see
//! it: each is handed its own context by the composition root (`wiring`).

use std::sync::Arc;

use devicecloud_store::Db;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

use devicecloud_engine::auth::cache::AuthCache;
use devicecloud_engine::auth::login_limit::LoginLimiter;
use devicecloud_engine::auth::rate_limit::AccountLimiter;
use devicecloud_engine::commands::CommandLog;
use devicecloud_engine::gateway::registry::GatewayRegistry;
use devicecloud_engine::page_cache::PageCache;
use devicecloud_engine::settings::Settings;
use devicecloud_engine::stream::LiveFeed;
use devicecloud_engine::webhooks::WebhookHub;
use devicecloud_engine::{gateway, peers};

/// Shared state of the front ends: one allocation behind an `Arc`, so the clone every extractor
/// and layer makes of it is one reference count, not one per field.
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// What [`AppState`] holds.
pub struct Services {
    /// The pool of requests: statements bounded by the query timeout.
    pub db: Db,
    pub settings: Arc<Settings>,
    pub auth: Arc<AuthCache>,
    pub pages: Arc<PageCache>,
    pub metrics: PrometheusHandle,
    /// The gateway engine, for gateways that speak HTTP (`http::gateway`).
    pub gateway: Arc<gateway::Context>,
    /// Live gateway connections of this node, which commands are sent through.
    pub gateways: Arc<GatewayRegistry>,
    /// Where commands sent through the API are recorded as events.
    pub command_log: CommandLog,
    /// This process's identity among the nodes sharing a database.
    pub node_id: String,
    /// Where a change made here is applied and told to the other nodes (`peers::apply`).
    pub peers: Arc<peers::Context>,
    /// The last outcome of `/readyz`'s write probe and when it was taken: probes within a
    /// second share it, so the unauthenticated endpoint cannot turn into a stream of writes.
    pub readiness: tokio::sync::Mutex<Option<(std::time::Instant, bool)>>,
    /// Webhook routes and the signals between the ingest path, the API and the worker.
    pub webhooks: Arc<WebhookHub>,
    /// Failed sign-ins per (username, client address), for the password grant and the
    /// dashboard's form alike.
    pub login_limiter: Arc<LoginLimiter>,
    /// Requests per account on `/api/v2/`; `None` when the rate limit is off.
    pub account_limiter: Option<Arc<AccountLimiter>>,
    /// Cancelled when the service stops: a request still reading its body answers at once.
    pub shutdown: CancellationToken,
    /// What this node commits, for the live stream's clients.
    pub stream: Arc<LiveFeed>,
    /// Device twins: desired changes and their way to the gateways.
    pub twins: Arc<devicecloud_engine::twins::Context>,
    /// The job runner, woken when a job is created or cancelled here.
    pub jobs: Arc<devicecloud_engine::jobs::Context>,
    /// The alarm engine, told when a rule changes here.
    pub alarms: devicecloud_engine::alarms::Alarms,
    /// The key that signs firmware manifests.
    pub signer: Arc<devicecloud_engine::firmware::signing::Signer>,
    /// The pieces of images being downloaded, shared by every download.
    pub firmware_pieces: Arc<devicecloud_engine::firmware::pieces::Pieces>,
    /// The routes of the pages (the dashboard's) that take a firmware image and read it as it
    /// comes (`http::firmware_upload`), beside the API's upload.
    pub page_uploads: &'static [&'static str],
}

impl AppState {
    /// The front ends' state over `services`, built by the composition root (`wiring`).
    pub fn new(services: Services) -> AppState {
        AppState(Arc::new(services))
    }
}
