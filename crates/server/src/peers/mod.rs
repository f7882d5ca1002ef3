//! What the nodes sharing one PostgreSQL database tell each other, so that a change made through
//! one node takes effect on every node at once (docs/operations.md, "Several nodes"): rights and
//! the caches that hold them, the counts of the sign-in and rate limits, gateway connections that
//! must end wherever they are, and commands for a gateway connected to another node
//! ([`commands`]). Sent through PostgreSQL's LISTEN/NOTIFY on [`CHANNEL`], after the change is
//! committed; no broker beside the database. (The live stream has channels of its own:
//! `stream::cluster`.)
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
use tokio::sync::{mpsc, oneshot};

use crate::auth::login_limit::SignInKey;
use tokio_util::sync::CancellationToken;

pub mod apply;
pub mod commands;

const CHANNEL: &str = "devicecloud_control";
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
}

impl Peers {
    /// Starts the sending task when `db` is PostgreSQL.
    pub fn start(
        db: &Db,
        node_id: &str,
        tracker: &tokio_util::task::TaskTracker,
        shutdown: &CancellationToken,
    ) -> Peers {
        if !matches!(db, Db::Postgres(_)) {
            return Peers {
                outbox: None,
                calls: Arc::default(),
            };
        }
        let (outbox, changes) = mpsc::unbounded_channel();
        tracker.spawn(send(db.clone(), node_id.to_string(), changes, shutdown.clone()));
        Peers {
            outbox: Some(outbox),
            calls: Arc::default(),
        }
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
        let payloads: Vec<String> = batch
            .into_iter()
            .filter_map(|change| {
                serde_json::to_string(&Envelope {
                    from: node_id.clone(),
                    change,
                })
                .ok()
            })
            .collect();
        if let Err(e) = notify::send(&db, CHANNEL, &payloads).await {
            tracing::warn!(error = %e, count = payloads.len(), "cannot tell the other nodes of changes");
        }
    }
}

/// What the other nodes say on some channels, heard through one connection that is made again
/// whenever it is lost (every second while the database refuses). A connection made again
/// reports [`Heard::Lost`] first: what was said meanwhile is gone.
pub struct Hearing<'a> {
    db: &'a Db,
    channels: &'a [&'a str],
    /// What for, in the log.
    what: &'static str,
    subscription: Option<Subscription>,
    opened_before: bool,
}

impl<'a> Hearing<'a> {
    pub fn new(db: &'a Db, channels: &'a [&'a str], what: &'static str) -> Hearing<'a> {
        Hearing {
            db,
            channels,
            what,
            subscription: None,
            opened_before: false,
        }
    }

    /// The next thing heard; `None` on SQLite (nobody to hear) or once `shutdown` is cancelled.
    pub async fn next(&mut self, shutdown: &CancellationToken) -> Option<Heard> {
        loop {
            let Some(subscription) = &mut self.subscription else {
                let opened = tokio::select! {
                    opened = Subscription::open(self.db, self.channels) => opened,
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
                        tracing::warn!(error = %e, "cannot listen to the other nodes ({})", self.what);
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
                    tracing::warn!(error = %e, "lost the connection listening to the other nodes ({})", self.what);
                    self.subscription = None;
                }
            }
        }
    }
}
