//! The delivery worker: one lane per active webhook, so that a receiver that keeps failing
//! (and its backoff) never delays the others, while each lane keeps its webhook's order: a
//! batch goes out only once the one before it was accepted or given up.
//!
//! A lane takes the oldest pending delivery (a retry, or a batch cut before a restart) or else
//! cuts a new batch from the outbox (the records queued at that moment, up to the batch bound:
//! records arriving while a delivery is in flight make the next batch, so batches grow with
//! the load and latency stays one round trip), posts it, logs the attempt, and on failure waits
//! out the backoff (docs/api.md, "Deliveries").

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use devicecloud_store::webhooks::{self, Attempt, DeliveryRow, Outcome, WebhookRow};
use devicecloud_store::{Db, StoreError, unix_now};
use rand::Rng;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, USER_AGENT};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{WebhookHub, address, format, signature};
use crate::state::{AppState, Settings};

/// First retry delay, doubled per failure up to [`BACKOFF_MAX`] (docs/api.md, "Deliveries").
const BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// Longest retry delay (docs/api.md, "Deliveries").
const BACKOFF_MAX: Duration = Duration::from_secs(600);
/// How often an idle lane looks at its queue unprompted: events are queued by other writers
/// than the ingest queue, and other nodes may queue records too.
const IDLE_POLL: Duration = Duration::from_millis(500);
/// How often the lanes are compared with the stored webhooks without a local change.
const REVISE_EVERY: Duration = Duration::from_secs(5);

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

/// What lanes share.
struct Context {
    db: Db,
    hub: Arc<WebhookHub>,
    settings: Arc<Settings>,
    client: reqwest::Client,
    shutdown: CancellationToken,
}

/// Starts the worker on `tracker`: lanes for the active webhooks, revised when webhooks change,
/// and the pruning of old attempts. Everything stops when `shutdown` is cancelled (a request in
/// flight is abandoned and its batch sent again after the restart: at least once).
pub fn spawn_worker(state: &AppState, tracker: &TaskTracker, shutdown: &CancellationToken) {
    let client = match reqwest::Client::builder()
        .timeout(state.settings.webhook_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the webhook HTTP client; webhooks are not delivered");
            return;
        }
    };
    let context = Arc::new(Context {
        db: state.writer.clone(),
        hub: state.webhooks.clone(),
        settings: state.settings.clone(),
        client,
        shutdown: shutdown.clone(),
    });
    tracker.spawn(supervise(context.clone()));
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
}

