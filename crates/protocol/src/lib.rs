//! The gateway protocol v1 (`docs/gateway-protocol.md`): the MQTT topics, the messages a
//! gateway publishes and the command requests the cloud publishes, parsed and validated.
//!
//! Shared by the server (parses what gateways send, builds command requests) and the simulator
//! (builds what gateways send, parses command requests). Pure and synchronous: no I/O, no clock
//! (callers pass `now`). A message is accepted whole or rejected whole with a [`Rejection`] whose
//! [`RejectReason`] labels the metric and whose description becomes the event text
//! (docs/gateway-protocol.md, "Messages" and "Event codes the cloud records").
//! No input can make it panic or recurse without bound.

// Input-derived data must never panic: these lints keep that promise checkable.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing,
        clippy::unreachable,
        clippy::todo
    )
)]

pub mod commands;
pub mod firmware;
pub mod kinds;
pub mod messages;
pub mod rejection;
pub mod timestamp;
pub mod topics;
pub mod twin;

mod json;

pub use commands::{CommandMethod, CommandRequest, ModbusWrite, parse_modbus_writes, zwave_exclude};
pub use kinds::{ConnectionKind, ModuleKind};
pub use messages::{
    Asset, CommandResponse, Event, Hello, MAX_BATCH, Measurement, Power, PowerState, devices_payload, events_payload,
    measurements_payload, parse_devices, parse_events, parse_hello, parse_measurements, parse_power, parse_response,
};
pub use rejection::{RejectReason, Rejection};
pub use timestamp::Timestamp;
pub use topics::{COMMANDS_FILTER, GatewayTopic, command_topic, is_valid_request_id, subscription_allowed};
