//! The composition root's inside: the one place that builds the pools, every engine's context
//! and the front ends' state from the settings, and starts the engines and their background
//! tasks (docs/ARCHITECTURE.md, "Engines and their contexts"). Every long-lived task starts here,
//! on the service's one tracker (an engine may run tasks of its own on it, such as its lanes).

use std::sync::Arc;

use devicecloud_store::{Backend, Db};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use devicecloud_engine::admission::{Admission, Places};
use devicecloud_engine::alarms::{self, Alarms};
use devicecloud_engine::auth::cache::AuthCache;
use devicecloud_engine::auth::login_limit::LoginLimiter;
use devicecloud_engine::auth::rate_limit::AccountLimiter;
use devicecloud_engine::commands::CommandLog;
use devicecloud_engine::firmware::pieces::{self, Pieces};
use devicecloud_engine::firmware::signing::Signer;
use devicecloud_engine::gateway::departures::Departures;
use devicecloud_engine::gateway::registry::GatewayRegistry;
use devicecloud_engine::gateway::rejections::{self, RejectionLog};
use devicecloud_engine::ingest::{self, IngestQueue};
use devicecloud_engine::jobs;
use devicecloud_engine::page_cache::PageCache;
use devicecloud_engine::peers::{self, Ears, Peers};
use devicecloud_engine::settings::Settings;
use devicecloud_engine::stream::{self, LiveFeed};
use devicecloud_engine::twins;
use devicecloud_engine::twins::reports::ReportQueue;
use devicecloud_engine::webhooks::address::{CheckedResolver, SystemLookup};
use devicecloud_engine::webhooks::vault::Vault;
use devicecloud_engine::webhooks::{self, WebhookHub, WorkerContext};
use devicecloud_engine::{gateway, nodes, packing, retention, upkeep};
use devicecloud_web::state::{AppState, Services};

/// The three pools on one database: requests, the background writers, and the ingest writers.
/// Apart so that none starves another of connections.
#[derive(Clone)]
pub struct Pools {
    /// Requests (API, dashboard, gateway messages): statements bounded by the query timeout.
    pub requests: Db,
    /// The background writers (command log, webhooks, upkeep, losses, rejections).
    pub writer: Db,
    /// The ingest writers' own pool ([`Db::dedicated`]).
    pub ingest: Db,
}

impl Pools {
    /// `db` becomes the writers' pool; requests and ingest get pools of their own on the same
    /// database.
    fn over(db: Db, settings: &Settings) -> Pools {
        let connections = match db.backend() {
            // SQLite readers scale with the cores; PostgreSQL connections are server processes.
            Backend::Sqlite => 8,
            Backend::Postgres => 16,
        };
        Pools {
            requests: db.for_requests(settings.limits.query_timeout, connections),
            ingest: db.dedicated(),
            writer: db,
        }
    }

    /// Closes the pools (on SQLite, the last one closed checkpoints the WAL).
    pub async fn close(&self) {
        self.requests.close().await;
        self.ingest.close().await;
        self.writer.close().await;
    }
}

/// What the composition root hands on: the front ends' state, the MQTT transport's context,
/// and what stopping needs.
pub struct Wired {
    pub state: AppState,
    pub mqtt: Arc<devicecloud_mqtt::Context>,
    pub gateway: Arc<gateway::Context>,
    pub pools: Pools,
}

/// The keys the service keeps in files beside its store.
pub struct Keys {
    /// The key of the webhook credentials.
    pub vault: Vault,
    /// The key that signs firmware manifests.
    pub signer: Signer,
}

