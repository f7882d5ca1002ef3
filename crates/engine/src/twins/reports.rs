//! Gateways' twin reports, written in groups (docs/gateway-protocol.md, "Twin"). A report is
//! queued and its gateway acknowledged once the transaction holding it commits, like
//! measurements (the ingest queues). One writer takes what has queued while its last
//! transaction committed — every device at most once a batch, a device's later report waits for
//! the next, so a device's reports are merged in the order it sent them — and writes it all in
//! one transaction ([`twins::write_reported_many`]). A twin job over a whole fleet makes every
//! gateway report within seconds: one transaction each would queue thousands of writers for the
//! store's write lock ahead of ingest (docs/benchmarks.md, "Jobs and twins").

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use devicecloud_protocol::twin::{self, Reported};
use devicecloud_store::Db;
use devicecloud_store::twins::{self, ReportedWrite, TwinRow};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{TwinError, record};
use crate::event_types;
use crate::stream::LiveFeed;
use crate::webhooks::WebhookHub;

/// Reports the queue holds before gateways wait (which stops them reading their sockets).
const QUEUE_REPORTS: usize = 4096;
/// Reports one transaction writes at most: long enough to take a fleet's reports in a few
/// transactions, short enough that ingest never waits long for the write lock.
const BATCH_REPORTS: usize = 1000;

/// How long the writer waits for more reports once it has one (a report's acknowledgement waits
/// that much longer when the fleet is quiet).
const LINGER: std::time::Duration = std::time::Duration::from_millis(20);

/// One gateway's report, answered after the commit that holds it.
struct Queued {
    device: String,
    report: Reported,
    done: oneshot::Sender<Result<(), TwinError>>,
}

/// The submitting side of the report queue; cheap to clone.
#[derive(Clone, Debug)]
pub struct ReportQueue {
    queue: mpsc::Sender<Queued>,
}

/// What the writer needs besides its queue.
struct Writer {
    db: Db,
    webhooks: Arc<WebhookHub>,
    stream: Arc<LiveFeed>,
}

impl ReportQueue {
    /// Starts the writer on `tracker`. On shutdown it stops taking reports once its queue is
    /// empty, so every report accepted before is written and answered.
    pub fn start(
        db: Db,
        webhooks: Arc<WebhookHub>,
        stream: Arc<LiveFeed>,
        tracker: &TaskTracker,
        shutdown: CancellationToken,
    ) -> ReportQueue {
        let (queue, rx) = mpsc::channel(QUEUE_REPORTS);
        let writer = Writer { db, webhooks, stream };
        tracker.spawn(writer.run(rx, shutdown));
        ReportQueue { queue }
    }

    /// Merges `report` into the reported document of `device` (event 216), and ends the twin job
    /// executions waiting for the version it applied; returns once that is committed.
    pub async fn submit(&self, device: String, report: Reported) -> Result<(), TwinError> {
        let (done, answer) = oneshot::channel();
        let queued = Queued { device, report, done };
        if self.queue.send(queued).await.is_err() {
            return Err(TwinError::Failed("the service is stopping".into()));
        }
        answer
            .await
            .unwrap_or_else(|_| Err(TwinError::Failed("the report writer stopped".into())))
    }
}

