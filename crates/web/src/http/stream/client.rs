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
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::caller::Caller;
use crate::service::access;
use crate::state::AppState;
use devicecloud_engine::auth::Role;
use devicecloud_engine::stream::ring::{Kind, Record};
use devicecloud_engine::stream::slots::StreamSlot;
use devicecloud_engine::stream::{Listener, Resume};

/// Records taken from the buffer at once.
const READ_BATCH: usize = 512;

/// Up to this many groups are compared one by one, cheaper than hashing each record's group.
const FEW_GROUPS: usize = 8;

/// The groups a client asked for, matched against every record it passes.
enum Groups {
    Few(Vec<Box<str>>),
    Many(HashSet<Box<str>>),
}

impl Groups {
    fn of(ids: &[String]) -> Groups {
        let boxed = ids.iter().map(|g| Box::from(g.as_str()));
        if ids.len() <= FEW_GROUPS {
            Groups::Few(boxed.collect())
        } else {
            Groups::Many(boxed.collect())
        }
    }

    fn has(&self, id_group: &str) -> bool {
        match self {
            Groups::Few(ids) => ids.iter().any(|g| **g == *id_group),
            Groups::Many(ids) => ids.contains(id_group),
        }
    }
}

/// What a client was let in with, to check it again while it listens.
#[derive(Clone, Debug)]
pub enum Credential {
    /// The hash of an API bearer token.
    Token(String),
    /// The hash of a dashboard session's cookie.
    Session(String),
}

impl Credential {
    /// The caller it stands for now; an error once it was revoked or expired.
    pub async fn caller(&self, state: &AppState) -> Result<Caller, crate::http::error::ApiError> {
        match self {
            Credential::Token(hash) => Caller::of_token(state, hash).await,
            Credential::Session(hash) => Caller::of_session(state, hash).await,
        }
    }
}

/// What a client asked for.
#[derive(Clone, Debug)]
pub struct Request {
    pub credential: Credential,
    pub groups: Vec<String>,
    /// Only the records of this device (the dashboard's device page); all of the groups' when
    /// `None`.
    pub device: Option<String>,
    pub kinds: Vec<Kind>,
    /// Where it resumes (`Last-Event-ID`); from the newest record when `None`.
    pub resume: Option<Resume>,
}

/// What a client is to send next.
#[derive(Debug)]
pub enum Next {
    /// A record it asked for, with its id.
    Record(Arc<Record>, String),
    /// A comment line, so that proxies and the client see the connection alive.
    Heartbeat,
    /// The client fell behind what the buffer holds: the last thing sent, with the newest
    /// record's id so that a client reconnecting with it goes on from now.
    Overflow(String),
}

/// Why the stream closes after an overflow, as the `overflow` event says it.
pub const OVERFLOW_MESSAGE: &str =
    "The stream fell behind what this node keeps; records were lost. Reconnect to go on from the newest record.";

/// A connected client, polled for what to send next.
pub struct Client {
    state: AppState,
    listener: Listener,
    request: Request,
    groups: Groups,
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
    /// The account's slot, given back when the client ends.
    _slot: StreamSlot,
}

fn every(period: Duration) -> Interval {
    let mut interval = tokio::time::interval_at(Instant::now() + period, period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

impl Client {
    /// Registers a client whose rights were just checked.
    pub fn new(state: AppState, request: Request, rights_seen: u64, slot: StreamSlot) -> Client {
        let (listener, head) = state.stream.subscribe();
        let (cursor, overflowed) = match request.resume {
            None => (head, false),
            Some(Resume::After(seq)) => (seq, false),
            Some(Resume::Foreign) => (head, true),
        };
        let settings = &state.settings;
        Client {
            head: listener.feed().watch_head(),
            heartbeat_at: Instant::now() + settings.stream_heartbeat,
            recheck: every(settings.stream_recheck),
            groups: Groups::of(&request.groups),
            listener,
            request,
            cursor,
            overflowed,
            pending: VecDeque::new(),
            rights_seen,
            groups_read: Instant::now(),
            done: false,
            _slot: slot,
            state,
        }
    }

    /// The client as a Server-Sent Events answer, each thing to send as `render` makes it.
    pub fn into_response(self, render: fn(Next) -> Event) -> Response {
        let events = futures::stream::unfold(self, move |mut client| async move {
            let event = render(client.next().await?);
            Some((Ok::<_, Infallible>(event), client))
        });
        Sse::new(events).into_response()
    }

    /// What to send next; `None` ends the stream (rights lost, overflow sent, shutdown).
    pub async fn next(&mut self) -> Option<Next> {
        loop {
            if self.done {
                return None;
            }
            if self.state.auth.changes() != self.rights_seen && !self.rights_hold(true).await {
                return None;
            }
            if let Some(record) = self.pending.pop_front() {
                let id = self.listener.feed().id(record.seq);
                return Some(Next::Record(record, id));
            }
            if self.overflowed {
                return Some(self.overflow());
            }
            // The clock is read once per batch of records, not per record.
            let now = Instant::now();
            if now >= self.heartbeat_at {
                self.heartbeat_at = now + self.state.settings.stream_heartbeat;
                return Some(Next::Heartbeat);
            }
            // Seen before reading, so that a record pushed after the read wakes the wait below.
            self.head.borrow_and_update();
            if self.fill() {
                if self.pending.is_empty() {
                    // Passing other groups' records: let other tasks run between batches.
                    tokio::task::yield_now().await;
                }
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
    /// Filtered in place under the buffer's lock: only the records kept are cloned (their
    /// reference counts are shared by every client, so each clone is contended).
    fn fill(&mut self) -> bool {
        let feed = Arc::clone(self.listener.feed());
        let ring = feed.ring();
        let Some(records) = ring.after(self.cursor, READ_BATCH) else {
            self.overflowed = true;
            return true;
        };
        let before = self.cursor;
        for record in records {
            self.cursor = record.seq;
            let device = self.request.device.as_deref();
            if self.request.kinds.contains(&record.kind)
                && self.groups.has(&record.id_group)
                && device.is_none_or(|d| *record.device == *d)
            {
                self.pending.push_back(Arc::clone(record));
            }
        }
        self.cursor != before
    }

    /// The overflow, the last thing sent: with the newest record's id, so that a client
    /// reconnecting with it goes on from now (having been told that it lost records).
    fn overflow(&mut self) -> Next {
        self.done = true;
        metrics::counter!("devicecloud_stream_overflows_total").increment(1);
        let head = self.listener.feed().ring().head();
        Next::Overflow(self.listener.feed().id(head))
    }

    /// Checks the token and every group again; the groups' rows are read when `changed` (a
    /// change through this node) or once per cache time to live.
    async fn rights_hold(&mut self, changed: bool) -> bool {
        self.rights_seen = self.state.auth.changes();
        let Ok(caller) = self.request.credential.caller(&self.state).await else {
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
