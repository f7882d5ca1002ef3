//! The settings of the running service: one type, with its defaults, that every part reads.
//! Each field is read and written under its key (docs/operations.md, "Settings") in the unit the
//! key names ([`units`]); the binary layers the TOML file, the `DEVICECLOUD_*` variables and the
//! flags over the defaults, key by key, through serde.

use std::net::IpAddr;
use std::time::Duration;

use devicecloud_store::retention::Retention;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};

pub use crate::auth::rate_limit::RateLimit;

pub mod units;

/// Points one group commit takes at most by default (`ingest_batch_points`); more wait for the
/// next one. Larger groups are fewer commits, and a commit's cost is mostly the pages it logs
/// (docs/benchmarks.md, "API during full ingest"); other writers wait for one slice of it.
pub const INGEST_BATCH_POINTS: usize = 100_000;

/// Settings of the running service that handlers need (the binary fills them from flags, the
/// TOML file and `DEVICECLOUD_*` variables).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// How long a command waits for the gateway's answer (`DEVICECLOUD_COMMAND_TIMEOUT_S`).
    #[serde(rename = "command_timeout_s", with = "units::seconds")]
    pub command_timeout: Duration,
    /// Whether webhook URLs may resolve to private addresses (`DEVICECLOUD_WEBHOOK_ALLOW_PRIVATE`).
    #[serde(with = "units::switch")]
    pub webhook_allow_private: bool,
    /// Largest request body accepted, in bytes; larger ones answer 413.
    #[serde(with = "units::whole")]
    pub max_body_bytes: usize,
    /// Largest firmware image accepted, in bytes (`DEVICECLOUD_FIRMWARE_MAX_BYTES`); a larger
    /// upload answers 413. Images stream to the store, so this bounds the store, not memory.
    #[serde(with = "units::whole")]
    pub firmware_max_bytes: u64,
    /// How long a token or a set of roles is trusted from memory.
    #[serde(skip)]
    pub auth_cache_ttl: Duration,
    /// Largest MQTT packet accepted, in bytes; a larger one closes the connection.
    #[serde(with = "units::whole")]
    pub mqtt_max_packet_bytes: u32,
    /// How long one webhook request may take before it counts as failed.
    #[serde(rename = "webhook_timeout_s", with = "units::seconds")]
    pub webhook_timeout: Duration,
    /// How long a webhook batch is retried before it is marked failed (docs/api.md, "Deliveries":
    /// 24 h).
    #[serde(rename = "webhook_retry_window_s", with = "units::seconds")]
    pub webhook_retry_window: Duration,
    /// Most records in one webhook request.
    #[serde(with = "units::positive")]
    pub webhook_batch_max: usize,
    /// Most job executions this node starts a second, whatever a job's `rate_per_minute` allows:
    /// jobs run beside ingest, not in its place (docs/api.md, "Jobs").
    #[serde(with = "units::positive")]
    pub job_starts_per_s: usize,
    /// Most points in one ingest transaction (a group commit; docs/operations.md, "Storage").
    #[serde(with = "units::positive")]
    pub ingest_batch_points: usize,
    /// Ingest writers, each with a queue and a connection of its own; `None`: the store's
    /// default ([`crate::ingest::default_lanes`]).
    #[serde(with = "units::positive_option")]
    pub ingest_writers: Option<usize>,
    /// How long webhook attempts (and failed batches) are kept.
    #[serde(rename = "webhook_attempt_retention_days", with = "units::days")]
    pub webhook_attempt_retention: Duration,
    /// The limits that keep one client from taking the service down.
    #[serde(flatten)]
    pub limits: Limits,
    /// The public URL and the trusted proxies (docs/operations.md, "Behind a reverse proxy").
    #[serde(flatten)]
    pub front_end: FrontEnd,
    /// Requests per account on `/api/v2/` (`DEVICECLOUD_RATE_LIMIT`, `N/S`); `None`: off.
    #[serde(with = "units::rate_limit")]
    pub rate_limit: Option<RateLimit>,
    /// The key file that encrypts webhook secrets at rest (`DEVICECLOUD_SECRET_KEY_FILE`; the
    /// binary defaults it to `secret.key` in the data dir). `None` keeps a key in memory only,
    /// for tests and throw-away stores.
    pub secret_key_file: Option<std::path::PathBuf>,
    /// The key file that signs firmware manifests (`DEVICECLOUD_SIGNING_KEY_FILE`; the binary
    /// defaults it to `signing.key` in the data dir). `None` keeps a key in memory only.
    pub signing_key_file: Option<std::path::PathBuf>,
    /// How often the live stream sends a comment line (docs/api.md, "Live stream": 15 s).
    #[serde(skip)]
    pub stream_heartbeat: Duration,
    /// How often the live stream checks its client's token and groups again when no change
    /// of rights was made through this node meanwhile.
    #[serde(skip)]
    pub stream_recheck: Duration,
    /// How long the live stream records after its last client left: the time within which a
    /// reconnection resumes without a gap (docs/api.md, "Live stream": 10 minutes).
    #[serde(skip)]
    pub stream_retention: Duration,
    /// The retention of groups without their own (docs/operations.md, "Retention").
    #[serde(flatten)]
    pub retention: RetentionDefaults,
    /// How often expired points and rollups are removed (`DEVICECLOUD_RETENTION_INTERVAL_S`).
    #[serde(rename = "retention_interval_s", with = "units::positive_seconds")]
    pub retention_interval: Duration,
    /// How old a raw point gets before it is packed into its series' chunk
    /// (`DEVICECLOUD_PACK_AFTER_S`; docs/operations.md, "Compressed chunks").
    #[serde(rename = "pack_after_s", with = "units::seconds")]
    pub pack_after: Duration,
    /// How often the packer runs (`DEVICECLOUD_PACK_INTERVAL_S`).
    #[serde(rename = "pack_interval_s", with = "units::positive_seconds")]
    pub pack_interval: Duration,
    /// This node's name among the nodes sharing the store (`DEVICECLOUD_NODE_ID`); `None`: the
    /// host name and the process id.
    #[serde(with = "units::node_id")]
    pub node_id: Option<String>,
    /// How long this node's lease lasts without renewal (`DEVICECLOUD_NODE_LEASE_S`, 15 s): a
    /// node silent for longer is taken for dead, and the gateways it held for disconnected.
    #[serde(rename = "node_lease_s", with = "units::lease")]
    pub node_lease: Duration,
}

