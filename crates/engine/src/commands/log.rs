//! Every command sent through the API is recorded as a cloud event (docs/gateway-protocol.md,
//! "Event codes the cloud records"): type 213, value the method, description the outcome, the
//! caller and the request id. Recorded off the request path by one writer that inserts what queued
//! up in one transaction, so that commands cost no store write of their own. Once committed,
//! the events and the outcomes go to the live stream.

use std::sync::Arc;

use devicecloud_store::Db;
use devicecloud_store::events::{self, NewEvent};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::event_types;
use crate::stream::{CommandOutcome, LiveFeed};

/// Records queued before callers wait for the writer.
const QUEUE: usize = 4096;
/// Largest batch of one transaction.
const BATCH: usize = 512;

/// One command and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandRecord {
    pub id_group: String,
    /// The device the command was addressed to (a gateway or an asset behind it).
    pub source_device: String,
    /// The wire name of the method.
    pub method: &'static str,
    /// The account that sent it.
    pub caller: String,
    pub request_id: String,
    /// The device's status (`200`, `501`, …) or `offline`, `timeout`, `disconnected`,
    /// `invalid response`, `not supported`.
    pub outcome: String,
    /// The HTTP status the caller was answered with (`200`, `404`, `504`, …).
    pub http_status: u16,
    pub occurred_at: i64,
    /// From sending the command to its outcome.
    pub duration_ms: u64,
}

impl CommandRecord {
    /// The event description: `<outcome>; caller <id_user>; request <request_id>`.
    pub fn description(&self) -> String {
        format!("{}; caller {}; request {}", self.outcome, self.caller, self.request_id)
    }

    /// The outcome as the live stream shows it: the HTTP status the caller got, the device's
    /// own status when it answered one, and the reason as text when it did not.
    pub fn stream_outcome(&self) -> CommandOutcome {
        let device_status = self.outcome.parse::<i64>().ok();
        CommandOutcome {
            id_group: self.id_group.clone(),
            id_physical_device: self.source_device.clone(),
            method: self.method,
            status: self.http_status,
            device_status,
            reason: device_status.is_none().then(|| self.outcome.clone()),
            duration_ms: self.duration_ms,
            requested_at: self.occurred_at,
        }
    }
}

/// The submitting side of the command event writer.
#[derive(Clone, Debug)]
pub struct CommandLog {
    queue: mpsc::Sender<CommandRecord>,
}

impl CommandLog {
    /// Starts the writer on `tracker`; at `shutdown` it writes what is queued and stops.
    pub fn start(db: Db, stream: Arc<LiveFeed>, tracker: &TaskTracker, shutdown: CancellationToken) -> CommandLog {
        let (queue, mut records) = mpsc::channel(QUEUE);
        tracker.spawn(async move {
            let mut batch = Vec::with_capacity(BATCH);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    n = records.recv_many(&mut batch, BATCH) => {
                        if n == 0 {
                            return;
                        }
                        write(&db, &stream, &mut batch).await;
                    }
                }
            }
            while let Ok(record) = records.try_recv() {
                batch.push(record);
            }
            write(&db, &stream, &mut batch).await;
        });
        CommandLog { queue }
    }

    /// Queues a record; waits only when the writer is far behind.
    pub async fn record(&self, record: CommandRecord) {
        if self.queue.send(record).await.is_err() {
            tracing::warn!("command event dropped: the service is stopping");
        }
    }
}

async fn write(db: &Db, stream: &LiveFeed, batch: &mut Vec<CommandRecord>) {
    if batch.is_empty() {
        return;
    }
    let descriptions: Vec<String> = batch.iter().map(CommandRecord::description).collect();
    let rows: Vec<NewEvent> = batch
        .iter()
        .zip(&descriptions)
        .map(|(r, description)| NewEvent {
            id_group: &r.id_group,
            source_device: &r.source_device,
            from_device: Some(0),
            event_type: event_types::COMMAND,
            occurred_at: r.occurred_at,
            value: r.method,
            datatype: None,
            value_description: Some(description),
        })
        .collect();
    match events::insert(db, &rows, devicecloud_store::unix_now()).await {
        Ok(ids) => {
            stream.events(&rows, &ids);
            stream.commands(batch.iter().map(CommandRecord::stream_outcome).collect());
        }
        Err(e) => tracing::warn!(error = %e, count = rows.len(), "cannot record command events"),
    }
    batch.clear();
}
