//! Event codes the cloud records itself (device-protocol §10). Gateways report their own codes;
//! the catalogue served by the API describes both.

/// Cloud connectivity change; value 0 connection lost, 1 Wi-Fi, 2 cellular, 3 Ethernet.
pub const CONNECTIVITY: i64 = 208;
/// Data session of a GO module; value 1 opened, 0 closed.
pub const DATA_SESSION: i64 = 209;
/// Hello with a module kind other than the provisioned one; value: the reported kind.
pub const KIND_MISMATCH: i64 = 211;
/// A message refused whole; value: the topic, description: why.
pub const MESSAGE_REJECTED: i64 = 212;
