//! The delivery worker: one lane per active webhook, so that a receiver that keeps failing
//! (and its backoff) never delays the others, while each lane keeps its webhook's order: a
//! batch goes out only once the one before it was accepted or given up.
//!
//! A lane takes the oldest pending delivery (a retry, or a batch cut before a restart) or else
//! cuts a new batch from the outbox (the records queued at that moment, up to the batch bound:
//! records arriving while a delivery is in flight make the next batch, so batches grow with
//! the load and latency stays one round trip), posts it, logs the attempt, and on failure waits
//! out the backoff (docs/api.md, "Deliveries"). While a batch is posted for the first time, the
//! next one is cut, so that the store's work overlaps with the receiver's round trip.
//!
//! A lane also watches its own webhook's health (docs/api.md, "Failing webhooks"): when a batch
//! has failed for the whole retry window, or the backlog passes `webhook_backlog_max`, it sets
//! the webhook inactive (queue dropped, event 214) and ends.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use devicecloud_store::series::{self, Series};
use devicecloud_store::webhooks::{self, Attempt, Deactivated, Deactivation, DeliveryRow, Outcome, WebhookRow};
use devicecloud_store::{Db, StoreError, unix_now};
use rand::Rng;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::transport::{self, Failure};
use super::{WebhookHub, format};
use crate::event_catalogue::{REASON_BACKLOG, REASON_RETRY_WINDOW};
use crate::event_types;
use crate::settings::Settings;
use crate::stream::LiveFeed;

/// First retry delay, doubled per failure up to [`BACKOFF_MAX`] (docs/api.md, "Deliveries").
const BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// Longest retry delay (docs/api.md, "Deliveries").
const BACKOFF_MAX: Duration = Duration::from_secs(600);
/// How often an idle lane looks at its queue unprompted: events are queued by other writers
/// than the ingest queue, and other nodes may queue records too.
const IDLE_POLL: Duration = Duration::from_millis(500);
/// How often the lanes are compared with the stored webhooks without a local change.
const REVISE_EVERY: Duration = Duration::from_secs(5);
/// How often a lane with work counts its backlog against `webhook_backlog_max` (a count bounded
/// by the limit, so not on every step).
const BACKLOG_CHECK_EVERY: Duration = Duration::from_secs(2);
/// How long a lane whose credentials cannot be opened (another key) waits before it is tried
/// again.
const UNOPENABLE_WAIT: Duration = Duration::from_secs(60);

/// Records by what became of them: `delivered`, `failed` (a batch given up after the retry
/// window), `dropped` (queued records of a webhook set inactive, or re-activated).
pub const ITEMS: &str = "devicecloud_webhook_items_total";
/// Webhooks the service set inactive, by `reason` (`retry_window`, `backlog`).
pub const DISABLED: &str = "devicecloud_webhooks_disabled_total";

/// The delay before retry number `failures` (1 after the first failed attempt): one second
/// doubling up to ten minutes, spread by ±20 % so that receivers coming back are not hit by
/// every sender at once.
pub fn backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(20);
    let base = BACKOFF_INITIAL.saturating_mul(1 << exp).min(BACKOFF_MAX);
    base.mul_f64(rand::rng().random_range(0.8..=1.2))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// What the worker is started with (by the composition root).
pub struct WorkerContext {
    /// The background writers' pool.
    pub db: Db,
    pub hub: Arc<WebhookHub>,
    /// Where the event of a webhook set inactive goes once committed.
    pub stream: Arc<LiveFeed>,
    /// The webhook settings (timeouts, batch size, retry window, backlog limit, lease).
    pub settings: Arc<Settings>,
    /// This node, which holds a lane before it works it.
    pub node_id: String,
}

/// What lanes share.
struct Context {
    db: Db,
    hub: Arc<WebhookHub>,
    /// Where the event of a webhook set inactive goes once committed.
    stream: Arc<LiveFeed>,
    settings: Arc<Settings>,
    client: reqwest::Client,
    shutdown: CancellationToken,
    /// This node, which holds a lane before it works it (several nodes share the store).
    node_id: String,
}