/// The limits of docs/operations.md, "Limits": every one a setting, each refusal the
/// specification's error body.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Most segments in one `expand` path (`parent.parent.parent.group` is 4); deeper is a
    /// 400 before any store work (`DEVICECLOUD_EXPAND_MAX_DEPTH`).
    #[serde(with = "units::positive")]
    pub expand_max_depth: usize,
    /// Most values in one `in` / `nin` list of a filter; more is a 422 filter error
    /// (`DEVICECLOUD_FILTER_MAX_VALUES`).
    #[serde(with = "units::positive")]
    pub filter_max_values: usize,
    /// A request's headers must arrive within this from its first byte (a fresh connection:
    /// from its opening) (`DEVICECLOUD_HTTP_HEADER_TIMEOUT_S`).
    #[serde(rename = "http_header_timeout_s", with = "units::positive_seconds")]
    pub http_header_timeout: Duration,
    /// A request body must arrive within this, or the answer is 408
    /// (`DEVICECLOUD_HTTP_BODY_TIMEOUT_S`).
    #[serde(rename = "http_body_timeout_s", with = "units::positive_seconds")]
    pub http_body_timeout: Duration,
    /// Most HTTP connections at once; more are closed on accept
    /// (`DEVICECLOUD_HTTP_MAX_CONNECTIONS`).
    #[serde(with = "units::connections")]
    pub http_max_connections: usize,
    /// Most MQTT connections at once on both listeners; more get CONNACK 3 and are closed
    /// (`DEVICECLOUD_MQTT_MAX_CONNECTIONS`).
    #[serde(with = "units::connections")]
    pub mqtt_max_connections: usize,
    /// How long one request's store work may run before it is cancelled and answered 503
    /// (`DEVICECLOUD_QUERY_TIMEOUT_S`).
    #[serde(rename = "query_timeout_s", with = "units::positive_seconds")]
    pub query_timeout: Duration,
    /// Bytes the remembered-page cache may hold (`DEVICECLOUD_PAGE_CACHE_MB`).
    #[serde(rename = "page_cache_mb", with = "units::mebibytes")]
    pub page_cache_bytes: usize,
    /// Failed sign-ins of one (username, client address) within `signin_window` after which
    /// that pair answers 429 without the password being checked (`DEVICECLOUD_SIGNIN_FAILURES_MAX`).
    #[serde(with = "units::positive")]
    pub signin_failures_max: u32,
    /// The window the failed sign-ins are counted in (`DEVICECLOUD_SIGNIN_WINDOW_S`).
    #[serde(rename = "signin_window_s", with = "units::positive_seconds")]
    pub signin_window: Duration,
    /// How long after the password grant its token pair may be refreshed
    /// (`DEVICECLOUD_TOKEN_LIFETIME_DAYS`).
    #[serde(rename = "token_lifetime_days", with = "units::positive_days")]
    pub token_lifetime: Duration,
    /// Most webhooks in one group; one more answers 422 (`DEVICECLOUD_WEBHOOKS_PER_GROUP`).
    #[serde(with = "units::positive")]
    pub webhooks_per_group: usize,
    /// Most alarm rules in one group; one more answers 422 (`DEVICECLOUD_ALARM_RULES_PER_GROUP`).
    #[serde(with = "units::positive")]
    pub alarm_rules_per_group: usize,
    /// Queued items of one webhook beyond which it is set inactive
    /// (`DEVICECLOUD_WEBHOOK_BACKLOG_MAX`).
    #[serde(with = "units::positive")]
    pub webhook_backlog_max: u64,
    /// Most child devices one gateway may have (`DEVICECLOUD_ASSETS_PER_GATEWAY`).
    #[serde(with = "units::positive")]
    pub assets_per_gateway: usize,
    /// Most datatypes (series) one device may have (`DEVICECLOUD_DATATYPES_PER_DEVICE`).
    #[serde(with = "units::positive")]
    pub datatypes_per_device: usize,
    /// Bytes the live stream's replay buffer may hold (`DEVICECLOUD_STREAM_BUFFER_MB`): a client
    /// further behind, or resuming from further back, gets `overflow`.
    #[serde(rename = "stream_buffer_mb", with = "units::mebibytes")]
    pub stream_buffer_bytes: usize,
    /// Most entries the expanded relations of one answer may hold in all (series of
    /// `latestData`, templates of `modbusTemplateHistory`); more is a 400 naming `expand`,
    /// before the answer is built (`DEVICECLOUD_EXPAND_MAX_ENTRIES`).
    #[serde(with = "units::positive")]
    pub expand_max_entries: usize,
    /// Most live streams one account may hold open; one more answers 429
    /// (`DEVICECLOUD_STREAMS_PER_ACCOUNT`).
    #[serde(with = "units::positive")]
    pub streams_per_account: usize,
    /// Most connections one client address may hold, HTTP and MQTT each
    /// (`DEVICECLOUD_CONNECTIONS_PER_ADDRESS`).
    #[serde(with = "units::positive")]
    pub connections_per_address: usize,
    /// Failed sign-ins from one client address, whatever the username, within `signin_window`
    /// after which that address answers 429 (`DEVICECLOUD_SIGNIN_ADDRESS_FAILURES_MAX`).
    #[serde(with = "units::positive")]
    pub signin_address_failures_max: u32,
    /// Most MQTT connections at once whose CONNECT is not yet answered; more are closed on
    /// accept (`DEVICECLOUD_MQTT_UNAUTHENTICATED_MAX`).
    #[serde(with = "units::connections")]
    pub mqtt_unauthenticated_max: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            expand_max_depth: 4,
            filter_max_values: 1000,
            http_header_timeout: Duration::from_secs(10),
            http_body_timeout: Duration::from_secs(30),
            http_max_connections: 10_000,
            mqtt_max_connections: 100_000,
            query_timeout: Duration::from_secs(10),
            page_cache_bytes: 64 * 1024 * 1024,
            signin_failures_max: 10,
            signin_window: Duration::from_secs(300),
            token_lifetime: Duration::from_secs(90 * 86_400),
            webhooks_per_group: 20,
            alarm_rules_per_group: 200,
            webhook_backlog_max: 1_000_000,
            assets_per_gateway: 1000,
            datatypes_per_device: 1000,
            stream_buffer_bytes: 64 * 1024 * 1024,
            expand_max_entries: 10_000,
            streams_per_account: 16,
            connections_per_address: 256,
            signin_address_failures_max: 30,
            mqtt_unauthenticated_max: 4096,
        }
    }
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            command_timeout: Duration::from_secs(10),
            webhook_allow_private: false,
            max_body_bytes: 1024 * 1024,
            firmware_max_bytes: 64 * 1024 * 1024,
            auth_cache_ttl: Duration::from_secs(5),
            mqtt_max_packet_bytes: 256 * 1024,
            webhook_timeout: Duration::from_secs(10),
            webhook_retry_window: Duration::from_secs(24 * 3600),
            webhook_batch_max: 1000,
            job_starts_per_s: 1200,
            ingest_batch_points: INGEST_BATCH_POINTS,
            ingest_writers: None,
            webhook_attempt_retention: Duration::from_secs(7 * 86_400),
            limits: Limits::default(),
            front_end: FrontEnd::default(),
            rate_limit: Some(RateLimit {
                requests: 6000,
                per: Duration::from_secs(60),
            }),
            secret_key_file: None,
            signing_key_file: None,
            stream_heartbeat: Duration::from_secs(15),
            stream_recheck: Duration::from_secs(1),
            stream_retention: Duration::from_secs(600),
            retention: RetentionDefaults::default(),
            retention_interval: Duration::from_secs(600),
            pack_after: Duration::from_secs(3600),
            pack_interval: Duration::from_secs(300),
            node_id: None,
            node_lease: Duration::from_secs(15),
        }
    }
}