/// Builds the service on `db` and starts its engines on `tracker`; they stop (the ingest
/// queue after draining) when `shutdown` is cancelled.
pub fn wire(db: Db, settings: Settings, keys: Keys, tracker: &TaskTracker, shutdown: &CancellationToken) -> Wired {
    let Keys { vault, signer } = keys;
    let settings = Arc::new(settings);
    let limits = &settings.limits;
    let pools = Pools::over(db, &settings);
    let node_id = settings.node_id.clone().unwrap_or_else(default_node_id);

    // What the engines share: caches, limits, routes.
    let resolver = CheckedResolver::new(Arc::new(SystemLookup), settings.webhook_allow_private);
    let webhooks = Arc::new(WebhookHub::new(settings.auth_cache_ttl, resolver, vault));
    let auth = Arc::new(AuthCache::new(settings.auth_cache_ttl));
    let pages = Arc::new(PageCache::new(limits.page_cache_bytes));
    let gateways = Arc::new(GatewayRegistry::default());
    let login_limiter = Arc::new(LoginLimiter::new(
        limits.signin_failures_max,
        limits.signin_address_failures_max,
        limits.signin_window,
    ));

    // One listening connection for the stream's and the peers' channels.
    let mut ears = Ears::new(&pools.writer);
    let stream_heard = ears.hear(&stream::CHANNELS);
    let peers_heard = ears.hear(&[peers::CHANNEL, &peers::node_channel(&node_id)]);
    ears.start(tracker, shutdown);
    let stream = LiveFeed::start(
        pools.writer.clone(),
        stream_heard,
        limits.stream_buffer_bytes,
        settings.stream_retention,
        tracker,
        shutdown.clone(),
    );
    let told = Peers::start(&pools.writer, &node_id, peers_heard, tracker, shutdown);
    // With other nodes to tell, requests are counted for them too.
    let account_limiter = AccountLimiter::new(settings.rate_limit)
        .map(|l| if told.reaches_others() { l.reporting() } else { l })
        .map(Arc::new);
    let writers = ingest::Writers {
        lanes: settings
            .ingest_writers
            .unwrap_or(ingest::default_lanes(pools.writer.backend())),
        batch_points: settings.ingest_batch_points,
    };
    let alarms = Alarms::start(
        alarms::Context {
            db: pools.writer.clone(),
            webhooks: webhooks.clone(),
            stream: stream.clone(),
        },
        tracker,
        shutdown.clone(),
    );
    let sinks = ingest::Sinks {
        webhooks: webhooks.clone(),
        stream: stream.clone(),
        alarms: alarms.clone(),
    };
    let ingest = IngestQueue::start(pools.ingest.clone(), writers, sinks, tracker, shutdown.clone());
    let command_log = CommandLog::start(pools.writer.clone(), stream.clone(), tracker, shutdown.clone());
    let twin_reports = ReportQueue::start(
        pools.writer.clone(),
        webhooks.clone(),
        stream.clone(),
        tracker,
        shutdown.clone(),
    );

    // The engines' contexts.
    let gateway = Arc::new(gateway::Context {
        db: pools.requests.clone(),
        writer: pools.writer.clone(),
        node_id: node_id.clone(),
        assets_per_gateway: limits.assets_per_gateway,
        datatypes_per_device: limits.datatypes_per_device,
        ingest,
        twin_reports,
        stream: stream.clone(),
        webhooks: webhooks.clone(),
        gateways: gateways.clone(),
        departures: Departures::default(),
        rejections: RejectionLog::default(),
        alarms: alarms.clone(),
    });
    let peers = Arc::new(peers::Context {
        db: pools.requests.clone(),
        node_id: node_id.clone(),
        peers: told,
        auth: auth.clone(),
        pages: pages.clone(),
        webhooks: webhooks.clone(),
        account_limiter: account_limiter.clone(),
        login_limiter: login_limiter.clone(),
        gateways: gateways.clone(),
        command_timeout: settings.command_timeout,
        shutdown: shutdown.clone(),
    });
    let twins = Arc::new(twins::Context {
        db: pools.requests.clone(),
        routes: webhooks.clone(),
        stream: stream.clone(),
        gateways: gateways.clone(),
        peers: peers.clone(),
    });
    let jobs = Arc::new(jobs::Context {
        db: pools.writer.clone(),
        node_id: node_id.clone(),
        lease: settings.node_lease,
        gateways: gateways.clone(),
        peers: peers.clone(),
        twins: twins.clone(),
        webhooks: webhooks.clone(),
        stream: stream.clone(),
        starts_per_s: settings.job_starts_per_s,
        wake: tokio::sync::Notify::new(),
    });
    let mqtt = Arc::new(devicecloud_mqtt::Context {
        gateway: gateway.clone(),
        peers: peers.clone(),
        admission: Arc::new(Admission::new(Places {
            gateways: limits.mqtt_max_connections,
            unauthenticated: limits.mqtt_unauthenticated_max,
            per_address: limits.connections_per_address,
            trusted: settings.front_end.trusted_proxies.clone(),
        })),
        max_packet_bytes: settings.mqtt_max_packet_bytes,
    });

    // The background tasks.
    tracker.spawn(peers::apply::listen(peers.clone()));
    tracker.spawn(peers::apply::report_requests(peers.clone()));
    tracker.spawn(nodes::keep(gateway.clone(), settings.node_lease, shutdown.clone()));
    tracker.spawn(rejections::flush(gateway.clone(), shutdown.clone()));
    let worker = WorkerContext {
        db: pools.writer.clone(),
        hub: webhooks.clone(),
        stream: stream.clone(),
        settings: settings.clone(),
        node_id: node_id.clone(),
    };
    webhooks::spawn_worker(worker, tracker, shutdown);
    jobs::spawn(jobs.clone(), tracker, shutdown);
    let expiry = retention::Context {
        db: pools.writer.clone(),
        defaults: settings.retention.into(),
        interval: settings.retention_interval,
    };
    retention::spawn(expiry, tracker, shutdown);
    let packer = packing::Context {
        db: pools.writer.clone(),
        after: settings.pack_after,
        interval: settings.pack_interval,
    };
    packing::spawn(packer, tracker, shutdown);
    upkeep::spawn(pools.writer.clone(), tracker, shutdown);

    // The front ends' state.
    let state = AppState::new(Services {
        db: pools.requests.clone(),
        settings,
        auth,
        pages,
        metrics: devicecloud_engine::metrics::handle(),
        gateway: gateway.clone(),
        gateways,
        command_log,
        node_id,
        peers,
        readiness: tokio::sync::Mutex::new(None),
        webhooks,
        login_limiter,
        account_limiter,
        shutdown: shutdown.clone(),
        stream,
        twins,
        jobs,
        alarms,
        signer: Arc::new(signer),
        firmware_pieces: Arc::new(Pieces::new(pools.requests.clone(), pieces::CAPACITY_BYTES)),
        page_uploads: &devicecloud_dashboard::UPLOAD_ROUTES,
    });
    Wired {
        state,
        mqtt,
        gateway,
        pools,
    }
}

/// The host name and the process id (`gateway-7-4242`): unique among live nodes, new at every
/// start.
fn default_node_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(40)
        .collect();
    let host = if host.is_empty() { "node".to_string() } else { host };
    format!("{host}-{}", std::process::id())
}
