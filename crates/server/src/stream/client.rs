//! One stream client: a cursor into the replay buffer, the groups and kinds it asked for, and
//! the rights it was let in with, checked again while it listens.
//!
//! Rights are checked again whenever a change of rights is made through this node (a revoked
//! token, a changed membership, a deleted group: `AuthCache::changes`), before anything more
//! is sent, and otherwise every `recheck` (a change made through another node reaches this one
//! through the token and role caches, within their time to live). The periodic check reads the
//! token and roles through those caches, and the groups' rows (a group deleted through another
//! node) once per cache time to live, so that many listening clients cost the store little. A
//! client that lost a token or a group is closed; its reconnection then answers 401 or 404.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::Event;
use tokio::sync::watch;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::ring::{Kind, Read, Record};
use super::{Listener, Resume};
use crate::auth::{Caller, Role};
use crate::service::access;
use crate::state::AppState;

/// Records taken from the buffer at once.
const READ_BATCH: usize = 512;

/// What a client asked for.
#[derive(Clone, Debug)]
pub struct Request {
    /// The hash of its bearer token, to check it again.
    pub token_hash: String,
    pub groups: Vec<String>,
    pub kinds: Vec<Kind>,
    /// Where it resumes (`Last-Event-ID`); from the newest record when `None`.
    pub resume: Option<Resume>,
}

/// A connected client, polled for its next SSE event.
pub struct Client {
    state: AppState,
    listener: Listener,
    request: Request,
    groups: HashSet<Arc<str>>,
    cursor: u64,
    /// Set once the cursor cannot go on: the next event is `overflow`, then the end.
    overflowed: bool,
    pending: VecDeque<Arc<Record>>,
    head: watch::Receiver<u64>,
    /// When the next comment line is due, whatever was sent meanwhile.
    heartbeat_at: Instant,
    recheck: Interval,
    rights_seen: u64,
    /// When the groups' rows were last read.
    groups_read: Instant,
    done: bool,
}

fn every(period: Duration) -> Interval {
    let mut interval = tokio::time::interval_at(Instant::now() + period, period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

impl Client {
    /// Registers a client whose rights were just checked.
    pub fn new(state: AppState, request: Request, rights_seen: u64) -> Client {
        let (listener, head) = state.stream.subscribe();
        let (cursor, overflowed) = match request.resume {
            None => (head, false),
            Some(Resume::After(seq)) => (seq, false),
            Some(Resume::Foreign) => (head, true),
        };
        let settings = &state.settings;
        Client {
            head: listener.feed().head.subscribe(),
            heartbeat_at: Instant::now() + settings.stream_heartbeat,
            recheck: every(settings.stream_recheck),
            groups: request.groups.iter().map(|g| Arc::from(g.as_str())).collect(),
            listener,
            request,
            cursor,
            overflowed,
            pending: VecDeque::new(),
            rights_seen,
            groups_read: Instant::now(),
            done: false,
            state,
        }
    }

    /// The next event to send; `None` ends the stream (rights lost, overflow sent, shutdown).
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            if self.done {
                return None;
            }
            if Instant::now() >= self.heartbeat_at {
                self.heartbeat_at = Instant::now() + self.state.settings.stream_heartbeat;
                return Some(Event::default().comment("heartbeat"));
            }
            if self.state.auth.changes() != self.rights_seen && !self.rights_hold(true).await {
                return None;
            }
            if let Some(record) = self.pending.pop_front() {
                return Some(self.event(&record));
            }
            if self.overflowed {
                return Some(self.overflow());
            }
            // Seen before reading, so that a record pushed after the read wakes the wait below.
            self.head.borrow_and_update();
            if self.fill() {
                continue;
            }
            tokio::select! {
                changed = self.head.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                _ = tokio::time::sleep_until(self.heartbeat_at) => {}
                _ = self.recheck.tick() => {
                    if !self.rights_hold(false).await {
                        return None;
                    }
                }
                _ = self.state.shutdown.cancelled() => return None,
            }
        }
    }

    /// Takes the next records after the cursor, keeping those asked for; whether it moved.
    fn fill(&mut self) -> bool {
        let read = self.listener.feed().ring().after(self.cursor, READ_BATCH);
        match read {
            Read::Overflow => {
                self.overflowed = true;
                true
            }
            Read::Records(records) => {
                let Some(last) = records.last() else {
                    return false;
                };
                self.cursor = last.seq;
                let wanted =
                    |r: &Arc<Record>| self.request.kinds.contains(&r.kind) && self.groups.contains(&r.id_group);
                self.pending.extend(records.iter().filter(|r| wanted(r)).cloned());
                true
            }
        }
    }

    fn event(&self, record: &Record) -> Event {
        Event::default()
            .event(record.kind.name())
            .id(self.listener.feed().id(record.seq))
            .data(&*record.data)
    }

    /// `event: overflow`, the last event: its id is the newest record's, so that a client
    /// reconnecting with it goes on from now (having been told that it lost records).
    fn overflow(&mut self) -> Event {
        self.done = true;
        metrics::counter!("devicecloud_stream_overflows_total").increment(1);
        let head = self.listener.feed().ring().head();
        let message = "The stream fell behind what this node keeps; records were lost. Reconnect to go on from the newest record.";
        Event::default()
            .event("overflow")
            .id(self.listener.feed().id(head))
            .data(serde_json::json!({ "message": message }).to_string())
    }

    /// Checks the token and every group again; the groups' rows are read when `changed` (a
    /// change through this node) or once per cache time to live.
    async fn rights_hold(&mut self, changed: bool) -> bool {
        self.rights_seen = self.state.auth.changes();
        let Ok(caller) = Caller::of_token(&self.state, &self.request.token_hash).await else {
            return false;
        };
        // Groups are never removed, only marked deleted, which administrators still see.
        if caller.is_admin {
            return true;
        }
        if changed || self.groups_read.elapsed() >= self.state.settings.auth_cache_ttl {
            self.groups_read = Instant::now();
            return access::groups(&self.state, &caller, &self.request.groups, Role::Viewer)
                .await
                .is_ok();
        }
        self.request.groups.iter().all(|g| caller.role_in_group(g).is_some())
    }
}
