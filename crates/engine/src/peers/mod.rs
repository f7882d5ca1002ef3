//! What the nodes sharing one PostgreSQL database tell each other, so that a change made through
//! one node takes effect on every node at once (docs/operations.md, "Several nodes"): rights and
//! the caches that hold them, the counts of the sign-in and rate limits, gateway connections that
//! must end wherever they are, and commands for a gateway connected to another node
//! ([`commands`]). Sent through PostgreSQL's LISTEN/NOTIFY on [`CHANNEL`], after the change is
//! committed; no broker beside the database. A command and its answer go on the channel of the
//! one node they are for ([`node_channel`]), so that the others neither receive nor read them.
//! (The live stream has channels of its own: `stream::cluster`; a node hears all of them on one
//! connection, [`Ears`].)
//!
//! A node that lost its listening connection cannot know what it missed: once listening again
//! it forgets every cached token, role and page, and closes no connection it was not told to
//! (docs/operations.md says so). On SQLite (one node) nothing is sent.
//!
//! This module sends; [`apply`] applies changes here, whichever node made them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use devicecloud_store::Db;
use devicecloud_store::notify::{self, Heard, Subscription};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};
use tokio_util::task::TaskTracker;

use crate::auth::login_limit::SignInKey;
use tokio_util::sync::CancellationToken;

pub mod apply;
pub mod commands;
mod context;

pub use context::Context;

pub const CHANNEL: &str = "devicecloud_control";

/// The channel of the node `node_id`, where commands for it and answers to it go: PostgreSQL
/// delivers a notification to the connections listening on its channel only, so the other nodes
/// do not read them. A hash of the id, as a channel name has at most 63 bytes.
pub fn node_channel(node_id: &str) -> String {
    let digest = Sha256::digest(node_id.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("devicecloud_node_{hex}")
}

/// How long to wait before listening again after the database refused.
const RETRY: Duration = Duration::from_secs(1);
/// Changes sent in one statement at most.
const SEND_BATCH: usize = 64;

/// A change made through one node that every other node applies too.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Change {
    /// A token was refreshed or revoked (by its hash).
    Token { hash: String },
    /// An account changed (password, disabled, administrator flag): its cached tokens go.
    Account { id_user: String },
    /// An account's roles changed.
    Roles { id_user: String },
    /// A group was created, changed or deleted.
    Groups,
    /// A webhook was created, changed or deleted: routes are read again, lanes revised.
    Webhooks,
    /// Requests the sending node let through per account since its last report (the rate limit
    /// per account, counted across the nodes).
    Requests { counts: Vec<(String, u32)> },
    /// A sign-in of this (username, address) pair failed on the sending node.
    SignInFailed { key: SignInKey },
    /// A sign-in of this pair succeeded on the sending node: its failures are forgotten.
    SignedIn { key: SignInKey },
    /// A gateway's credentials stopped being valid (token rotated, device archived): its
    /// connection ends, wherever it is.
    Revoked { device: String },
    /// An asset of `gateway` was archived: the gateway's connection, wherever it is, forgets it.
    AssetArchived { gateway: String, asset: String },
    /// A gateway connected to the sending node: a connection of it on another node was taken
    /// over.
    Connected { device: String },
    /// A command for the gateway `device`, connected to node `to`, sent through node
    /// `reply_to` (`commands`).
    Command {
        to: String,
        reply_to: String,
        device: String,
        request_id: String,
        /// The request as the gateway gets it.
        payload: String,
    },
    /// The desired document of `device` changed, and node `to` holds its gateway's connection:
    /// it reads the document and sends it (docs/gateway-protocol.md, "Twin").
    Twin { to: String, device: String },
    /// What became of a [`Change::Command`], for node `to`.
    Answer {
        to: String,
        request_id: String,
        answer: Answer,
    },
}

/// What became of a command relayed to another node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// The gateway's response.
    Response { status: u16, payload: serde_json::Value },
    /// No response: why (`offline`, `disconnected`, `timeout`, `invalid response`), and what
    /// was wrong with an invalid one.
    Failed { outcome: String, why: String },
}

impl Change {
    /// The channel it goes on: a command's or an answer's node, or every node.
    fn channel(&self) -> String {
        match self {
            Change::Command { to, .. } | Change::Answer { to, .. } | Change::Twin { to, .. } => node_channel(to),
            _ => CHANNEL.to_string(),
        }
    }
}

