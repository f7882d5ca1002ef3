//! What the gateway engine works with, and nothing more: the two transports (MQTT, and HTTP for
//! gateways that cannot speak MQTT) hand it to every [`super::Gateway`] method.

use std::sync::Arc;

use devicecloud_store::Db;

use super::departures::Departures;
use super::registry::GatewayRegistry;
use super::rejections::RejectionLog;
use crate::ingest::IngestQueue;
use crate::stream::LiveFeed;
use crate::twins::reports::ReportQueue;
use crate::webhooks::WebhookHub;

/// The gateway engine's context, built once by the composition root and shared behind an `Arc`.
pub struct Context {
    /// The pool of gateway messages (statements bounded by the query timeout).
    pub db: Db,
    /// The background writers' pool: connection losses and rejections are written there, apart
    /// from the messages that wait for their answer.
    pub writer: Db,
    /// This node's name among the nodes sharing the store (written as a gateway's holder).
    pub node_id: String,
    /// Most child devices one gateway may have (docs/operations.md, "Limits").
    pub assets_per_gateway: usize,
    /// Most datatypes (series) one device may have.
    pub datatypes_per_device: usize,
    /// Where measurements are queued for the ingest writers.
    pub ingest: IngestQueue,
    /// Where twin reports are queued for their writer.
    pub twin_reports: ReportQueue,
    /// What this node commits, for the live stream's clients.
    pub stream: Arc<LiveFeed>,
    /// The webhook routes every recorded event is matched against.
    pub webhooks: Arc<WebhookHub>,
    /// The live gateway connections of this node.
    pub gateways: Arc<GatewayRegistry>,
    /// Ended connections, written down together.
    pub departures: Departures,
    /// Rejection events, coalesced per minute.
    pub rejections: RejectionLog,
    /// The alarm rules, told when a gateway connects here.
    pub alarms: crate::alarms::Alarms,
}
