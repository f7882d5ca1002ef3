//! Assets archived while their gateways stay connected: a connection remembers its assets'
//! ids, and must forget an archived one before its next message, or that message would still
//! reach the archived device. Rather than a channel per connection, a count of archivings that
//! every connection compares with the one it last saw (one atomic load per message when
//! nothing was archived) and the last [`KEPT`] archivings to look its own up in.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Archivings kept for connections to look up; one further behind forgets all its assets.
const KEPT: usize = 4096;

/// The archivings of assets on this node (told by any node).
#[derive(Debug, Default)]
pub struct ArchivedAssets {
    count: AtomicU64,
    /// (archiving number, gateway, asset), oldest first.
    recent: Mutex<VecDeque<(u64, String, String)>>,
}

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

impl ArchivedAssets {
    /// Records that `asset` of `gateway` was archived.
    pub fn record(&self, gateway: &str, asset: &str) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let number = self.count.load(Ordering::SeqCst) + 1;
        recent.push_back((number, gateway.to_string(), asset.to_string()));
        if recent.len() > KEPT {
            recent.pop_front();
        }
        self.count.store(number, Ordering::SeqCst);
    }

    /// What the connection of `gateway`, which last looked at archiving `seen`, must forget,
    /// and the archiving to remember having looked at.
    pub fn since(&self, gateway: &str, seen: u64) -> (Forget, u64) {
        if self.count.load(Ordering::SeqCst) == seen {
            return (Forget::Nothing, seen);
        }
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.count.load(Ordering::SeqCst);
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

    /// The count a new connection starts from.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_learns_which_of_its_assets_were_archived() {
        let archived = ArchivedAssets::default();
        let start = archived.count();
        assert_eq!(archived.since("gw", start), (Forget::Nothing, start));
        archived.record("gw", "a1");
        archived.record("other", "b1");
        let (forget, seen) = archived.since("gw", start);
        assert_eq!(forget, Forget::Assets(vec!["a1".into()]));
        assert_eq!(archived.since("gw", seen), (Forget::Nothing, seen));
        for i in 0..KEPT + 1 {
            archived.record("other", &format!("x{i}"));
        }
        assert_eq!(archived.since("gw", seen).0, Forget::All);
    }
}
