//! Rejection events (212) coalesced per (gateway, reason) (docs/gateway-protocol.md, "Event
//! codes the cloud records"): a gateway that sends thousands of bad messages must not write
//! thousands of event rows (and webhook items). The first rejection of a minute is recorded at
//! once; the others of that minute are counted and recorded as one event when the minute ends,
//! carrying the count (and when the service stops, at once). Each node counts its own gateways, in memory: at most one window per
//! (connected gateway, reason), so the map is bounded by the connections.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use devicecloud_protocol::RejectReason;
use tokio_util::sync::CancellationToken;

use super::{Context, record_rejections};
use crate::periodic::Every;

/// How long one event stands for the rejections after it.
pub const WINDOW: Duration = Duration::from_secs(60);

/// A rejection event to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub id_group: String,
    /// The gateway's device id.
    pub gateway: String,
    /// The topic of the last rejected message.
    pub topic: String,
    /// The rejection's text, with the count in front when the event stands for more than one.
    pub description: String,
}

#[derive(Debug)]
struct Window {
    opened: Instant,
    /// Rejections since the window opened that no event carries yet.
    count: u64,
    /// The last of them.
    last: Record,
}

/// The open windows, by (gateway id, reason).
#[derive(Debug, Default)]
pub struct RejectionLog {
    windows: Mutex<HashMap<(String, RejectReason), Window>>,
}

impl RejectionLog {
    /// Notes one rejection; the record to write now when it is the first of its window (or the
    /// window had ended without [`Self::due`] collecting it yet).
    pub fn note(&self, reason: RejectReason, record: Record, now: Instant) -> Option<Record> {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let key = (record.gateway.clone(), reason);
        match windows.get_mut(&key) {
            Some(window) if now.duration_since(window.opened) < WINDOW => {
                window.count += 1;
                window.last = record;
                None
            }
            Some(window) => {
                let count = window.count + 1;
                *window = Window {
                    opened: now,
                    count: 0,
                    last: record.clone(),
                };
                Some(counted(record, count))
            }
            None => {
                windows.insert(
                    key,
                    Window {
                        opened: now,
                        count: 0,
                        last: record.clone(),
                    },
                );
                Some(record)
            }
        }
    }

    /// The records of the windows that ended by `now`: one per window that counted rejections
    /// (which opens a new window), none for a quiet window (which is forgotten).
    pub fn due(&self, now: Instant) -> Vec<Record> {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let mut records = Vec::new();
        windows.retain(|_, window| {
            if now.duration_since(window.opened) < WINDOW {
                return true;
            }
            if window.count == 0 {
                return false;
            }
            records.push(counted(window.last.clone(), window.count));
            window.opened = now;
            window.count = 0;
            true
        });
        records
    }
}

/// `record` standing for `count` rejections.
fn counted(mut record: Record, count: u64) -> Record {
    if count > 1 {
        record.description = format!(
            "{count} messages refused in the last minute; the last: {}",
            record.description
        );
    }
    record
}

/// Records, every 5 s, the windows whose minute ended; when the service stops, what the open
/// windows counted is recorded at once.
pub async fn flush(ctx: Arc<Context>, shutdown: CancellationToken) {
    let mut every = Every::new(Duration::from_secs(5), &shutdown);
    while every.tick().await {
        let due = ctx.rejections.due(Instant::now());
        if !due.is_empty() {
            record_rejections(&ctx, &due).await;
        }
    }
    let all = ctx.rejections.due(Instant::now() + WINDOW);
    record_rejections(&ctx, &all).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(gateway: &str, description: &str) -> Record {
        Record {
            id_group: "g".into(),
            gateway: gateway.into(),
            topic: "v1/gateway/measurements".into(),
            description: description.into(),
        }
    }

    #[test]
    fn one_event_at_once_then_one_per_minute_with_the_count() {
        let log = RejectionLog::default();
        let t0 = Instant::now();
        let first = log.note(RejectReason::BadValue, record("a", "x1"), t0);
        assert_eq!(first.map(|r| r.description).as_deref(), Some("x1"));
        for i in 2..=5 {
            let later = t0 + Duration::from_secs(i);
            assert!(
                log.note(RejectReason::BadValue, record("a", &format!("x{i}")), later)
                    .is_none()
            );
        }
        // Another reason and another gateway have windows of their own.
        assert!(
            log.note(RejectReason::NotJson, record("a", "y"), t0 + Duration::from_secs(3))
                .is_some()
        );
        assert!(
            log.note(RejectReason::BadValue, record("b", "z"), t0 + Duration::from_secs(3))
                .is_some()
        );
        assert!(log.due(t0 + Duration::from_secs(59)).is_empty());
        let due = log.due(t0 + WINDOW);
        assert_eq!(due.len(), 1, "only the window that counted rejections: {due:?}");
        assert_eq!(
            due[0].description,
            "4 messages refused in the last minute; the last: x5"
        );
        // The quiet windows are forgotten, the counting one reopened and quiet for a minute.
        let end = t0 + WINDOW * 2 + Duration::from_secs(3);
        assert!(log.due(end).is_empty());
        assert!(log.windows.lock().unwrap().is_empty());
    }

    #[test]
    fn a_window_not_yet_collected_is_carried_by_the_next_rejection() {
        let log = RejectionLog::default();
        let t0 = Instant::now();
        log.note(RejectReason::BadField, record("a", "1"), t0);
        log.note(RejectReason::BadField, record("a", "2"), t0 + Duration::from_secs(1));
        let late = log.note(
            RejectReason::BadField,
            record("a", "3"),
            t0 + WINDOW + Duration::from_secs(5),
        );
        assert_eq!(
            late.map(|r| r.description).as_deref(),
            Some("2 messages refused in the last minute; the last: 3")
        );
    }
}