/// A change as sent: with the node it comes from, which ignores its own.
#[derive(Serialize, Deserialize)]
struct Envelope {
    from: String,
    #[serde(flatten)]
    change: Change,
}

/// The sending side, held by the service; tells nobody on SQLite.
#[derive(Clone, Debug)]
pub struct Peers {
    outbox: Option<mpsc::UnboundedSender<Change>>,
    /// Callers of this node waiting for commands relayed to another node, by request id.
    calls: Arc<Mutex<HashMap<String, oneshot::Sender<Answer>>>>,
    /// What this node hears, until [`apply::listen`] takes it.
    heard: Arc<Mutex<Option<mpsc::UnboundedReceiver<Heard>>>>,
}

impl Peers {
    /// Starts the sending task when `db` is PostgreSQL; `heard` is what this node hears on
    /// [`CHANNEL`] and its own [`node_channel`], which [`apply::listen`] applies.
    pub fn start(
        db: &Db,
        node_id: &str,
        heard: mpsc::UnboundedReceiver<Heard>,
        tracker: &TaskTracker,
        shutdown: &CancellationToken,
    ) -> Peers {
        let heard = Arc::new(Mutex::new(Some(heard)));
        if !matches!(db, Db::Postgres(_)) {
            return Peers {
                outbox: None,
                calls: Arc::default(),
                heard,
            };
        }
        let (outbox, changes) = mpsc::unbounded_channel();
        tracker.spawn(send(db.clone(), node_id.to_string(), changes, shutdown.clone()));
        Peers {
            outbox: Some(outbox),
            calls: Arc::default(),
            heard,
        }
    }

