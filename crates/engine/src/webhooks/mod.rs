//! Webhooks (docs/api.md, "Webhooks"): records pushed to customer endpoints, at least once. The
//! ingest transaction queues records in the outbox; the worker here cuts them into batches, signs
//! and posts them, and retries with backoff (docs/api.md, "Deliveries") until the receiver accepts
//! or the retry window closes, setting inactive a webhook that keeps failing. Receivers'
//! addresses are checked where they are resolved (`address`), and the webhooks' credentials are
//! kept sealed (`vault`).

pub mod address;
pub mod format;
pub mod signature;
pub mod transport;
pub mod vault;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use devicecloud_store::webhooks::Routes;
use tokio::sync::Notify;

use address::CheckedResolver;
use vault::Vault;
pub use worker::{DISABLED, ITEMS, WorkerContext, backoff, set_inactive, spawn_worker};

/// What the ingest path, the API and the worker share about webhooks.
#[derive(Debug)]
pub struct WebhookHub {
    /// Which webhooks take which group's records (read on every ingest batch).
    pub routes: Routes,
    /// Rung after a commit queued records: idle delivery lanes look at their queue at once.
    pub queued: Notify,
    /// Rung when a webhook was created, changed or deleted: the worker revises its lanes.
    pub changed: Notify,
    /// Resolves and checks receivers' hosts, for the API's check and the delivery client.
    pub resolver: Arc<CheckedResolver>,
    /// Seals and opens the webhooks' `secret` and `authorization`.
    pub vault: Arc<Vault>,
}

impl WebhookHub {
    /// A hub whose route table is trusted for `ttl` (changes through another node).
    pub fn new(ttl: Duration, resolver: CheckedResolver, vault: Vault) -> WebhookHub {
        WebhookHub {
            routes: Routes::new(ttl),
            queued: Notify::new(),
            changed: Notify::new(),
            resolver: Arc::new(resolver),
            vault: Arc::new(vault),
        }
    }

    /// After a webhook changed on this node: reload the routes, revise the lanes.
    pub fn webhook_changed(&self) {
        self.routes.invalidate();
        self.changed.notify_one();
    }
}