impl Writer {
    async fn run(self, mut rx: mpsc::Receiver<Queued>, shutdown: CancellationToken) {
        let mut waiting: VecDeque<Queued> = VecDeque::new();
        loop {
            if waiting.is_empty() {
                let first = tokio::select! {
                    biased;
                    next = rx.recv() => next,
                    () = shutdown.cancelled() => {
                        rx.close();
                        rx.recv().await
                    }
                };
                match first {
                    Some(first) => waiting.push_back(first),
                    None => return,
                }
            }
            // Reports come in waves (a twin job, a fleet reconnecting): a few milliseconds of
            // waiting make a wave a few large transactions instead of many small ones, each of
            // which would cut the ingest writer's group commit short.
            let deadline = tokio::time::Instant::now() + LINGER;
            while waiting.len() < BATCH_REPORTS {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(next)) => waiting.push_back(next),
                    Ok(None) | Err(_) => break,
                }
            }
            let batch = take_batch(&mut waiting);
            self.write(batch).await;
        }
    }

    /// Writes one batch and answers each of its gateways.
    async fn write(&self, batch: Vec<Queued>) {
        let ids: Vec<&str> = batch.iter().map(|q| q.device.as_str()).collect();
        let mut refused: Vec<Option<String>> = vec![None; batch.len()];
        let now = devicecloud_store::unix_now();
        let at: HashMap<&str, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let compute = |row: &TwinRow| {
            let at = *at.get(row.id_physical_device.as_str())?;
            match merged(row, &batch[at].report) {
                Ok(write) => Some(write),
                Err(why) => {
                    refused[at] = Some(why);
                    None
                }
            }
        };
        let outcome = twins::write_reported_many(
            &self.db,
            &self.webhooks.routes,
            &ids,
            event_types::CONFIGURATION_REPORTED,
            now,
            compute,
        )
        .await;
        let written = match outcome {
            Ok(written) => written,
            Err(e) => {
                tracing::warn!(reports = batch.len(), error = %e, "cannot write a batch of twin reports");
                let why = e.to_string();
                let mut first = Some(TwinError::Store(e));
                for queued in batch {
                    let error = first.take().unwrap_or_else(|| TwinError::Failed(why.clone()));
                    let _ = queued.done.send(Err(error));
                }
                return;
            }
        };
        let mut events = Vec::new();
        for ((queued, written), refused) in batch.into_iter().zip(written).zip(refused) {
            let answer = match (written, refused) {
                (Some(outcome), _) => {
                    let twin = &outcome.twin;
                    self.stream
                        .twin(&twin.id_group, &twin.id_physical_device, || record(twin));
                    events.push(outcome.event);
                    Ok(())
                }
                (None, Some(why)) => Err(TwinError::Invalid(why)),
                (None, None) => Err(TwinError::NotFound),
            };
            let _ = queued.done.send(answer);
        }
        self.stream.event_rows(events);
    }
}

/// The next batch: the oldest waiting reports, each device once; a device's later reports stay
/// waiting, in order, for a later batch.
fn take_batch(waiting: &mut VecDeque<Queued>) -> Vec<Queued> {
    let mut batch = Vec::new();
    let mut devices = HashSet::new();
    let mut later = VecDeque::new();
    while batch.len() < BATCH_REPORTS
        && let Some(queued) = waiting.pop_front()
    {
        if devices.insert(queued.device.clone()) {
            batch.push(queued);
        } else {
            later.push_back(queued);
        }
    }
    later.append(waiting);
    *waiting = later;
    batch
}

/// The reported document of `row` with `report` merged in, or why that would break the limits.
fn merged(row: &TwinRow, report: &Reported) -> Result<ReportedWrite, String> {
    let mut reported = Value::Object(twin::document(&row.reported));
    twin::merge_patch(&mut reported, &report.reported);
    if let Some(why) = twin::document_error(&reported) {
        return Err(why);
    }
    let desired = twin::document(&row.desired);
    let in_sync = reported
        .as_object()
        .is_some_and(|r| twin::delta(&desired, r).is_empty());
    Ok(ReportedWrite {
        document: reported.to_string(),
        version: report.version,
        in_sync,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(device: &str) -> Queued {
        let (done, _) = oneshot::channel();
        Queued {
            device: device.into(),
            report: Reported {
                device: None,
                version: None,
                reported: Value::Object(Default::default()),
            },
            done,
        }
    }

    #[test]
    fn a_batch_takes_each_device_once_and_keeps_the_rest_in_order() {
        let mut waiting: VecDeque<Queued> = ["a", "b", "a", "c", "a"].into_iter().map(queued).collect();
        let batch = take_batch(&mut waiting);
        let names = |q: &[Queued]| q.iter().map(|q| q.device.clone()).collect::<Vec<_>>();
        assert_eq!(names(&batch), ["a", "b", "c"]);
        assert_eq!(names(waiting.make_contiguous()), ["a", "a"]);
        let batch = take_batch(&mut waiting);
        assert_eq!(names(&batch), ["a"]);
        assert_eq!(waiting.len(), 1);
    }
}
