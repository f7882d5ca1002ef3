//! The catalogue of event codes, labels and value meanings (docs/gateway-protocol.md, "Event codes
//! the cloud records"; docs/api.md, "Events"): it names the codes the cloud records and those
//! gateways are documented to send, and gives every event record its `event_type_label`,
//! `event_type_description`, `event_value_label` and `event_value_description`.

use devicecloud_store::events::EventRow;
use serde_json::{Map, Value, json};

use crate::event_types;

/// One known value of an event type.
#[derive(Clone, Copy, Debug)]
pub struct EventValue {
    pub value: &'static str,
    pub label: &'static str,
    pub description: &'static str,
}

/// One event code.
#[derive(Clone, Copy, Debug)]
pub struct EventType {
    pub code: i64,
    pub label: &'static str,
    pub description: &'static str,
    /// 0 recorded by the cloud, 1 sent by devices, `None` both.
    pub from_device: Option<i64>,
    pub values: &'static [EventValue],
}

const fn v(value: &'static str, label: &'static str, description: &'static str) -> EventValue {
    EventValue {
        value,
        label,
        description,
    }
}

/// Why the service set a webhook inactive (`disabled_reason`, and the value of event 214):
/// its deliveries failed for the whole retry window.
pub const REASON_RETRY_WINDOW: &str = "retry_window";
/// Why the service set a webhook inactive: its backlog passed `webhook_backlog_max`.
pub const REASON_BACKLOG: &str = "backlog";
/// Why the service set a webhook inactive: its group was deleted.
pub const REASON_GROUP_DELETED: &str = "group_deleted";

/// Every code the service knows, ordered by code.
pub const CATALOGUE: &[EventType] = &[
    EventType {
        code: event_types::CONNECTIVITY,
        label: "Cloud connectivity changed",
        description: "The module connected to the cloud over a connection kind, or lost its connection.",
        from_device: None,
        values: &[
            v("0", "Disconnected", "The connection to the cloud was lost."),
            v("1", "Wi-Fi", "The module is connected over Wi-Fi."),
            v("2", "Cellular", "The cellular modem connection is in use."),
            v("3", "Ethernet", "The module is connected over Ethernet."),
        ],
    },
    EventType {
        code: event_types::DATA_SESSION,
        label: "Data session",
        description: "A data session of a GO module was opened (module turned on) or closed (turned off).",
        from_device: Some(0),
        values: &[
            v("0", "Closed", "The module was turned off; the session has an end."),
            v("1", "Opened", "The module was turned on; a new session is active."),
        ],
    },
    EventType {
        code: event_types::KIND_MISMATCH,
        label: "Module kind mismatch",
        description: "The module announced a kind other than the one it was provisioned as; the connection was closed. The value is the announced kind.",
        from_device: Some(0),
        values: &[],
    },
    EventType {
        code: event_types::MESSAGE_REJECTED,
        label: "Message rejected",
        description: "A message from the module was refused whole; nothing of it was stored. The value is the topic, the value description says why.",
        from_device: Some(0),
        values: &[],
    },
    EventType {
        code: event_types::COMMAND,
        label: "Command",
        description: "A command sent to the device through the API. The value is the method; the value description gives the outcome (the device's status, or offline, timeout, disconnected, invalid response, not supported), the caller and the request id.",
        from_device: Some(0),
        values: &[],
    },
    EventType {
        code: event_types::WEBHOOK_DISABLED,
        label: "Webhook disabled",
        description: "The service set a webhook inactive and dropped its queued records; the source is the webhook (its id), the value says why, the value description how many records were dropped.",
        from_device: Some(0),
        values: &[
            v(
                REASON_RETRY_WINDOW,
                "Failing for the retry window",
                "Every delivery failed for the whole retry window.",
            ),
            v(
                REASON_BACKLOG,
                "Backlog too large",
                "More records were waiting than the webhook backlog limit allows.",
            ),
            v(
                REASON_GROUP_DELETED,
                "Group deleted",
                "The webhook's group was deleted.",
            ),
        ],
    },
    EventType {
        code: event_types::DESIRED_CHANGED,
        label: "Desired configuration changed",
        description: "The device's desired configuration (its twin) was changed through the API. The value is the new desired version.",
        from_device: Some(0),
        values: &[],
    },
    EventType {
        code: event_types::CONFIGURATION_REPORTED,
        label: "Configuration reported",
        description: "The device reported its configuration (its twin). The value is the desired version it says it applied, or empty.",
        from_device: Some(1),
        values: &[],
    },
    EventType {
        code: event_types::JOB_STARTED,
        label: "Job started",
        description: "A job started its first execution; the source is the group it targets, the value the job's id, the value description its label.",
        from_device: Some(0),
        values: &[],
    },
    EventType {
        code: event_types::JOB_FINISHED,
        label: "Job finished",
        description: "Every execution of a job ended; the source is the group it targets, the value the job's id, the value description its label.",
        from_device: Some(0),
        values: &[],
    },
    EventType {
        code: event_types::FIRMWARE_UPDATED,
        label: "Firmware updated",
        description: "The gateway came back from a firmware job's update running the image's version, which is the value.",
        from_device: Some(0),
        values: &[],
    },
    EventType {
        code: event_types::FIRMWARE_ROLLED_BACK,
        label: "Firmware rolled back",
        description: "The gateway came back from a firmware job's update running another version than the image's (a rollback); the value is the version it runs.",
        from_device: Some(0),
        values: &[],
    },
    EventType {
        code: event_types::FIRMWARE_FAILED,
        label: "Firmware update failed",
        description: "The gateway could not install a firmware image; the value is the cause it gave.",
        from_device: Some(1),
        values: &[],
    },
    EventType {
        code: event_types::ALARM_RAISED,
        label: "Alarm raised",
        description: "An alarm rule matched the device's data (or its silence) and raised an alarm; the value is its severity, the value description the rule's label.",
        from_device: Some(0),
        values: SEVERITIES,
    },
    EventType {
        code: event_types::ALARM_ACKNOWLEDGED,
        label: "Alarm acknowledged",
        description: "An operator acknowledged an alarm of the device; the value is its severity.",
        from_device: Some(0),
        values: SEVERITIES,
    },
    EventType {
        code: event_types::ALARM_CLEARED,
        label: "Alarm cleared",
        description: "An alarm of the device cleared: its rule's clear condition held, a point arrived after a silence, or its rule was disabled or deleted; the value is its severity.",
        from_device: Some(0),
        values: SEVERITIES,
    },
    EventType {
        code: event_types::ZWAVE_EXCLUSION,
        label: "Z-wave node exclusion",
        description: "Outcome of removing a Z-wave node from its gateway, reported on the node.",
        from_device: Some(1),
        values: &[
            v("0", "Excluded", "The node was excluded from the Z-wave network."),
            v("1", "Failed", "The exclusion failed."),
            v("2", "Timed out", "The exclusion timed out: the node did not respond."),
        ],
    },
];

