//! The live stream across several nodes sharing one PostgreSQL database, through the
//! database's own LISTEN/NOTIFY (`store::notify`): no broker beside it.
//!
//! - **Who wants records.** A node whose stream records (a client listens, or left within the
//!   retention) says so on [`INTEREST_CHANNEL`] every [`ANNOUNCE_EVERY`], and at once when its
//!   first client comes. A node that hears it forwards what it commits for [`INTEREST_TTL`]
//!   after; so nodes that nobody listens to send nothing, and ingest costs what it costs on one
//!   node.
//! - **Forwarding.** After its commit, what a node commits is sent on [`STREAM_CHANNEL`]:
//!   points as their series key, time and value (each node renders them from the shared
//!   series), events and command outcomes as rendered. PostgreSQL delivers notifications in
//!   the order they were sent, once, to every node listening; each node puts another's records
//!   into its buffer in the order they arrive, after its own committed before.
//! - **Nothing lost silently.** Each payload of a node carries its number; a number skipped
//!   (a payload dropped because the sender fell behind, or that failed to send) and a listening
//!   connection lost (notifications sent meanwhile are gone) put a gap in the receiving node's
//!   buffer, which its clients meet as `overflow`. A node that lost its listening connection
//!   forwards meanwhile, as it cannot know who stopped recording.
//!
//! Ids stay each node's own: a client resuming through another node gets `overflow`, then goes
//! on from there (docs/api.md, "Live stream").

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use devicecloud_store::Db;
use devicecloud_store::ingest::Point;
use devicecloud_store::notify::{self, Heard, MAX_PAYLOAD};
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::ring::Kind;
use super::{Item, LiveFeed, Rendered};

/// The channels the live stream hears.
pub const CHANNELS: [&str; 2] = [STREAM_CHANNEL, INTEREST_CHANNEL];
/// Where nodes forward what they commit.
const STREAM_CHANNEL: &str = "devicecloud_stream";
/// Where a node that records says so (the payload: its id).
const INTEREST_CHANNEL: &str = "devicecloud_stream_interest";
/// How often a recording node says so.
const ANNOUNCE_EVERY: Duration = Duration::from_secs(1);
/// How long a node forwards after it last heard that another one records.
const INTEREST_TTL: Duration = Duration::from_secs(3);
/// Batches of payloads the sending task may be behind by before further ones are dropped.
const SEND_BACKLOG: usize = 1024;
/// Payloads sent in one statement at most.
const SEND_BATCH: usize = 64;
/// Room kept in a payload for its envelope (`{"node":…,"n":…,"t":…,…:[` and `]}`).
const ENVELOPE: usize = 96;

/// What this node commits, cut into payloads for the other nodes; held by the feed task.
pub(super) struct Forward {
    node: String,
    /// The number of the next payload.
    next: u64,
    queue: mpsc::Sender<Vec<String>>,
}

impl Forward {
    pub(super) fn points(&mut self, points: &[Point]) {
        let items = points.iter().map(|p| {
            let value = serde_json::to_string(&p.value).unwrap_or_else(|_| "null".into());
            format!("[{},{},{},{value}]", p.container_key, p.seconds, p.microseconds)
        });
        self.send("p", items);
    }

    pub(super) fn records(&mut self, records: &[Rendered]) {
        let items = records.iter().map(|(kind, group, device, data)| {
            serde_json::to_string(&(kind.name(), &**group, &**device, &**data)).unwrap_or_default()
        });
        self.send("r", items);
    }

    /// Records of this node were lost before they could be forwarded.
    pub(super) fn gap(&mut self) {
        let payload = self.envelope("g", "");
        self.queue(vec![payload]);
    }

    /// Cuts `items` into payloads under PostgreSQL's bound, numbered in order. An item that
    /// cannot fit one payload alone is not sent, and a gap goes in its place.
    fn send(&mut self, kind: &str, items: impl Iterator<Item = String>) {
        let mut payloads = Vec::new();
        let mut body = String::new();
        for item in items {
            if item.len() + ENVELOPE > MAX_PAYLOAD {
                tracing::warn!(
                    bytes = item.len(),
                    "live stream: a record too large to forward to other nodes"
                );
                if !body.is_empty() {
                    payloads.push(self.envelope(kind, &std::mem::take(&mut body)));
                }
                payloads.push(self.envelope("g", ""));
                continue;
            }
            if body.len() + item.len() + 1 + ENVELOPE > MAX_PAYLOAD {
                payloads.push(self.envelope(kind, &std::mem::take(&mut body)));
            }
            if !body.is_empty() {
                body.push(',');
            }
            body.push_str(&item);
        }
        if !body.is_empty() {
            payloads.push(self.envelope(kind, &body));
        }
        self.queue(payloads);
    }

