//! Event codes the cloud records itself (docs/gateway-protocol.md, "Event codes the cloud
//! records"). Gateways report their own codes; the catalogue served by the API describes both.

/// Cloud connectivity change; value 0 connection lost, 1 Wi-Fi, 2 cellular, 3 Ethernet.
pub const CONNECTIVITY: i64 = 208;
/// Data session of a GO module; value 1 opened, 0 closed.
pub const DATA_SESSION: i64 = 209;
/// Hello with a module kind other than the provisioned one; value: the reported kind.
pub const KIND_MISMATCH: i64 = 211;
/// A message refused whole; value: the topic, description: why.
pub const MESSAGE_REJECTED: i64 = 212;
/// A command sent through the API; value: the method, description: the outcome (the device's
/// status or `offline`, `timeout`, `disconnected`, `invalid response`, `not supported`), the
/// caller and the request id.
pub const COMMAND: i64 = 213;
/// A webhook set inactive by the service (docs/api.md, "Failing webhooks"), recorded on the
/// webhook (`source_device` is its id); value: the reason, `retry_window` or `backlog`.
pub const WEBHOOK_DISABLED: i64 = 214;
/// A device's desired configuration changed through the API (docs/api.md, "Twins"); value: the
/// new desired version.
pub const DESIRED_CHANGED: i64 = 215;
/// A device reported its configuration (docs/gateway-protocol.md, "Twin"); value: the desired
/// version it applied, or empty.
pub const CONFIGURATION_REPORTED: i64 = 216;
/// A job started its first execution (docs/api.md, "Jobs"), recorded on each group it targets
/// (`source_device` is the group's id); value: the job's id, description: its label.
pub const JOB_STARTED: i64 = 217;
/// A job ended (every execution ended); value: the job's id, description: its label.
pub const JOB_FINISHED: i64 = 218;
/// A gateway came back from a firmware job's update on the image's version (docs/api.md,
/// "Firmware: update"); value: the new version.
pub const FIRMWARE_UPDATED: i64 = 219;
/// A gateway came back from a firmware job's update on another version than the image's (a
/// rollback); value: the version it runs.
pub const FIRMWARE_ROLLED_BACK: i64 = 220;
/// A gateway could not install an image (docs/gateway-protocol.md, "Firmware update"),
/// published by the gateway; value: the cause.
pub const FIRMWARE_FAILED: i64 = 221;
/// An alarm rule raised an alarm on the device (docs/api.md, "Alarms"); value: its severity,
/// description: the rule's label.
pub const ALARM_RAISED: i64 = devicecloud_store::alarms::RAISED;
/// An alarm was acknowledged; value: its severity.
pub const ALARM_ACKNOWLEDGED: i64 = devicecloud_store::alarms::ACKNOWLEDGED;
/// An alarm cleared; value: its severity.
pub const ALARM_CLEARED: i64 = devicecloud_store::alarms::CLEARED;
/// Z-wave node exclusion outcome, reported by the gateway on the node (docs/gateway-protocol.md,
/// "Commands"): value 0 excluded, 1 failed, 2 timed out.
pub const ZWAVE_EXCLUSION: i64 = 420;
