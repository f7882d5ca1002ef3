//! Alarm rules evaluated on the commit path (docs/api.md, "Alarms"; docs/ARCHITECTURE.md,
//! "Alarms"). The ingest writers hand every commit's new points here, in commit order; one task
//! evaluates them against the active rules with the state each series needs kept in memory
//! (`engine`), and one task writes what changed — alarms raised, counted, cleared, with their
//! events — and hands the records to the live stream (`writer`).
//!
//! On several nodes each point is evaluated by the node that committed it; the store keeps at
//! most one open alarm per (rule, device, datatype), so two nodes never make two. A rule changed
//! through any node is read again by every node within a second (a counter in the store).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use devicecloud_store::Db;
use devicecloud_store::alarms::AlarmRow;
use devicecloud_store::ingest::Point;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::stream::LiveFeed;
use crate::webhooks::WebhookHub;

pub mod condition;
mod engine;
pub mod evaluate;
mod native;
pub mod rules;
pub mod silences;
mod writer;

/// Commits waiting for the evaluator before the ingest writers wait for it (each point is
/// evaluated once: none is skipped when it falls behind).
const QUEUE_COMMITS: usize = 256;

/// What the alarm engine uses.
pub struct Context {
    /// The pool its writes and loads go through (the background writers').
    pub db: Db,
    /// The routes of the events it records.
    pub webhooks: Arc<WebhookHub>,
    pub stream: Arc<LiveFeed>,
}

/// The handle of the alarm engine: where the ingest writers hand committed points, and where a
/// change of the rules or a gateway's new connection is told.
#[derive(Clone, Debug)]
pub struct Alarms {
    inputs: mpsc::Sender<engine::Input>,
    /// Whether any rule is active: without one, points are not handed over at all.
    watching: Arc<AtomicBool>,
    /// Asks for the rules to be read again; answered once they are.
    changed: mpsc::UnboundedSender<oneshot::Sender<()>>,
}

impl Alarms {
    /// Starts the engine's tasks on `tracker`.
    pub fn start(ctx: Context, tracker: &TaskTracker, shutdown: CancellationToken) -> Alarms {
        let (inputs, inputs_rx) = mpsc::channel(QUEUE_COMMITS);
        let watching = Arc::new(AtomicBool::new(false));
        let (changed, changed_rx) = mpsc::unbounded_channel();
        let (writes, writes_rx) = mpsc::unbounded_channel();
        let ctx = Arc::new(ctx);
        tracker.spawn(writer::run(Arc::clone(&ctx), writes_rx));
        tracker.spawn(engine::run(engine::Inputs {
            ctx,
            inputs: inputs_rx,
            watching: Arc::clone(&watching),
            changed: changed_rx,
            writes,
            shutdown,
        }));
        Alarms {
            inputs,
            watching,
            changed,
        }
    }

    /// Whether committed points are wanted (some rule is active).
    pub fn watching(&self) -> bool {
        self.watching.load(Ordering::Relaxed)
    }

    /// Hands over the new points of a commit, in the order committed; waits while the evaluator
    /// is [`QUEUE_COMMITS`] commits behind.
    pub async fn points(&self, fresh: Vec<Point>) {
        if !fresh.is_empty() && self.inputs.send(engine::Input::Points(fresh)).await.is_err() {
            tracing::warn!("the alarm engine has stopped: committed points not evaluated");
        }
    }

    /// A gateway connected here: what this node kept of its series may be older than what
    /// another node committed since, so it is read again from the store at its next point (told
    /// in the queue of the points, so before the points of this connection).
    pub async fn connected(&self, gateway: &str) {
        if self.watching() {
            let _ = self.inputs.send(engine::Input::Connected(gateway.to_string())).await;
        }
    }

    /// The rules changed through this node: they are read again now, and the points committed
    /// after this returns are evaluated against them (other nodes read them within a second).
    pub async fn rules_changed(&self) {
        let (done, read) = oneshot::channel();
        if self.changed.send(done).is_ok() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), read).await;
        }
    }
}

/// The alarm record (docs/api.md, "Alarms"), in its order.
pub fn record(row: &AlarmRow) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("id_alarm".into(), json!(row.id_alarm));
    map.insert("id_alarm_rule".into(), json!(row.id_alarm_rule));
    map.insert("id_group".into(), json!(row.id_group));
    map.insert("source_device".into(), json!(row.source_device));
    map.insert("datatype".into(), json!(row.datatype));
    map.insert("severity".into(), json!(row.severity));
    map.insert("status".into(), json!(row.status));
    map.insert("raised_at".into(), json!(row.raised_at));
    map.insert("acknowledged_at".into(), json!(row.acknowledged_at));
    map.insert("acknowledged_by".into(), json!(row.acknowledged_by));
    map.insert("cleared_at".into(), json!(row.cleared_at));
    map.insert("value".into(), json!(row.value));
    map.insert("count".into(), json!(row.count));
    map
}
