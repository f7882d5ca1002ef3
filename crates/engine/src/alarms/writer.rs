//! The alarm engine's writes: the changes of one evaluation in one transaction, in the order they
//! were made, then their records on the live stream (SSE `alarm`, and the events 230 and 232).
//! Apart from the evaluator, so that a write waiting for the store does not hold evaluation up.

use std::sync::Arc;
use std::time::Duration;

use devicecloud_store::alarms::{self, Change};
use tokio::sync::mpsc;

use super::Context;

/// Tries of one write before its changes are given up (logged).
const TRIES: u32 = 5;

pub(super) async fn run(ctx: Arc<Context>, mut writes: mpsc::UnboundedReceiver<Vec<Change>>) {
    // The queue closes once the evaluator stopped: what it made before is still written.
    while let Some(mut changes) = writes.recv().await {
        while let Ok(more) = writes.try_recv() {
            changes.extend(more);
        }
        write(&ctx, &changes).await;
    }
}

async fn write(ctx: &Context, changes: &[Change]) {
    let mut wait = Duration::from_millis(50);
    for attempt in 1..=TRIES {
        let now = devicecloud_store::unix_now();
        match alarms::apply(&ctx.db, &ctx.webhooks.routes, changes, now).await {
            Ok(applied) => {
                metrics::counter!("devicecloud_alarm_changes_total").increment(changes.len() as u64);
                if !applied.events.is_empty() {
                    ctx.webhooks.queued.notify_waiters();
                }
                for alarm in &applied.alarms {
                    ctx.stream
                        .alarm(&alarm.id_group, &alarm.source_device, || super::record(alarm));
                }
                ctx.stream.event_rows(applied.events);
                return;
            }
            Err(e) if attempt < TRIES => {
                tracing::warn!(error = %e, attempt, "alarm changes not written; trying again");
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            Err(e) => {
                metrics::counter!("devicecloud_alarm_changes_lost_total").increment(changes.len() as u64);
                tracing::error!(error = %e, changes = changes.len(), "alarm changes given up");
            }
        }
    }
}
