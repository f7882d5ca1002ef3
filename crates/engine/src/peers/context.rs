//! What a change touches on this node: the caches that hold rights, the limits' counts, the
//! webhook routes and the live gateway connections (and the desired documents they get); and
//! what commands for another node's gateways go through.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Peers;
use crate::auth::cache::AuthCache;
use crate::auth::login_limit::LoginLimiter;
use crate::auth::rate_limit::AccountLimiter;
use crate::gateway::registry::GatewayRegistry;
use crate::page_cache::PageCache;
use crate::webhooks::WebhookHub;

/// The peers engine's context, built once by the composition root and shared behind an `Arc`.
pub struct Context {
    /// The store, for what a change needs read (a desired document to send).
    pub db: devicecloud_store::Db,
    /// This node's name among the nodes sharing the store.
    pub node_id: String,
    /// Where changes go to the other nodes.
    pub peers: Peers,
    /// Tokens and roles trusted from memory.
    pub auth: Arc<AuthCache>,
    /// Remembered pages of collections.
    pub pages: Arc<PageCache>,
    /// Webhook routes and lanes.
    pub webhooks: Arc<WebhookHub>,
    /// Requests per account; `None` when the rate limit is off.
    pub account_limiter: Option<Arc<AccountLimiter>>,
    /// Failed sign-ins.
    pub login_limiter: Arc<LoginLimiter>,
    /// The live gateway connections of this node.
    pub gateways: Arc<GatewayRegistry>,
    /// How long a command waits for the gateway's answer.
    pub command_timeout: Duration,
    /// Cancelled when the service stops.
    pub shutdown: CancellationToken,
}
