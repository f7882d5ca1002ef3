//! The connection losses of gateways, written down: the connectivity event (208, value 0) and
//! `is_connected = 0`, for departures from this node (`departures` batches them) and for the
//! gateways of a node whose lease ran out.

use devicecloud_store::devices;
use devicecloud_store::events::NewEvent;
use devicecloud_store::nodes::Abandoned;

use super::Context;
use super::departures::Departure;
use super::{now_parts, record_events};
use crate::event_types;

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

/// Writes a batch of departures from this node.
pub async fn write(ctx: &Context, departures: &[Departure]) {
    let now = now_parts().0;
    let events: Vec<NewEvent> = departures
        .iter()
        .filter(|d| d.event)
        .map(|d| loss(&d.id_group, &d.id, now))
        .collect();
    if !events.is_empty()
        && let Err(e) = record_events(ctx, &ctx.writer, &events, now).await
    {
        tracing::warn!(error = %e, count = events.len(), "cannot record connection losses");
    }
    let ids: Vec<&str> = departures.iter().map(|d| d.id.as_str()).collect();
    // A gateway that already has a new connection on this node stays connected.
    let gone = |id: &str| !ctx.gateways.is_connected(id);
    if let Err(e) = devices::disconnected(&ctx.writer, &ids, &ctx.node_id, now, &gone).await {
        let serials: Vec<&str> = departures.iter().map(|d| d.serial.as_str()).collect();
        tracing::warn!(error = %e, gateways = ?serials, "cannot mark gateways disconnected");
    }
}

/// Records the loss (event 208, value 0) of gateways another node held when its lease ran out,
/// already marked disconnected (`store::nodes::abandoned`).
pub async fn abandoned(ctx: &Context, gateways: &[Abandoned]) {
    let now = now_parts().0;
    let events: Vec<NewEvent> = gateways
        .iter()
        .map(|g| loss(&g.id_group, &g.id_physical_device, now))
        .collect();
    if let Err(e) = record_events(ctx, &ctx.writer, &events, now).await {
        tracing::warn!(error = %e, count = events.len(), "cannot record the connection losses of a node that is gone");
    }
}
