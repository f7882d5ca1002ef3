//! The live stream (`GET /api/v2/stream`, docs/api.md, "Live stream"): what this node commits —
//! points, events, command outcomes, twins — handed to Server-Sent Events clients in commit order.
//!
//! Writers hand over what they committed, after the commit, so a record that could still roll
//! back is never shown. Nothing is built while nobody listens: the hand-over is one atomic load
//! then ([`LiveFeed::active`]). Otherwise it is queued to one task ([`feed`]) that renders each
//! record once (the `data` and `event` endpoints' own serialisation), numbers it and appends it
//! to the replay buffer ([`ring`]); clients are cursors into that buffer ([`client`]).
//!
//! Recording goes on for [`Settings::stream_retention`] after the last client left, so that a
//! client reconnecting with `Last-Event-ID` within that time misses nothing. Records that were
//! not recorded (nobody listened for longer), dropped (the feed task too far behind the
//! writers) or evicted (the buffer full) leave a gap that every client positioned before it
//! meets as `event: overflow`: a gap is never silent.
//!
//! Several nodes sharing PostgreSQL ([`cluster`]): a node whose stream records tells the
//! others, and they forward what they commit to it (LISTEN/NOTIFY), where it enters the buffer
//! like its own. Ids are each process's numbers (`<epoch>-<seq>`, the epoch drawn at start), so
//! a resume through another node (or after a restart) answers `overflow`.
//!
//! [`Settings::stream_retention`]: crate::settings::Settings::stream_retention

mod cluster;
pub use cluster::CHANNELS;
mod feed;
pub mod ring;
pub mod slots;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use devicecloud_store::Db;
use devicecloud_store::events::EventRow;
use devicecloud_store::events::NewEvent;
use devicecloud_store::ingest::Point;
use devicecloud_store::notify::Heard;
use serde::Serialize;
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use ring::{Kind, Ring};

/// Hand-overs the feed task may be behind by before further ones are dropped (and the loss
/// marked as a gap), so that writers never wait for the stream.
const FEED_BACKLOG: usize = 4096;

/// A command outcome as the stream shows it (`event: command`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CommandOutcome {
    #[serde(skip)]
    pub id_group: String,
    pub id_physical_device: String,
    pub method: &'static str,
    /// The HTTP status the command's caller got (`200`, `404`, `504`, …): always an integer.
    pub status: u16,
    /// The device's own status when it answered, else null.
    pub device_status: Option<i64>,
    /// Why the device gave no status (`offline`, `timeout`, `disconnected`, `invalid response`,
    /// `not supported`), else null.
    pub reason: Option<String>,
    pub duration_ms: u64,
    /// When the command was sent (Unix seconds).
    pub requested_at: i64,
}

/// A record rendered on another node, as it travels: kind, group, device, JSON.
type Rendered = (Kind, Arc<str>, Arc<str>, Box<str>);

/// What a writer hands over after its commit, or another node forwarded.
#[derive(Debug)]
enum Item {
    Points(Vec<Point>),
    Events(Vec<EventRow>),
    Commands(Vec<CommandOutcome>),
    /// Records rendered by their writer (twins).
    Records(Vec<Rendered>),
    /// Hand-overs were dropped before this one.
    Gap,
    /// Points another node committed (rendered here, from the shared series).
    RemotePoints(Vec<Point>),
    /// Events and command outcomes another node committed, as it rendered them.
    RemoteRecords(Vec<Rendered>),
    /// Another node's records were lost on the way here.
    RemoteGap,
}

/// The stream's shared side: the writers' hand-over, the replay buffer and its listeners.
#[derive(Debug)]
pub struct LiveFeed {
    /// Drawn at start: ids of another process never resume here.
    epoch: String,
    started: Instant,
    listeners: AtomicUsize,
    /// Recording goes on until this (milliseconds since `started`) with nobody listening.
    record_until_ms: AtomicU64,
    retention: Duration,
    ring: Mutex<Ring>,
    head: watch::Sender<u64>,
    queue: mpsc::UnboundedSender<Item>,
    queued: AtomicUsize,
    lost: AtomicBool,
    /// Another node records until this (milliseconds since `started`): this node forwards
    /// what it commits while it does.
    forward_until_ms: AtomicU64,
    /// Wakes the task that tells the other nodes this one records (its first listener).
    announce: Notify,
    /// The streams each account holds open here.
    pub accounts: Arc<slots::AccountStreams>,
}