/// Starts the worker on `tracker`: lanes for the active webhooks, revised when webhooks change,
/// and the pruning of old attempts. Everything stops when `shutdown` is cancelled (a request in
/// flight is abandoned and its batch sent again after the restart: at least once).
pub fn spawn_worker(ctx: WorkerContext, tracker: &TaskTracker, shutdown: &CancellationToken) {
    let client = match transport::client(ctx.hub.resolver.clone(), ctx.settings.webhook_timeout) {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the webhook HTTP client; webhooks are not delivered");
            return;
        }
    };
    let context = Arc::new(Context {
        db: ctx.db,
        hub: ctx.hub,
        stream: ctx.stream,
        settings: ctx.settings,
        client,
        shutdown: shutdown.clone(),
        node_id: ctx.node_id,
    });
    let start = context.clone();
    tracker.spawn(async move {
        // Credentials an older version kept in clear text are sealed before the first lane.
        match super::vault::seal_stored(&start.db, &start.hub.vault).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(webhooks = n, "webhook credentials sealed with the secret key"),
            Err(e) => {
                tracing::warn!(error = %e, "cannot seal the stored webhook credentials; trying at the next start")
            }
        }
        supervise(start).await;
    });
    tracker.spawn(prune(context));
}

/// Keeps one lane per active webhook, restarting a lane whose webhook changed.
async fn supervise(context: Arc<Context>) {
    let mut lanes: HashMap<String, (WebhookRow, JoinHandle<()>)> = HashMap::new();
    loop {
        match webhooks::active(&context.db).await {
            Ok(rows) => {
                let mut keep: HashMap<String, WebhookRow> =
                    rows.into_iter().map(|r| (r.id_webhook.clone(), r)).collect();
                let ids: Vec<String> = lanes.keys().cloned().collect();
                for id in ids {
                    let unchanged = keep.get(&id).is_some_and(|row| lanes[&id].0 == *row);
                    if unchanged && !lanes[&id].1.is_finished() {
                        keep.remove(&id);
                        continue;
                    }
                    if let Some((_, handle)) = lanes.remove(&id) {
                        // The old lane ends before its successor starts: one lane per webhook.
                        handle.abort();
                        let _ = handle.await;
                    }
                }
                for (id, row) in keep {
                    let handle = tokio::spawn(lane(context.clone(), row.clone()));
                    lanes.insert(id, (row, handle));
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the webhooks"),
        }
        tokio::select! {
            _ = context.shutdown.cancelled() => break,
            _ = context.hub.changed.notified() => {}
            _ = tokio::time::sleep(REVISE_EVERY) => {}
        }
    }
    for (_, (_, handle)) in lanes {
        handle.abort();
        let _ = handle.await;
    }
}

/// What a lane does next.
enum Next {
    /// A batch went out (or was given up): look again at once.
    Again,
    /// Nothing queued: wait for records.
    Idle,
    /// The pending delivery is due at this time (Unix milliseconds).
    RetryAt(i64),
    /// The webhook was set inactive: the lane ends.
    Disabled,
}

/// The delivery loop of one webhook.
async fn lane(context: Arc<Context>, hook: WebhookRow) {
    let credentials = match Credentials::open(&context, &hook) {
        Ok(credentials) => credentials,
        Err(e) => {
            tracing::error!(error = %e, webhook = %hook.id_webhook, "webhook not delivered: check DEVICECLOUD_SECRET_KEY_FILE");
            // The supervisor starts the lane again once it has ended.
            tokio::select! {
                _ = context.shutdown.cancelled() => {}
                _ = tokio::time::sleep(UNOPENABLE_WAIT) => {}
            }
            return;
        }
    };
    let mut lane = Lane {
        context: &context,
        hook: &hook,
        credentials,
        backlog_checked: None,
        held_until: None,
        recording: None,
    };
    loop {
        // Registered before looking at the queue, so that a commit in between is not missed.
        let queued = context.hub.queued.notified();
        tokio::pin!(queued);
        queued.as_mut().enable();
        let wait = match lane.step().await {
            Ok(Next::Again) => continue,
            Ok(Next::Idle) => IDLE_POLL,
            Ok(Next::Disabled) => return,
            Ok(Next::RetryAt(at)) => {
                // Woken before it is due to keep counting the backlog.
                let wait = Duration::from_millis(u64::try_from(at - now_ms()).unwrap_or(0)).min(BACKLOG_CHECK_EVERY);
                tokio::select! {
                    _ = context.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, webhook = %hook.id_webhook, "webhook lane failed; trying again");
                Duration::from_secs(1)
            }
        };
        tokio::select! {
            _ = context.shutdown.cancelled() => return,
            _ = &mut queued => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// A webhook's signing secret and authorization, opened from the store once per lane (a lane
/// is started again when its webhook changes).
struct Credentials {
    secret: String,
    authorization: Option<String>,
}

impl Credentials {
    fn open(context: &Context, hook: &WebhookRow) -> Result<Credentials, super::vault::Unopenable> {
        let vault = &context.hub.vault;
        Ok(Credentials {
            secret: vault.open(super::vault::SECRET, &hook.secret)?,
            authorization: match &hook.authorization_header {
                Some(stored) => Some(vault.open(super::vault::AUTHORIZATION, stored)?),
                None => None,
            },
        })
    }
}

/// One webhook's lane.
struct Lane<'a> {
    context: &'a Context,
    hook: &'a WebhookRow,
    credentials: Credentials,
    /// When the backlog was last counted.
    backlog_checked: Option<Instant>,
    /// Until when this node holds the lane (its lease in the store), as far as it knows.
    held_until: Option<Instant>,
    /// The accepted delivery whose attempt is being logged (and the delivery removed) while the
    /// next one goes out.
    recording: Option<Recording>,
}

/// The logging of an accepted delivery, under way.
struct Recording {
    id_delivery: String,
    task: JoinHandle<Result<(), StoreError>>,
}

impl Lane<'_> {
    /// One step: send the pending delivery if due, or cut and send a new batch; with work at
    /// hand, count the backlog now and then.
    async fn step(&mut self) -> Result<Next, StoreError> {
        let (context, hook) = (self.context, self.hook);
        if !self.hold().await? {
            // Another node works this lane; look again once its lease could have run out.
            let lease = context.settings.node_lease;
            return Ok(Next::RetryAt(now_ms() + (lease / 3).as_millis() as i64));
        }
        if self.recording.as_ref().is_some_and(|r| r.task.is_finished()) {
            self.finish_recording().await;
        }
        let recorded = self.recording.as_ref().map(|r| r.id_delivery.clone());
        let pending = webhooks::pending_delivery(&context.db, &hook.id_webhook, recorded.as_deref()).await?;
        let delivery = match pending {
            Some(d) => Some(d),
            None => cut(context, hook, 0).await?,
        };
        let Some(delivery) = delivery else {
            return Ok(Next::Idle);
        };
        if self
            .backlog_checked
            .is_none_or(|at| at.elapsed() >= BACKLOG_CHECK_EVERY)
        {
            self.backlog_checked = Some(Instant::now());
            let max = context.settings.limits.webhook_backlog_max;
            if webhooks::backlog_items(&context.db, &hook.id_webhook, max).await? > max {
                self.finish_recording().await;
                disable(context, hook, REASON_BACKLOG).await?;
                return Ok(Next::Disabled);
            }
        }
        if delivery.next_attempt_ms > now_ms() {
            return Ok(Next::RetryAt(delivery.next_attempt_ms));
        }
        self.attempt(&delivery).await
    }

    /// Whether this node holds the lane, renewing its lease in the store once a third of it
    /// has passed (one write per lane every few seconds, not one per batch). With several nodes
    /// one node works a lane at a time, so every batch is posted by one node, in order; a lane
    /// whose node died is taken once its lease ran out.
    async fn hold(&mut self) -> Result<bool, StoreError> {
        let lease = self.context.settings.node_lease;
        if self
            .held_until
            .is_some_and(|until| until.saturating_duration_since(Instant::now()) > lease * 2 / 3)
        {
            return Ok(true);
        }
        // The local deadline is taken before the write, so it never outlasts the stored one.
        let until = Instant::now() + lease;
        let now = now_ms();
        let held = devicecloud_store::nodes::hold_lane(
            &self.context.db,
            &self.hook.id_webhook,
            &self.context.node_id,
            now,
            now + lease.as_millis() as i64,
        )
        .await?;
        self.held_until = held.then_some(until);
        Ok(held)
    }

    /// Posts a delivery once, logs the attempt and decides what becomes of the delivery, and of
    /// the webhook when the batch failed for the whole retry window.
    async fn attempt(&mut self, delivery: &DeliveryRow) -> Result<Next, StoreError> {
        let (context, hook) = (self.context, self.hook);
        let number = delivery.attempts + 1;
        let attempted_at = unix_now();
        let started = Instant::now();
        let request = transport::Request {
            url: &hook.url,
            delivery_id: &delivery.id_delivery,
            content_type: &delivery.content_type,
            body: &delivery.body,
            secret: &self.credentials.secret,
            authorization: self.credentials.authorization.as_deref(),
        };
        let sending = async {
            let result = transport::send(&context.client, &context.hub.resolver, &request).await;
            (result, started.elapsed().as_millis() as i64)
        };
        // A first attempt overlaps with cutting the next batch (stored pending, behind this one,
        // so the order holds whatever this attempt's outcome): the store's work and the
        // receiver's round trip no longer add up per batch. A retry cuts nothing ahead, so a
        // failing receiver leaves at most one batch cut in advance.
        // The log of the previous accepted delivery is written meanwhile too.
        let previous = self.recording.take();
        let (result, duration_ms) = if delivery.attempts == 0 {
            // Stamped after this one, so that it stays behind it in the lane's order even when
            // both are cut within one millisecond.
            let ((result, duration_ms), ahead, ()) =
                tokio::join!(sending, cut(context, hook, delivery.created_ms + 1), finish(previous));
            if let Err(e) = ahead {
                tracing::warn!(error = %e, webhook = %hook.id_webhook, "cutting the next webhook batch failed; trying again");
            }
            (result, duration_ms)
        } else {
            let ((result, duration_ms), ()) = tokio::join!(sending, finish(previous));
            (result, duration_ms)
        };
        let (status_code, error) = match result {
            Ok(status) => (Some(i64::from(status)), None),
            Err(Failure::Status(status)) => (Some(i64::from(status)), Some(Failure::Status(status).label())),
            Err(failure) => (None, Some(failure.label())),
        };
        let window_over = now_ms() - delivery.created_ms >= context.settings.webhook_retry_window.as_millis() as i64;
        let outcome = if error.is_none() {
            metrics::counter!(ITEMS, "outcome" => "delivered").increment(delivery.item_count as u64);
            Outcome::Delivered
        } else if window_over {
            tracing::warn!(webhook = %hook.id_webhook, delivery = %delivery.id_delivery, "webhook delivery failed for the whole retry window");
            metrics::counter!(ITEMS, "outcome" => "failed").increment(delivery.item_count as u64);
            Outcome::Failed
        } else {
            let failures = u32::try_from(number).unwrap_or(u32::MAX);
            Outcome::RetryAt(now_ms() + backoff(failures).as_millis() as i64)
        };
        metrics::histogram!("devicecloud_webhook_attempt_seconds").record(duration_ms as f64 / 1000.0);
        let logged = Attempt {
            attempted_at,
            status_code,
            duration_ms,
            error,
            attempt: number,
        };
        if outcome == Outcome::Delivered {
            // Logged while the next batch goes out: an accepted batch needs no decision, and
            // the next step leaves it out of the pending ones meanwhile. Should the process die
            // first, the batch is sent again after the restart (at least once).
            let db = context.db.clone();
            let accepted = DeliveryRow {
                id_delivery: delivery.id_delivery.clone(),
                id_webhook: delivery.id_webhook.clone(),
                body: Vec::new(),
                content_type: delivery.content_type.clone(),
                item_count: delivery.item_count,
                attempts: delivery.attempts,
                next_attempt_ms: delivery.next_attempt_ms,
                created_ms: delivery.created_ms,
            };
            let task = tokio::spawn(async move {
                let logged = Attempt {
                    attempted_at,
                    status_code,
                    duration_ms,
                    error: None,
                    attempt: number,
                };
                webhooks::record_attempt(&db, &accepted, &logged, Outcome::Delivered).await
            });
            self.recording = Some(Recording {
                id_delivery: delivery.id_delivery.clone(),
                task,
            });
            return Ok(Next::Again);
        }
        webhooks::record_attempt(&context.db, delivery, &logged, outcome).await?;
        if outcome == Outcome::Failed {
            disable(context, hook, REASON_RETRY_WINDOW).await?;
            return Ok(Next::Disabled);
        }
        Ok(Next::Again)
    }
}

impl Lane<'_> {
    /// Waits for the log of the last accepted delivery, if one is being written.
    async fn finish_recording(&mut self) {
        finish(self.recording.take()).await;
    }
}

/// Waits for a delivery's log being written; a failure is logged (the delivery then stays
/// pending and is sent again: at least once).
async fn finish(recording: Option<Recording>) {
    let Some(recording) = recording else { return };
    match recording.task.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, delivery = %recording.id_delivery, "logging an accepted webhook batch failed; it will be sent again")
        }
        Err(e) => {
            tracing::warn!(error = %e, delivery = %recording.id_delivery, "logging an accepted webhook batch stopped")
        }
    }
}

