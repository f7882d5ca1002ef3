//! Gateways whose connection ended are written down together: the connectivity event (208,
//! value 0) and `is_connected = 0`. When thousands of connections end at once (a network
//! outage, a load balancer restarting) each writing alone would queue thousands of transactions
//! for the store's one write turn, and those behind the command timeout would fail and leave
//! their gateways shown connected. Here the first connection to end writes its own departure;
//! the ones that end while it writes wait, and the next of them writes all of theirs in a few
//! transactions (group commit). Every caller returns once its departure is written (or its
//! write failed), so a shutdown that waits for its connections also waits for these writes.
//!
//! The queue knows nothing of how a batch is written (`gateway::losses` writes it), so the
//! service state that holds it does not depend on what it writes with.

use std::sync::Mutex;

/// Departures written per transaction: a batch holds the write turn for a few milliseconds.
const CHUNK: usize = 500;

/// One connection that ended.
#[derive(Debug)]
pub struct Departure {
    pub id: String,
    pub id_group: String,
    pub serial: String,
    /// Whether to record the connectivity event (not after a power-off message, which recorded
    /// its own).
    pub event: bool,
}

/// Departures waiting to be written, and the turn to write them.
#[derive(Debug, Default)]
pub struct Departures {
    waiting: Mutex<Vec<Departure>>,
    writer: tokio::sync::Mutex<()>,
}

impl Departures {
    /// Queues `departure` and waits for the turn to write: the batch then holds it, with every
    /// departure that came meanwhile, until it is dropped. The caller writes the batch's
    /// [`Batch::chunks`] before dropping it, so it returns once its departure is written.
    pub async fn queue(&self, departure: Departure) -> Batch<'_> {
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.push(departure);
        }
        // First come, first served: whoever holds the turn takes everything waiting, so once
        // this caller has the turn its departure is either written or in its hands.
        let turn = self.writer.lock().await;
        let departures = self
            .waiting
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default();
        Batch {
            _turn: turn,
            departures,
        }
    }
}

/// Departures to write now, and the turn to write them (until dropped).
pub struct Batch<'a> {
    _turn: tokio::sync::MutexGuard<'a, ()>,
    departures: Vec<Departure>,
}

impl Batch<'_> {
    /// The departures, [`CHUNK`] a transaction.
    pub fn chunks(&self) -> std::slice::Chunks<'_, Departure> {
        self.departures.chunks(CHUNK)
    }
}
