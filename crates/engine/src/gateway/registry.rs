//! The live gateway connections of this node, by device id: a second connection of the same gateway
//! takes over from the first (docs/gateway-protocol.md, "Transport"), a rotated token or an
//! archived device ends the connection at once (docs/api.md, "Rights"), and commands reach the live
//! connection through its queue (docs/gateway-protocol.md, "Commands").

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::oneshot;

pub use crate::commands::Outgoing;

/// How long a desired document may wait for room in a busy connection's queue; past it the
/// gateway gets it after its next hello instead.
const DESIRED_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
use crate::gateway::archived::ArchivedAssets;

/// Why a connection is told to end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kick {
    /// A new connection of the same gateway replaced it.
    TakenOver,
    /// Its credentials stopped being valid (token rotated, device archived).
    Revoked,
}

/// Commands a connection may have queued before it publishes them; a full queue makes callers
/// wait (within their command timeout) instead of growing memory.
const COMMAND_QUEUE: usize = 16;

/// A live connection: its id, where it is told to end, and where its commands go.
///
/// A one-shot kick and a `flume` queue rather than tokio's `watch` and `mpsc`: those allocated
/// 1,144 bytes per connection (cache-padded queue heads, eight waiter lists), and the switch
/// took 0.8 KiB off every connected gateway's resident memory (docs/benchmarks.md, "Idle
/// gateways").
#[derive(Debug)]
struct Live {
    id: u64,
    kick: oneshot::Sender<Kick>,
    commands: flume::Sender<Box<Outgoing>>,
}

/// What a connection receives when it registers.
#[derive(Debug)]
pub struct Registration {
    /// The connection's id, for [`GatewayRegistry::unregister`].
    pub id: u64,
    /// Where it learns that it must end (closed without a kick: it was forgotten).
    pub kicked: oneshot::Receiver<Kick>,
    /// Command requests to publish to the gateway.
    pub commands: flume::Receiver<Box<Outgoing>>,
}

#[derive(Debug, Default)]
pub struct GatewayRegistry {
    next_id: AtomicU64,
    live: Mutex<HashMap<String, Live>>,
    /// Assets archived while their gateways are connected (`gateway::archived`).
    pub archived: ArchivedAssets,
}

impl GatewayRegistry {
    /// Registers a connection of `device`; an earlier one is told it was taken over.
    pub fn register(&self, device: &str) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (kick, kicked) = oneshot::channel();
        // Items are boxed so that a queued command takes one pointer in the queue.
        let (commands, receiver) = flume::bounded(COMMAND_QUEUE);
        if let Ok(mut live) = self.live.lock()
            && let Some(previous) = live.insert(device.to_string(), Live { id, kick, commands })
        {
            let _ = previous.kick.send(Kick::TakenOver);
        }
        Registration {
            id,
            kicked,
            commands: receiver,
        }
    }

    /// Forgets a connection that ended, unless a newer one already took its place.
    pub fn unregister(&self, device: &str, id: u64) {
        if let Ok(mut live) = self.live.lock()
            && live.get(device).is_some_and(|l| l.id == id)
        {
            live.remove(device);
        }
    }

    /// Ends the live connection of `device`, if any.
    pub fn revoke(&self, device: &str) {
        if let Ok(mut live) = self.live.lock()
            && let Some(l) = live.remove(device)
        {
            let _ = l.kick.send(Kick::Revoked);
        }
    }

    /// Ends every live connection of this node (its lease was taken while it still ran: the
    /// gateways are shown disconnected, and connect again to be shown connected).
    pub fn revoke_all(&self) {
        if let Ok(mut live) = self.live.lock() {
            for (_, l) in live.drain() {
                let _ = l.kick.send(Kick::Revoked);
            }
        }
    }

    /// Tells the live connection of `device` on this node, if any, that a connection to
    /// another node took over (`peers`).
    pub fn take_over(&self, device: &str) {
        if let Ok(mut live) = self.live.lock()
            && let Some(l) = live.remove(device)
        {
            let _ = l.kick.send(Kick::TakenOver);
        }
    }

    /// Where commands for `device` go, `None` when it has no live connection on this node.
    pub fn commands(&self, device: &str) -> Option<flume::Sender<Box<Outgoing>>> {
        self.live.lock().ok()?.get(device).map(|l| l.commands.clone())
    }

    /// Queues a desired document for the live connection of `gateway` on this node; `false` when
    /// it has none. A full queue (commands waiting) is waited for in the background, bounded.
    pub fn desired(&self, gateway: &str, payload: Vec<u8>) -> bool {
        let Some(queue) = self.commands(gateway) else {
            return false;
        };
        match queue.try_send(Box::new(Outgoing::Desired(payload))) {
            Ok(()) => {}
            Err(flume::TrySendError::Full(item)) => {
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(DESIRED_WAIT, queue.send_async(item)).await;
                });
            }
            Err(flume::TrySendError::Disconnected(_)) => return false,
        }
        true
    }

    /// Whether `device` has a live connection on this node.
    pub fn is_connected(&self, device: &str) -> bool {
        self.live.lock().is_ok_and(|live| live.contains_key(device))
    }
}
