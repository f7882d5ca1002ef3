//! The requests a gateway connection published and still waits to see answered. Owned by the
//! connection task, so its end drops every waiter (their callers learn it at once) and no lock
//! is shared between gateways.

use std::collections::HashMap;

use tokio::sync::oneshot;

use super::{Outbound, Reply};

/// Waiting callers of one connection, by request id.
#[derive(Debug, Default)]
pub struct Pending {
    waiting: HashMap<String, oneshot::Sender<Reply>>,
}

impl Pending {
    /// Remembers a request about to be published; `None` when its caller already gave up (it
    /// then need not be published at all). Callers that gave up meanwhile are forgotten here,
    /// which bounds the map by the callers still waiting.
    pub fn insert(&mut self, outbound: Outbound) -> Option<(String, Vec<u8>)> {
        let Outbound {
            request_id,
            payload,
            reply,
        } = outbound;
        self.waiting.retain(|_, waiter| !waiter.is_closed());
        if reply.is_closed() {
            return None;
        }
        self.waiting.insert(request_id.clone(), reply);
        Some((request_id, payload))
    }

    /// Hands an answer to the caller waiting for `request_id`; `false` when no one waits any
    /// more (unknown id, or the caller timed out): the answer is then dropped.
    pub fn resolve(&mut self, request_id: &str, reply: Reply) -> bool {
        let delivered = self
            .waiting
            .remove(request_id)
            .is_some_and(|waiter| waiter.send(reply).is_ok());
        if self.waiting.is_empty() && self.waiting.capacity() > 0 {
            // Idle connections keep no table (architecture: small sessions).
            self.waiting = HashMap::new();
        }
        delivered
    }

    /// How many callers wait.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether no caller waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devicecloud_protocol::CommandResponse;
    use serde_json::json;

    fn outbound(id: &str) -> (Outbound, oneshot::Receiver<Reply>) {
        let (reply, rx) = oneshot::channel();
        let out = Outbound {
            request_id: id.into(),
            payload: b"{}".to_vec(),
            reply,
        };
        (out, rx)
    }

    #[test]
    fn answers_reach_their_caller_only() {
        let mut pending = Pending::default();
        let (a, mut ra) = outbound("a");
        let (b, mut rb) = outbound("b");
        assert!(pending.insert(a).is_some());
        assert!(pending.insert(b).is_some());
        let pong = CommandResponse::success(json!({"data": "pong"}));
        assert!(pending.resolve("b", Ok(pong.clone())));
        assert_eq!(rb.try_recv().unwrap(), Ok(pong));
        assert!(ra.try_recv().is_err());
        assert!(
            !pending.resolve("b", Err("again".into())),
            "an answer is delivered once"
        );
        assert_eq!(pending.len(), 1);
    }

    #[test]
    fn callers_that_gave_up_are_forgotten() {
        let mut pending = Pending::default();
        let (a, ra) = outbound("a");
        pending.insert(a);
        drop(ra);
        let (b, rb) = outbound("b");
        drop(rb);
        assert!(
            pending.insert(b).is_none(),
            "a request nobody waits for is not published"
        );
        assert!(pending.is_empty(), "the abandoned waiter is gone");
        assert!(!pending.resolve("a", Err("late".into())));
    }

    #[test]
    fn dropping_the_table_fails_every_waiter() {
        let mut pending = Pending::default();
        let (a, mut ra) = outbound("a");
        pending.insert(a);
        drop(pending);
        assert!(matches!(ra.try_recv(), Err(oneshot::error::TryRecvError::Closed)));
    }
}