/// Sets the webhook inactive for `reason` (its queue dropped, event 214 recorded), counts it,
/// and has the lanes revised.
async fn disable(context: &Context, hook: &WebhookRow, reason: &'static str) -> Result<(), StoreError> {
    set_inactive(&context.db, &context.stream, &hook.id_webhook, reason).await?;
    context.hub.webhook_changed();
    Ok(())
}

/// Sets webhook `id_webhook` inactive for `reason` (`disabled_reason`; its queue dropped, event
/// 214 recorded and handed to the live stream) and counts it; whether it was active. The lanes
/// are revised by whoever calls it (this node's hub, or every node's through `peers`).
pub async fn set_inactive(
    db: &Db,
    stream: &LiveFeed,
    id_webhook: &str,
    reason: &'static str,
) -> Result<bool, StoreError> {
    let how = Deactivation {
        reason,
        event_type: event_types::WEBHOOK_DISABLED,
        now: unix_now(),
    };
    let Some(Deactivated { dropped, event }) = webhooks::deactivate(db, id_webhook, &how).await? else {
        return Ok(false);
    };
    stream.event_rows(vec![event]);
    tracing::warn!(webhook = %id_webhook, reason, dropped, "webhook set inactive");
    metrics::counter!(ITEMS, "outcome" => "dropped").increment(dropped);
    metrics::counter!(DISABLED, "reason" => reason).increment(1);
    Ok(true)
}