/// The settings of the front end: the public URL and the proxies whose headers count.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FrontEnd {
    /// Base of every absolute link, such as `https://iot.example.com` or
    /// `https://example.com/devicecloud` (no trailing slash); also decides the dashboard
    /// cookie's `Secure` flag (`DEVICECLOUD_PUBLIC_URL`).
    #[serde(with = "units::public_url")]
    pub public_url: Option<String>,
    /// Peers whose forwarding headers are believed (`DEVICECLOUD_TRUSTED_PROXIES`).
    #[serde(with = "units::proxies")]
    pub trusted_proxies: Vec<IpNet>,
}

impl FrontEnd {
    /// Checks and normalises a public URL: `http` or `https`, a host, no query or fragment;
    /// a trailing `/` is dropped.
    pub fn public_url(text: &str) -> Result<String, String> {
        let trimmed = text.trim().trim_end_matches('/');
        let uri: http::Uri = trimmed
            .parse()
            .map_err(|_| format!("{text} is not a URL such as https://iot.example.com"))?;
        let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
        if !scheme_ok || uri.host().is_none_or(str::is_empty) || uri.query().is_some() || trimmed.contains('#') {
            return Err(format!(
                "{text} must be an http:// or https:// URL with a host and no query, such as https://iot.example.com"
            ));
        }
        Ok(trimmed.to_string())
    }

    /// Whether `addr` (already canonical, see `origin`) is a trusted proxy.
    pub fn trusts(&self, addr: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|net| net.contains(&addr))
    }
}

/// The retention of groups without their own (docs/operations.md, "Retention"): the days each
/// kind of time series is kept; unset keeps forever.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RetentionDefaults {
    #[serde(rename = "retention_raw_days", with = "units::days_kept")]
    pub raw_days: Option<i64>,
    #[serde(rename = "retention_minute_days", with = "units::days_kept")]
    pub minute_days: Option<i64>,
    #[serde(rename = "retention_hour_days", with = "units::days_kept")]
    pub hour_days: Option<i64>,
    #[serde(rename = "retention_day_days", with = "units::days_kept")]
    pub day_days: Option<i64>,
}

impl From<RetentionDefaults> for Retention {
    fn from(r: RetentionDefaults) -> Retention {
        Retention {
            raw_days: r.raw_days,
            minute_days: r.minute_days,
            hour_days: r.hour_days,
            day_days: r.day_days,
        }
    }
}