/// The delivery loop of one webhook.
async fn lane(context: Arc<Context>, hook: WebhookRow) {
    loop {
        // Registered before looking at the queue, so that a commit in between is not missed.
        let queued = context.hub.queued.notified();
        tokio::pin!(queued);
        queued.as_mut().enable();
        let wait = match step(&context, &hook).await {
            Ok(Next::Again) => continue,
            Ok(Next::Idle) => IDLE_POLL,
            Ok(Next::RetryAt(at)) => {
                let wait = Duration::from_millis(u64::try_from(at - now_ms()).unwrap_or(0));
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

/// One step of a lane: send the pending delivery if due, or cut and send a new batch.
async fn step(context: &Context, hook: &WebhookRow) -> Result<Next, StoreError> {
    let delivery = match webhooks::pending_delivery(&context.db, &hook.id_webhook).await? {
        Some(d) if d.next_attempt_ms > now_ms() => return Ok(Next::RetryAt(d.next_attempt_ms)),
        Some(d) => d,
        None => match cut(context, hook).await? {
            Some(d) => d,
            None => return Ok(Next::Idle),
        },
    };
    attempt(context, hook, &delivery).await?;
    Ok(Next::Again)
}

/// Renders the oldest queued records of the webhook into a delivery.
async fn cut(context: &Context, hook: &WebhookRow) -> Result<Option<DeliveryRow>, StoreError> {
    let limit = context.settings.webhook_batch_max as i64;
    let (ids, records): (Vec<i64>, Vec<serde_json::Value>) = if hook.forwarding_type == "events" {
        webhooks::queued_events(&context.db, &hook.id_webhook, limit)
            .await?
            .iter()
            .map(|e| (e.id_outbox, format::event_record(e)))
            .unzip()
    } else {
        webhooks::queued_points(&context.db, &hook.id_webhook, limit)
            .await?
            .iter()
            .map(|p| (p.id_outbox, format::point_record(p)))
            .unzip()
    };
    if ids.is_empty() {
        return Ok(None);
    }
    let (body, content_type) = format::body(hook, &records);
    let delivery = webhooks::cut_delivery(&context.db, &hook.id_webhook, &ids, body, content_type, now_ms()).await?;
    Ok(Some(delivery))
}

/// Posts a delivery once, logs the attempt and decides what becomes of the delivery.
async fn attempt(context: &Context, hook: &WebhookRow, delivery: &DeliveryRow) -> Result<(), StoreError> {
    let number = delivery.attempts + 1;
    let attempted_at = unix_now();
    let started = Instant::now();
    let result = post(context, hook, delivery).await;
    let duration_ms = started.elapsed().as_millis() as i64;
    let (status_code, error) = match &result {
        Ok(status) if (200..300).contains(status) => (Some(i64::from(*status)), None),
        Ok(status) => (Some(i64::from(*status)), Some(format!("answered {status}"))),
        Err(e) => (None, Some(e.clone())),
    };
    let outcome = if error.is_none() {
        metrics::counter!("devicecloud_webhook_items_total", "outcome" => "delivered")
            .increment(delivery.item_count as u64);
        Outcome::Delivered
    } else if now_ms() - delivery.created_ms >= context.settings.webhook_retry_window.as_millis() as i64 {
        tracing::warn!(webhook = %hook.id_webhook, delivery = %delivery.id_delivery, "webhook delivery failed for the whole retry window");
        metrics::counter!("devicecloud_webhook_items_total", "outcome" => "failed")
            .increment(delivery.item_count as u64);
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
        error: error.as_deref(),
        attempt: number,
    };
    webhooks::record_attempt(&context.db, delivery, &logged, outcome).await
}

/// Sends the delivery; the receiver's status, or why there was none.
async fn post(context: &Context, hook: &WebhookRow, delivery: &DeliveryRow) -> Result<u16, String> {
    let url = address::parse(&hook.url).map_err(|e| e.to_string())?;
    if !context.settings.webhook_allow_private {
        // Checked again at every delivery: a name may resolve elsewhere than at creation.
        address::check_public(&url).await.map_err(|e| e.to_string())?;
    }
    let content_type = HeaderValue::from_str(&delivery.content_type).map_err(|e| e.to_string())?;
    let mut request = context
        .client
        .post(url)
        .header(CONTENT_TYPE, content_type)
        .header(USER_AGENT, "devicecloud-webhook")
        .header("X-Devicecloud-Delivery", &delivery.id_delivery)
        .header("X-Devicecloud-Signature", signature::sign(&hook.secret, &delivery.body))
        .body(delivery.body.clone());
    if let Some(authorization) = &hook.authorization_header {
        let value =
            HeaderValue::from_str(authorization).map_err(|_| "authorization is not a valid header".to_string())?;
        request = request.header(AUTHORIZATION, value);
    }
    let response = request.send().await.map_err(describe)?;
    Ok(response.status().as_u16())
}

/// A short reason for a failed request, for the attempt log.
fn describe(error: reqwest::Error) -> String {
    if error.is_timeout() {
        "timed out".into()
    } else if error.is_connect() {
        "connection failed".into()
    } else {
        let mut text = error.to_string();
        text.truncate(500);
        text
    }
}

/// Removes attempts and failed deliveries older than the retention, hourly.
async fn prune(context: Arc<Context>) {
    let mut tick = tokio::time::interval(Duration::from_secs(3600));
    loop {
        tokio::select! {
            _ = context.shutdown.cancelled() => break,
            _ = tick.tick() => {
                let before = unix_now() - context.settings.webhook_attempt_retention.as_secs() as i64;
                match webhooks::prune(&context.db, before).await {
                    Ok(n) if n > 0 => tracing::info!(removed = n, "old webhook attempts pruned"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "webhook pruning failed"),
                }
            }
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
