//! The live gateway connections of this node, by device id: a second connection of the same gateway
//! takes over from the first (docs/gateway-protocol.md, "Transport"), a rotated token or an
//! archived device ends the connection at once (docs/api.md, "Rights"), and commands reach the live
//! connection through its queue (docs/gateway-protocol.md, "Commands").

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::oneshot;

use crate::commands::Outbound;

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
    commands: flume::Sender<Box<Outbound>>,
}

/// What a connection receives when it registers.
#[derive(Debug)]
pub struct Registration {
    /// The connection's id, for [`GatewayRegistry::unregister`].
    pub id: u64,
    /// Where it learns that it must end (closed without a kick: it was forgotten).
    pub kicked: oneshot::Receiver<Kick>,
    /// Command requests to publish to the gateway.
    pub commands: flume::Receiver<Box<Outbound>>,
}

#[derive(Debug, Default)]
pub struct GatewayRegistry {
    next_id: AtomicU64,
    live: Mutex<HashMap<String, Live>>,
    archived: ArchivedAssets,
}

/// Assets archived while their gateways stay connected: a connection remembers its assets'
/// ids, and must forget an archived one before its next message, or that message would still
/// reach the archived device. Rather than a channel per connection, a count of archivings that
/// every connection compares with the one it last saw (one atomic load per message when
/// nothing was archived) and the last [`ARCHIVED_KEPT`] archivings to look its own up in.
#[derive(Debug, Default)]
struct ArchivedAssets {
    count: AtomicU64,
    recent: Mutex<std::collections::VecDeque<(u64, String, String)>>,
}

/// Archivings kept for connections to look up; one further behind forgets all its assets.
const ARCHIVED_KEPT: usize = 4096;

/// What a connection must forget of its assets.
#[derive(Debug, PartialEq, Eq)]
pub enum Forget {
    /// Nothing was archived since it last looked.
    Nothing,
    /// These assets of it were archived.
    Assets(Vec<String>),
    /// It is too far behind to tell: every asset (they are found again in the store).
    All,
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

    /// Records that `asset` of `gateway` was archived (through any node).
    pub fn asset_archived(&self, gateway: &str, asset: &str) {
        let mut recent = self.archived.recent.lock().unwrap_or_else(|e| e.into_inner());
        let number = self.archived.count.load(Ordering::SeqCst) + 1;
        recent.push_back((number, gateway.to_string(), asset.to_string()));
        if recent.len() > ARCHIVED_KEPT {
            recent.pop_front();
        }
        self.archived.count.store(number, Ordering::SeqCst);
    }

    /// What the connection of `gateway`, which last looked at archiving `seen`, must forget,
    /// and the archiving to remember having looked at.
    pub fn archived_since(&self, gateway: &str, seen: u64) -> (Forget, u64) {
        let now = self.archived.count.load(Ordering::SeqCst);
        if now == seen {
            return (Forget::Nothing, now);
        }
        let recent = self.archived.recent.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.archived.count.load(Ordering::SeqCst);
        if recent.front().is_some_and(|(first, ..)| *first > seen + 1) {
            return (Forget::All, now);
        }
        let assets = recent
            .iter()
            .filter(|(number, owner, _)| *number > seen && owner == gateway)
            .map(|(_, _, asset)| asset.clone())
            .collect();
        (Forget::Assets(assets), now)
    }

    /// The archiving count a new connection starts from.
    pub fn archived_count(&self) -> u64 {
        self.archived.count.load(Ordering::SeqCst)
    }

    /// Where commands for `device` go, `None` when it has no live connection on this node.
    pub fn commands(&self, device: &str) -> Option<flume::Sender<Box<Outbound>>> {
        self.live.lock().ok()?.get(device).map(|l| l.commands.clone())
    }

    /// Whether `device` has a live connection on this node.
    pub fn is_connected(&self, device: &str) -> bool {
        self.live.lock().is_ok_and(|live| live.contains_key(device))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_learns_which_of_its_assets_were_archived() {
        let registry = GatewayRegistry::default();
        let start = registry.archived_count();
        assert_eq!(registry.archived_since("gw", start), (Forget::Nothing, start));
        registry.asset_archived("gw", "a1");
        registry.asset_archived("other", "b1");
        let (forget, seen) = registry.archived_since("gw", start);
        assert_eq!(forget, Forget::Assets(vec!["a1".into()]));
        assert_eq!(registry.archived_since("gw", seen), (Forget::Nothing, seen));
        for i in 0..ARCHIVED_KEPT + 1 {
            registry.asset_archived("other", &format!("x{i}"));
        }
        assert_eq!(registry.archived_since("gw", seen).0, Forget::All);
    }
}