    /// What this node hears from the others, for the one task that applies it.
    fn take_heard(&self) -> Option<mpsc::UnboundedReceiver<Heard>> {
        self.heard.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Whether there are other nodes to tell (PostgreSQL).
    pub fn reaches_others(&self) -> bool {
        self.outbox.is_some()
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Answer>>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A caller waits for the answer to the relayed command `request_id`.
    fn wait(&self, request_id: &str, reply: oneshot::Sender<Answer>) {
        self.calls().insert(request_id.to_string(), reply);
    }

    /// The caller of `request_id` stopped waiting.
    fn forget(&self, request_id: &str) {
        self.calls().remove(request_id);
    }

    /// Hands an answer to its caller, if it still waits.
    fn answered(&self, request_id: &str, answer: Answer) {
        if let Some(reply) = self.calls().remove(request_id) {
            let _ = reply.send(answer);
        }
    }

    /// Queues a change for the other nodes.
    fn tell(&self, change: Change) {
        if let Some(outbox) = &self.outbox {
            let _ = outbox.send(change);
        }
    }
}

/// Sends the changes in the order made, several in one statement when they pile up. A change
/// that cannot be sent (the database refused) is logged: the other nodes then see it when their
/// cache entries expire (5 s), and a connection to close stays open until it reconnects.
async fn send(db: Db, node_id: String, mut changes: mpsc::UnboundedReceiver<Change>, shutdown: CancellationToken) {
    loop {
        let first = tokio::select! {
            change = changes.recv() => match change {
                Some(change) => change,
                None => return,
            },
            _ = shutdown.cancelled() => return,
        };
        let mut batch = vec![first];
        while batch.len() < SEND_BATCH {
            match changes.try_recv() {
                Ok(change) => batch.push(change),
                Err(_) => break,
            }
        }
        let notes: Vec<(String, String)> = batch
            .into_iter()
            .filter_map(|change| {
                let channel = change.channel();
                let payload = serde_json::to_string(&Envelope {
                    from: node_id.clone(),
                    change,
                })
                .ok()?;
                Some((channel, payload))
            })
            .collect();
        if let Err(e) = notify::send_each(&db, &notes).await {
            tracing::warn!(error = %e, count = notes.len(), "cannot tell the other nodes of changes");
        }
    }
}

/// Every channel this node listens on, heard through one connection: PostgreSQL wakes every
/// connection listening in a database at each notification, whatever its channels, so a second
/// listening connection per node would cost every notification of every node one more wake-up
/// (docs/benchmarks.md, "Several nodes"). What is heard goes to the task that asked for its
/// channel; a loss of the connection to every task.
pub struct Ears {
    db: Db,
    routes: Vec<(Vec<String>, mpsc::UnboundedSender<Heard>)>,
}

impl Ears {
    pub fn new(db: &Db) -> Ears {
        Ears {
            db: db.clone(),
            routes: Vec::new(),
        }
    }

    /// What will be heard on `channels`, and each loss of the connection ([`Heard::Lost`]).
    pub fn hear(&mut self, channels: &[&str]) -> mpsc::UnboundedReceiver<Heard> {
        let (to, heard) = mpsc::unbounded_channel();
        self.routes
            .push((channels.iter().map(|c| (*c).to_string()).collect(), to));
        heard
    }

    /// Starts listening on PostgreSQL, until `shutdown`; the receivers then end (on SQLite, at
    /// once: there is nobody to hear).
    pub fn start(self, tracker: &TaskTracker, shutdown: &CancellationToken) {
        if !matches!(self.db, Db::Postgres(_)) {
            return;
        }
        let shutdown = shutdown.clone();
        tracker.spawn(async move {
            let channels: Vec<String> = self.routes.iter().flat_map(|(c, _)| c.iter().cloned()).collect();
            let mut hearing = Hearing::new(&self.db, channels);
            while let Some(heard) = hearing.next(&shutdown).await {
                match heard {
                    Heard::Notice { channel, payload } => {
                        if let Some((_, to)) = self.routes.iter().find(|(c, _)| c.contains(&channel)) {
                            let _ = to.send(Heard::Notice { channel, payload });
                        }
                    }
                    Heard::Lost => {
                        for (_, to) in &self.routes {
                            let _ = to.send(Heard::Lost);
                        }
                    }
                }
            }
        });
    }
}

/// What the other nodes say on some channels, heard through one connection that is made again
/// whenever it is lost (every second while the database refuses). A connection made again
/// reports [`Heard::Lost`] first: what was said meanwhile is gone.
struct Hearing<'a> {
    db: &'a Db,
    channels: Vec<String>,
    subscription: Option<Subscription>,
    opened_before: bool,
}

impl<'a> Hearing<'a> {
    fn new(db: &'a Db, channels: Vec<String>) -> Hearing<'a> {
        Hearing {
            db,
            channels,
            subscription: None,
            opened_before: false,
        }
    }

    /// The next thing heard; `None` on SQLite (nobody to hear) or once `shutdown` is cancelled.
    async fn next(&mut self, shutdown: &CancellationToken) -> Option<Heard> {
        loop {
            let Some(subscription) = &mut self.subscription else {
                let opened = tokio::select! {
                    opened = Subscription::open(self.db, &self.channels) => opened,
                    _ = shutdown.cancelled() => return None,
                };
                match opened {
                    Ok(Some(subscription)) => {
                        self.subscription = Some(subscription);
                        if std::mem::replace(&mut self.opened_before, true) {
                            return Some(Heard::Lost);
                        }
                    }
                    Ok(None) => return None,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot listen to the other nodes");
                        tokio::select! {
                            _ = tokio::time::sleep(RETRY) => {}
                            _ = shutdown.cancelled() => return None,
                        }
                    }
                }
                continue;
            };
            let heard = tokio::select! {
                heard = subscription.next() => heard,
                _ = shutdown.cancelled() => return None,
            };
            match heard {
                Ok(heard) => return Some(heard),
                Err(e) => {
                    tracing::warn!(error = %e, "lost the connection listening to the other nodes");
                    self.subscription = None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_channel_is_a_short_name_of_its_own() {
        let long = "n".repeat(64);
        let (a, b) = (node_channel("node-a"), node_channel(&long));
        assert!(a.len() <= 63 && b.len() <= 63, "{a} {b}");
        assert_ne!(a, node_channel("node-b"));
        assert_eq!(a, node_channel("node-a"));
        assert_ne!(a, CHANNEL);
    }

    #[test]
    fn commands_and_answers_go_to_their_node_and_other_changes_to_all() {
        let command = Change::Command {
            to: "a".into(),
            reply_to: "b".into(),
            device: "d".into(),
            request_id: "r".into(),
            payload: "{}".into(),
        };
        let answer = Change::Answer {
            to: "b".into(),
            request_id: "r".into(),
            answer: Answer::Failed {
                outcome: "offline".into(),
                why: String::new(),
            },
        };
        assert_eq!(command.channel(), node_channel("a"));
        assert_eq!(answer.channel(), node_channel("b"));
        assert_eq!(Change::Groups.channel(), CHANNEL);
    }
}
