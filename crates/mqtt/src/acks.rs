//! Measurement messages of one connection that are queued for the writer but not yet
//! acknowledged. A connection does not wait for one message's commit before reading the next:
//! a gateway with several QoS 1 messages in flight then has them all in the same or the next
//! group commit instead of one per commit, and the connection parses while the writer writes.
//! PUBACKs still go out only after the commit, and in the order the PUBLISH packets came
//! (MQTT 3.1.1 §4.6): the writer commits jobs in queue order, and the oldest is awaited first.

use std::collections::VecDeque;
use std::num::NonZeroU16;

use devicecloud_engine::ingest::{IngestError, Receipt};

/// Messages a connection may have waiting for their commit; at this many it stops reading its
/// socket until the oldest is committed (back-pressure, and a bound on the memory a gateway
/// can make the service hold).
pub(crate) const MAX_UNACKED: usize = 32;

/// One message waiting for its acknowledgement.
#[derive(Debug)]
struct Unacked {
    /// The QoS 1 packet identifier to acknowledge; `None` for QoS 0.
    packet_id: Option<NonZeroU16>,
    /// The commit to wait for; `None` when there is nothing to wait for (a rejected message is
    /// acknowledged, but only after the ones before it).
    receipt: Option<Receipt>,
}

/// The connection's unacknowledged messages, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Acks(VecDeque<Unacked>);

impl Acks {
    pub(crate) fn push(&mut self, packet_id: Option<NonZeroU16>, receipt: Option<Receipt>) {
        self.0.push_back(Unacked { packet_id, receipt });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn is_full(&self) -> bool {
        self.0.len() >= MAX_UNACKED
    }

    /// Waits for the oldest message's commit and removes it; returns its packet identifier to
    /// acknowledge (`None` for QoS 0). Never resolves while empty. Cancel-safe: the message
    /// is removed only in the poll that sees its commit.
    pub(crate) async fn oldest_committed(&mut self) -> Result<Option<NonZeroU16>, IngestError> {
        let Some(oldest) = self.0.front_mut() else {
            return std::future::pending().await;
        };
        if let Some(receipt) = oldest.receipt.as_mut() {
            receipt.await?;
        }
        Ok(self.0.pop_front().and_then(|done| done.packet_id))
    }
}
