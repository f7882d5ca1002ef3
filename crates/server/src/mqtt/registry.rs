//! The live gateway connections of this node, by device id: a second connection of the same
//! gateway takes over from the first (device-protocol §1), and a rotated token or an archived
//! device ends the connection at once (contract §2).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;

/// Why a connection is told to end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kick {
    /// A new connection of the same gateway replaced it.
    TakenOver,
    /// Its credentials stopped being valid (token rotated, device archived).
    Revoked,
}

/// A live connection: its id and where it is told to end.
type Live = (u64, watch::Sender<Option<Kick>>);

#[derive(Debug, Default)]
pub struct GatewayRegistry {
    next_id: AtomicU64,
    live: Mutex<HashMap<String, Live>>,
}

impl GatewayRegistry {
    /// Registers a connection of `device`; an earlier one is told it was taken over. Returns
    /// the connection's id and where it learns that it must end.
    pub fn register(&self, device: &str) -> (u64, watch::Receiver<Option<Kick>>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = watch::channel(None);
        if let Ok(mut live) = self.live.lock()
            && let Some((_, previous)) = live.insert(device.to_string(), (id, tx))
        {
            let _ = previous.send(Some(Kick::TakenOver));
        }
        (id, rx)
    }

    /// Forgets a connection that ended, unless a newer one already took its place.
    pub fn unregister(&self, device: &str, id: u64) {
        if let Ok(mut live) = self.live.lock()
            && live.get(device).is_some_and(|(current, _)| *current == id)
        {
            live.remove(device);
        }
    }

    /// Ends the live connection of `device`, if any.
    pub fn revoke(&self, device: &str) {
        if let Ok(mut live) = self.live.lock()
            && let Some((_, tx)) = live.remove(device)
        {
            let _ = tx.send(Some(Kick::Revoked));
        }
    }
}