/// The catalogue entry of a code.
pub fn lookup(code: i64) -> Option<&'static EventType> {
    CATALOGUE.iter().find(|t| t.code == code)
}

/// Label and description of an event type; codes outside the catalogue (device-specific ones)
/// are named by their number.
pub fn type_text(code: i64) -> (String, &'static str) {
    match lookup(code) {
        Some(t) => (t.label.to_string(), t.description),
        None => (format!("Device event {code}"), ""),
    }
}

/// Label and description of a value of an event type: the catalogue's where it lists the value,
/// otherwise the value itself and the description recorded with the event (for example why a
/// message was rejected).
pub fn value_text(code: i64, value: &str, recorded: Option<&str>) -> (String, String) {
    let known = lookup(code).and_then(|t| t.values.iter().find(|v| v.value == value));
    match known {
        Some(v) => (v.label.to_string(), recorded.unwrap_or(v.description).to_string()),
        None => (value.to_string(), recorded.unwrap_or_default().to_string()),
    }
}

/// An event record with every field of the specification, in its order.
pub fn event_fields(row: &EventRow) -> Map<String, Value> {
    let (type_label, type_description) = type_text(row.event_type);
    let (value_label, value_description) = value_text(row.event_type, &row.value, row.value_description.as_deref());
    let mut map = Map::new();
    map.insert("id_event".into(), json!(row.id_event));
    map.insert("id_group".into(), json!(row.id_group));
    map.insert("source_device".into(), json!(row.source_device));
    map.insert("from_device".into(), json!(row.from_device));
    map.insert("event_type".into(), json!(row.event_type.to_string()));
    map.insert("event_type_label".into(), json!(type_label));
    map.insert("event_type_description".into(), json!(type_description));
    map.insert("occurred_at".into(), json!(row.occurred_at));
    map.insert("value".into(), json!(row.value));
    map.insert("datatype".into(), json!(row.datatype));
    map.insert("event_value_label".into(), json!(value_label));
    map.insert("event_value_description".into(), json!(value_description));
    map
}

/// The values of the alarm events: an alarm's severity.
const SEVERITIES: &[EventValue] = &[
    v("critical", "Critical", "Service is lost or about to be."),
    v("major", "Major", "Service is badly degraded."),
    v("minor", "Minor", "Service is degraded."),
    v("warning", "Warning", "Something to look at before it gets worse."),
];
