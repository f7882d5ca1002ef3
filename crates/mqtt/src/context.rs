//! What the MQTT transport works with: the gateway engine it hands messages to, the peers it
//! tells of a new connection, and its own admission and packet limit.

use std::sync::Arc;

use devicecloud_engine::admission::Admission;
use devicecloud_engine::{gateway, peers};

/// The MQTT transport's context, built once by the composition root; every connection holds
/// one reference to it.
pub struct Context {
    /// The gateway engine: every message's meaning.
    pub gateway: Arc<gateway::Context>,
    /// Told when a gateway connects here (a connection to another node is taken over).
    pub peers: Arc<peers::Context>,
    /// The places of the listeners: gateway slots, unauthenticated connections, connections
    /// per address.
    pub admission: Arc<Admission>,
    /// Largest MQTT packet accepted, in bytes; a larger one closes the connection.
    pub max_packet_bytes: u32,
}
