//! The live streams each account holds open on this node (docs/operations.md, "Limits":
//! `streams_per_account`). Every stream costs a cursor, a task and a connection for as long as
//! it lasts, so one account cannot open them without bound; a slot is held by the stream's
//! client and given back when it ends, however it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Open streams by account id.
#[derive(Debug, Default)]
pub struct AccountStreams {
    open: Mutex<HashMap<String, usize>>,
}

/// The account already holds `max` streams.
#[derive(Debug, thiserror::Error)]
#[error("This account already holds {max} open streams; close one first.")]
pub struct TooManyStreams {
    pub max: usize,
}

impl AccountStreams {
    /// A slot for one more stream of `account`, unless it holds `max` already.
    pub fn reserve(self: &Arc<Self>, account: &str, max: usize) -> Result<StreamSlot, TooManyStreams> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(account.to_string()).or_default();
        if *count >= max {
            return Err(TooManyStreams { max });
        }
        *count += 1;
        Ok(StreamSlot {
            streams: Arc::clone(self),
            account: account.to_string(),
        })
    }
}

/// One open stream of an account, given back when dropped.
#[derive(Debug)]
pub struct StreamSlot {
    streams: Arc<AccountStreams>,
    account: String,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.streams.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&self.account) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.account);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_holds_at_most_max_and_gets_its_slots_back() {
        let streams = Arc::new(AccountStreams::default());
        let held: Vec<StreamSlot> = (0..3).map(|_| streams.reserve("ann", 3).unwrap()).collect();
        assert!(streams.reserve("ann", 3).is_err());
        assert!(streams.reserve("bob", 3).is_ok());
        drop(held);
        let again: Vec<StreamSlot> = (0..3).map(|_| streams.reserve("ann", 3).unwrap()).collect();
        assert_eq!(again.len(), 3);
    }
}