/// Renders the oldest queued records of the webhook into a delivery, stamped now but not before
/// `not_before_ms`: pending deliveries go out in the order of their stamps.
async fn cut(context: &Context, hook: &WebhookRow, not_before_ms: i64) -> Result<Option<DeliveryRow>, StoreError> {
    let limit = context.settings.webhook_batch_max as i64;
    let ((body, content_type), count, taken) = if hook.forwarding_type == "events" {
        let (events, taken) = webhooks::queued_events(&context.db, &hook.id_webhook, limit).await?;
        let records: Vec<serde_json::Value> = events.iter().map(format::event_record).collect();
        (format::body(hook, &records), records.len(), taken)
    } else {
        let (points, taken) = webhooks::queued_points(&context.db, &hook.id_webhook, limit).await?;
        let mut keys: Vec<i64> = points.iter().map(|p| p.container_key).collect();
        keys.sort_unstable();
        keys.dedup();
        // Points of a series that no longer exists are taken and left out.
        let found = series::of_keys(&context.db, &keys).await?;
        let by_key: HashMap<i64, &Series> = found.iter().map(|s| (s.container_key, s)).collect();
        let records: Vec<format::PointRecord<'_>> = points
            .iter()
            .filter_map(|p| Some(format::point_record(by_key.get(&p.container_key)?, p)))
            .collect();
        (format::body(hook, &records), records.len(), taken)
    };
    if taken.items == 0 {
        return Ok(None);
    }
    let count = count as i64;
    let stamp = now_ms().max(not_before_ms);
    webhooks::cut_delivery(&context.db, &hook.id_webhook, &taken, count, body, content_type, stamp).await
}

/// Removes attempts and failed deliveries older than the retention, hourly.
async fn prune(context: Arc<Context>) {
    let mut every = crate::periodic::Every::new(Duration::from_secs(3600), &context.shutdown);
    while every.tick().await {
        let before = unix_now() - context.settings.webhook_attempt_retention.as_secs() as i64;
        match webhooks::prune(&context.db, before).await {
            Ok(n) if n > 0 => tracing::info!(removed = n, "old webhook attempts pruned"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "webhook pruning failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_up_to_ten_minutes() {
        for _ in 0..50 {
            let first = backoff(1).as_secs_f64();
            assert!((0.8..=1.2).contains(&first), "{first}");
            let third = backoff(3).as_secs_f64();
            assert!((3.2..=4.8).contains(&third), "{third}");
            let late = backoff(40).as_secs_f64();
            assert!((480.0..=720.0).contains(&late), "{late}");
        }
    }
}