    fn envelope(&mut self, kind: &str, body: &str) -> String {
        let n = self.next;
        self.next += 1;
        match kind {
            "g" => format!(r#"{{"node":"{}","n":{n},"t":"g"}}"#, self.node),
            _ => format!(r#"{{"node":"{}","n":{n},"t":"{kind}","{kind}":[{body}]}}"#, self.node),
        }
    }

    /// Hands payloads to the sending task; dropped when it is too far behind (their numbers
    /// are then missing, which the other nodes take for a gap).
    fn queue(&self, payloads: Vec<String>) {
        if payloads.is_empty() {
            return;
        }
        if self.queue.try_send(payloads).is_err() {
            metrics::counter!("devicecloud_stream_forward_dropped_total").increment(1);
        }
    }
}

/// A payload as received.
#[derive(Deserialize)]
struct Envelope {
    node: String,
    n: u64,
    t: String,
    #[serde(default)]
    p: Vec<(i64, i64, i64, f64)>,
    #[serde(default)]
    r: Vec<(String, String, String, String)>,
}

/// Starts forwarding, and listening to what is heard on [`CHANNELS`], when the store is
/// PostgreSQL; the feed task's end of the forwarding, `None` on SQLite (one node).
pub(super) fn start(
    feed: &Arc<LiveFeed>,
    db: &Db,
    heard: mpsc::UnboundedReceiver<Heard>,
    tracker: &TaskTracker,
    shutdown: &CancellationToken,
) -> Option<Forward> {
    if !matches!(db, Db::Postgres(_)) {
        return None;
    }
    let (queue, payloads) = mpsc::channel(SEND_BACKLOG);
    tracker.spawn(send(db.clone(), payloads, shutdown.clone()));
    tracker.spawn(listen(Arc::clone(feed), heard));
    tracker.spawn(announce(Arc::clone(feed), db.clone(), shutdown.clone()));
    Some(Forward {
        node: feed.epoch.clone(),
        next: 1,
        queue,
    })
}

/// Sends the queued payloads, in order, several in one statement when they pile up.
async fn send(db: Db, mut payloads: mpsc::Receiver<Vec<String>>, shutdown: CancellationToken) {
    loop {
        let mut batch = tokio::select! {
            batch = payloads.recv() => match batch {
                Some(batch) => batch,
                None => return,
            },
            _ = shutdown.cancelled() => return,
        };
        while batch.len() < SEND_BATCH {
            match payloads.try_recv() {
                Ok(more) => batch.extend(more),
                Err(_) => break,
            }
        }
        // Not sent is lost: the numbers of the batch are missing for the other nodes.
        if let Err(e) = notify::send(&db, STREAM_CHANNEL, &batch).await {
            metrics::counter!("devicecloud_stream_forward_dropped_total").increment(1);
            tracing::warn!(error = %e, "live stream: cannot forward records to other nodes");
        }
    }
}

/// Says that this node records, every [`ANNOUNCE_EVERY`] while it does and at once when its
/// first client comes.
async fn announce(feed: Arc<LiveFeed>, db: Db, shutdown: CancellationToken) {
    let me = [feed.epoch.clone()];
    loop {
        if feed.recording()
            && let Err(e) = notify::send(&db, INTEREST_CHANNEL, &me).await
        {
            tracing::warn!(error = %e, "live stream: cannot tell other nodes that this one records");
        }
        tokio::select! {
            _ = tokio::time::sleep(ANNOUNCE_EVERY) => {}
            _ = feed.announce.notified() => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

/// Listens to the other nodes: their interest, and what they forward (until shutdown ends
/// `heard`).
async fn listen(feed: Arc<LiveFeed>, mut heard: mpsc::UnboundedReceiver<Heard>) {
    let mut last: HashMap<String, u64> = HashMap::new();
    // Whether another node records is not known before it says so: forward meanwhile.
    feed.forward_for(INTEREST_TTL);
    while let Some(heard) = heard.recv().await {
        match heard {
            Heard::Notice { channel, payload } if channel == INTEREST_CHANNEL => {
                if payload != feed.epoch {
                    feed.forward_for(INTEREST_TTL);
                }
            }
            Heard::Notice { payload, .. } => receive(&feed, &mut last, &payload),
            // What was said while this node did not listen is unknown: another node may record
            // (forward meanwhile, until it says so again), and may have sent records.
            Heard::Lost => {
                feed.forward_for(INTEREST_TTL);
                feed.remote(Item::RemoteGap);
            }
        }
    }
}

/// Takes a payload of another node into this node's feed, after a gap when one of that node's
/// payloads is missing.
fn receive(feed: &LiveFeed, last: &mut HashMap<String, u64>, payload: &str) {
    let envelope: Envelope = match serde_json::from_str(payload) {
        Ok(envelope) => envelope,
        Err(e) => {
            tracing::warn!(error = %e, "live stream: a payload from another node that does not read");
            feed.remote(Item::RemoteGap);
            return;
        }
    };
    if envelope.node == feed.epoch {
        return;
    }
    let before = last.insert(envelope.node, envelope.n);
    if before.is_some_and(|n| envelope.n != n + 1) {
        feed.remote(Item::RemoteGap);
    }
    match envelope.t.as_str() {
        "p" => {
            let points = envelope
                .p
                .into_iter()
                .map(|(container_key, seconds, microseconds, value)| Point {
                    container_key,
                    seconds,
                    microseconds,
                    value,
                    session_key: None,
                })
                .collect();
            feed.remote(Item::RemotePoints(points));
        }
        "r" => {
            let records = envelope
                .r
                .into_iter()
                .filter_map(|(kind, group, device, data)| {
                    let kind = Kind::ALL.into_iter().find(|k| k.name() == kind)?;
                    Some((kind, Arc::from(group), Arc::from(device), data.into_boxed_str()))
                })
                .collect();
            feed.remote(Item::RemoteRecords(records));
        }
        _ => feed.remote(Item::RemoteGap),
    }
}
