//! Gateways whose connection ended are written down together: the connectivity event (208,
//! value 0) and `is_connected = 0`. When thousands of connections end at once (a network
//! outage, a load balancer restarting) each writing alone would queue thousands of transactions
//! for the store's one write turn, and those behind the command timeout would fail and leave
//! their gateways shown connected. Here the first connection to end writes its own departure;
//! the ones that end while it writes wait, and the next of them writes all of theirs in a few
//! transactions (group commit). Every caller returns once its departure is written (or its
//! write failed), so a shutdown that waits for its connections also waits for these writes.

use std::sync::Mutex;

use devicecloud_store::devices;
use devicecloud_store::events::NewEvent;
use devicecloud_store::nodes::Abandoned;

use super::{now_parts, record_events};
use crate::event_types;
use crate::state::AppState;

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
    /// Writes `departure`, together with any that came meanwhile; returns once it is written.
    pub async fn record(&self, state: &AppState, departure: Departure) {
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.push(departure);
        }
        // First come, first served: whoever holds the turn takes everything waiting, so once
        // this caller has the turn its departure is either written or in its hands.
        let _turn = self.writer.lock().await;
        let batch = self
            .waiting
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default();
        for chunk in batch.chunks(CHUNK) {
            write(state, chunk).await;
        }
    }
}

/// The event first, then the status: whoever sees a gateway disconnected also finds the event.
/// Event 208 with value 0: the gateway's connection was lost.
fn loss<'a>(id_group: &'a str, id: &'a str, now: i64) -> NewEvent<'a> {
    NewEvent {
        id_group,
        source_device: id,
        from_device: Some(0),
        event_type: event_types::CONNECTIVITY,
        occurred_at: now,
        value: "0",
        datatype: None,
        value_description: None,
    }
}

async fn write(state: &AppState, departures: &[Departure]) {
    let now = now_parts().0;
    let events: Vec<NewEvent> = departures
        .iter()
        .filter(|d| d.event)
        .map(|d| loss(&d.id_group, &d.id, now))
        .collect();
    if !events.is_empty()
        && let Err(e) = record_events(state, &state.writer, &events, now).await
    {
        tracing::warn!(error = %e, count = events.len(), "cannot record connection losses");
    }
    let ids: Vec<&str> = departures.iter().map(|d| d.id.as_str()).collect();
    // A gateway that already has a new connection on this node stays connected.
    let gone = |id: &str| !state.gateways.is_connected(id);
    if let Err(e) = devices::disconnected(&state.writer, &ids, &state.node_id, now, &gone).await {
        let serials: Vec<&str> = departures.iter().map(|d| d.serial.as_str()).collect();
        tracing::warn!(error = %e, gateways = ?serials, "cannot mark gateways disconnected");
    }
}

/// Records the loss (event 208, value 0) of gateways another node held when its lease ran out,
/// already marked disconnected (`store::nodes::abandoned`).
pub async fn abandoned(state: &AppState, gateways: &[Abandoned]) {
    let now = now_parts().0;
    let events: Vec<NewEvent> = gateways
        .iter()
        .map(|g| loss(&g.id_group, &g.id_physical_device, now))
        .collect();
    if let Err(e) = record_events(state, &state.writer, &events, now).await {
        tracing::warn!(error = %e, count = events.len(), "cannot record the connection losses of a node that is gone");
    }
}