impl LiveFeed {
    /// The feed, with its task started on `tracker` (reading series from `db`); the buffer
    /// holds at most `max_bytes`, and recording lasts `retention` after the last client left.
    /// `heard` is what the other nodes say on [`CHANNELS`].
    pub fn start(
        db: Db,
        heard: mpsc::UnboundedReceiver<Heard>,
        max_bytes: usize,
        retention: Duration,
        tracker: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Arc<LiveFeed> {
        let (queue, items) = mpsc::unbounded_channel();
        let feed = Arc::new(LiveFeed {
            epoch: format!("{:08x}", rand::random::<u32>()),
            started: Instant::now(),
            listeners: AtomicUsize::new(0),
            record_until_ms: AtomicU64::new(0),
            retention,
            ring: Mutex::new(Ring::new(max_bytes)),
            head: watch::Sender::new(0),
            queue,
            queued: AtomicUsize::new(0),
            lost: AtomicBool::new(false),
            forward_until_ms: AtomicU64::new(0),
            announce: Notify::new(),
            accounts: Arc::default(),
        });
        let forward = cluster::start(&feed, &db, heard, tracker, &shutdown);
        tracker.spawn(feed::run(Arc::clone(&feed), db, items, forward, shutdown));
        feed
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether this node records: a client listens, or one left within the retention.
    fn recording(&self) -> bool {
        self.listeners.load(Ordering::SeqCst) > 0 || self.now_ms() < self.record_until_ms.load(Ordering::SeqCst)
    }

    /// Whether another node records, so that what this one commits goes to it.
    fn forwarding(&self) -> bool {
        self.now_ms() < self.forward_until_ms.load(Ordering::SeqCst)
    }

    /// Forwards what this node commits for `period` from now (another node records).
    fn forward_for(&self, period: Duration) {
        let until = self
            .now_ms()
            .saturating_add(u64::try_from(period.as_millis()).unwrap_or(u64::MAX));
        self.forward_until_ms.fetch_max(until, Ordering::SeqCst);
    }

    /// Whether what writers commit is wanted: this node or another one records. The whole
    /// cost of the stream to a writer when nobody listens anywhere.
    pub fn active(&self) -> bool {
        // One clock read for both (this is called on every commit).
        let now = self.now_ms();
        self.listeners.load(Ordering::SeqCst) > 0
            || now < self.record_until_ms.load(Ordering::SeqCst)
            || now < self.forward_until_ms.load(Ordering::SeqCst)
    }

    /// Queues what another node forwarded, if this node records.
    fn remote(&self, item: Item) {
        if self.recording() {
            self.send(item);
        }
    }

    /// Hands over points just committed (the new ones, in the order sent).
    pub fn points(&self, fresh: Vec<Point>) {
        if !fresh.is_empty() && self.active() {
            self.send(Item::Points(fresh));
        }
    }

    /// Hands over events just committed under `ids`.
    pub fn events(&self, events: &[NewEvent<'_>], ids: &[i64]) {
        if !events.is_empty() && self.active() {
            let rows = events.iter().zip(ids).map(|(e, id)| e.recorded(*id)).collect();
            self.send(Item::Events(rows));
        }
    }

    /// Hands over events just committed, as read back.
    pub fn event_rows(&self, rows: Vec<EventRow>) {
        if !rows.is_empty() && self.active() {
            self.send(Item::Events(rows));
        }
    }

    /// Hands over command outcomes whose events were just committed.
    pub fn commands(&self, outcomes: Vec<CommandOutcome>) {
        if !outcomes.is_empty() && self.active() {
            self.send(Item::Commands(outcomes));
        }
    }

    /// Hands over the record of a twin just changed, rendered by `record` only when someone
    /// listens (a fleet's job changes thousands of twins a second).
    pub fn twin(
        &self,
        id_group: &str,
        device: &str,
        record: impl FnOnce() -> serde_json::Map<String, serde_json::Value>,
    ) {
        self.rendered(Kind::Twin, id_group, device, record);
    }

    /// Hands over the record of an alarm just changed, rendered only when someone listens.
    pub fn alarm(
        &self,
        id_group: &str,
        device: &str,
        record: impl FnOnce() -> serde_json::Map<String, serde_json::Value>,
    ) {
        self.rendered(Kind::Alarm, id_group, device, record);
    }

    fn rendered(
        &self,
        kind: Kind,
        id_group: &str,
        device: &str,
        record: impl FnOnce() -> serde_json::Map<String, serde_json::Value>,
    ) {
        if self.active() {
            let text = serde_json::Value::Object(record()).to_string().into_boxed_str();
            let rendered = (kind, Arc::from(id_group), Arc::from(device), text);
            self.send(Item::Records(vec![rendered]));
        }
    }

    /// Queues a hand-over, or drops it when the feed task is too far behind; the first
    /// hand-over queued after a drop is preceded by a gap.
    fn send(&self, item: Item) {
        if self.queued.load(Ordering::SeqCst) >= FEED_BACKLOG {
            self.lost.store(true, Ordering::SeqCst);
            metrics::counter!("devicecloud_stream_dropped_total").increment(1);
            return;
        }
        if self.lost.swap(false, Ordering::SeqCst) {
            self.enqueue(Item::Gap);
        }
        self.enqueue(item);
    }

    fn enqueue(&self, item: Item) {
        self.queued.fetch_add(1, Ordering::SeqCst);
        if self.queue.send(item).is_err() {
            self.queued.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Watches the number of the newest record: a client waits on it for what comes next.
    pub fn watch_head(&self) -> watch::Receiver<u64> {
        self.head.subscribe()
    }

    /// The replay buffer, for a client reading its records.
    pub fn ring(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks the records not recorded since recording lapsed as a gap, once (under the buffer's
    /// lock, with the listener count it saw).
    fn settle_lapse(&self, ring: &mut Ring) {
        if !self.recording() {
            ring.gap();
        }
    }

    /// A new listener and the cursor it starts from: the newest record.
    pub fn subscribe(self: &Arc<LiveFeed>) -> (Listener, u64) {
        let mut ring = self.ring();
        self.settle_lapse(&mut ring);
        if self.listeners.fetch_add(1, Ordering::SeqCst) == 0 {
            self.announce.notify_one();
        }
        metrics::gauge!("devicecloud_stream_clients").increment(1.0);
        let head = ring.head();
        (Listener(Arc::clone(self)), head)
    }

    /// The id of record `seq`, as sent and as `Last-Event-ID` gives it back.
    pub fn id(&self, seq: u64) -> String {
        format!("{}-{seq}", self.epoch)
    }

    /// Where a `Last-Event-ID` resumes; `None` for text that is no id of a stream.
    pub fn parse_id(&self, id: &str) -> Option<Resume> {
        let (epoch, seq) = id.trim().split_once('-')?;
        let seq: u64 = seq.parse().ok()?;
        if epoch.len() != 8 || !epoch.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(if epoch == self.epoch {
            Resume::After(seq)
        } else {
            Resume::Foreign
        })
    }
}

/// Where a client resumes from, by its `Last-Event-ID`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// After record `seq` of this process.
    After(u64),
    /// After a record of another process (before a restart): not here, so `overflow` first.
    Foreign,
}

/// A client's registration: counted while it lives; when the last one leaves, recording goes
/// on for the retention.
#[derive(Debug)]
pub struct Listener(Arc<LiveFeed>);

impl Listener {
    pub fn feed(&self) -> &Arc<LiveFeed> {
        &self.0
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let feed = &self.0;
        let until = feed
            .now_ms()
            .saturating_add(u64::try_from(feed.retention.as_millis()).unwrap_or(u64::MAX));
        feed.record_until_ms.fetch_max(until, Ordering::SeqCst);
        feed.listeners.fetch_sub(1, Ordering::SeqCst);
        metrics::gauge!("devicecloud_stream_clients").decrement(1.0);
    }
}
