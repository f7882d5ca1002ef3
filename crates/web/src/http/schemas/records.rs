//! The records the API answers, as the OpenAPI document describes them. The handlers build
//! records as maps (so that `fields` and `expand` apply), so these types only describe them;
//! `crates/server/tests/openapi_answers.rs` checks real answers against the document.
//!
//! Every field of a record may be left out by `fields`, and a record with no field left is `[]`
//! (docs/api.md, "Reading"): the document's modifier `FieldsSelection` makes every field of the
//! records listed in [`RECORDS`] optional and lets each answer be `[]` instead.
#![expect(
    dead_code,
    reason = "the types only describe records that the handlers build as maps"
)]

use serde_json::Value;
use utoipa::ToSchema;

use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};

use super::{Links, collection, with_labels};

/// The component names of the records `fields` applies to.
pub const RECORDS: [&str; 17] = [
    "Group",
    "PhysicalDevice",
    "DataPoint",
    "DownsampledPoint",
    "Event",
    "EventType",
    "DataSession",
    "User",
    "Webhook",
    "WebhookAttempt",
    "WebhookFormatter",
    "Twin",
    "Job",
    "JobExecution",
    "Firmware",
    "AlarmRule",
    "Alarm",
];

/// A group (specification, Groups).
#[derive(ToSchema)]
pub struct Group {
    /// The same as `id_group`.
    id: String,
    id_group: String,
    label: String,
    /// The group type's code, as text: `0` Default, `1` Project, `2` Customer, `3` Site, `4` Fleet.
    r#type: String,
    /// The label of `type`.
    type_label: String,
    subtype: String,
    id_country: Option<String>,
    /// Unix seconds.
    created_at: i64,
    /// Unix seconds; null while the group exists.
    deleted_at: Option<i64>,
    _links: Links,
}

/// A physical device: a gateway, or an asset (sensor, Modbus device, Z-wave node) behind one
/// (specification, Physical devices). Expanded relations (`expand=group,parent,…`) are added
/// after these fields.
#[derive(ToSchema)]
pub struct PhysicalDevice {
    id_physical_device: String,
    serial_hardware: String,
    label: String,
    /// The gateway an asset is behind; null for a gateway.
    id_parent: Option<String>,
    id_group: String,
    /// `gateway`, or the asset's type (`sensor`, `modbus`, `zwave`, `asset`).
    id_device_type: String,
    id_iot_device: Option<String>,
    /// 1 while the gateway holds a live connection.
    is_connected: i64,
    /// Seconds of silence after which the device is late.
    expected_offline_interval: i64,
    /// 0 expected off, 1 expected on.
    expected_live_status: i64,
    device_status: i64,
    /// `wifi`, `cellular`, `ethernet`, or empty.
    connection: String,
    created_at: i64,
    /// Unix seconds of the latest measurement; 0 before the first.
    last_data_at: i64,
    signal: i64,
    commissioned_at: Option<i64>,
    calibrated_at: Option<i64>,
    reconnected_at: Option<i64>,
    platform_software_version: String,
    app_software_version: String,
    archived_serial: Option<String>,
    archived_at: Option<i64>,
    archived_by: Option<String>,
    /// Only in the answer that provisions a gateway: its MQTT password, shown this once.
    device_token: Option<String>,
    _links: Links,
}

/// A raw measurement (specification, Data).
#[derive(ToSchema)]
pub struct DataPoint {
    id_container_data_latest: String,
    id_group: String,
    datatype: i64,
    source_device: String,
    timestamp_seconds: i64,
    microseconds: i64,
    value: f64,
}

/// A bucket of a series (specification, Downsampled data): min, max, average and count of the
/// points from `timestamp_seconds` on; for a short interval, one raw point per bucket.
#[derive(ToSchema)]
pub struct DownsampledPoint {
    id_container_data_latest: String,
    id_group: String,
    datatype: i64,
    source_device: String,
    /// The bucket's start: whole seconds, or a fraction for a data session's 500 buckets.
    timestamp_seconds: f64,
    min_val: f64,
    max_val: f64,
    avg_val: f64,
    count_val: i64,
}

/// An event of a device, with its catalogue texts (specification, Events).
#[derive(ToSchema)]
pub struct Event {
    id_event: i64,
    id_group: String,
    source_device: String,
    from_device: Option<i64>,
    /// The event type's code, as text.
    event_type: String,
    event_type_label: String,
    event_type_description: String,
    occurred_at: i64,
    value: String,
    datatype: Option<i64>,
    event_value_label: String,
    event_value_description: String,
}

/// An event type of the catalogue and the values it takes.
#[derive(ToSchema)]
pub struct EventType {
    event_type: String,
    label: String,
    description: String,
    from_device: Option<i64>,
    values: Vec<EventValue>,
}

/// One value an event type takes.
#[derive(ToSchema)]
pub struct EventValue {
    value: String,
    label: String,
    description: String,
}

/// A data session of a GO module (specification, Data sessions).
#[derive(ToSchema)]
pub struct DataSession {
    id_data_session: String,
    id_group: String,
    id_person: Option<String>,
    label: String,
    /// Unix seconds.
    start: i64,
    /// Unix seconds; null while the session is open.
    end: Option<i64>,
    created_at: i64,
    created_by: Option<String>,
    updated_at: i64,
    updated_by: Option<String>,
    archived_at: Option<i64>,
    datapoint_count: i64,
    #[schema(rename = "isIngestionFinished")]
    is_ingestion_finished: bool,
    #[schema(rename = "isArchived")]
    is_archived: bool,
    _links: Links,
}

/// An account (docs/api.md, "Accounts").
#[derive(ToSchema)]
pub struct User {
    id_user: String,
    username: String,
    is_admin: bool,
    disabled: bool,
    created_at: i64,
}

/// A webhook (docs/api.md, "Webhooks").
#[derive(ToSchema)]
pub struct Webhook {
    id: String,
    id_webhook: String,
    id_group: String,
    label: String,
    /// `measurements` or `events`.
    forwarding_type: String,
    /// `json` or `ndjson`.
    formatter: String,
    url: String,
    /// Masked: the scheme and at most the last four characters; null when none is set.
    authorization: Option<String>,
    /// 1 active, 0 inactive.
    is_active: i64,
    /// Why the service set the webhook inactive (`retry_window`, `backlog`, `group_deleted`);
    /// null otherwise.
    disabled_reason: Option<String>,
    /// When the service set it inactive (Unix seconds); null otherwise.
    disabled_at: Option<i64>,
    created_at: i64,
    updated_at: i64,
    created_by: Option<String>,
    /// Only in the answer that creates the webhook: the signing key, shown this once.
    secret: Option<String>,
    /// With `expand=backlog`.
    backlog: Option<Backlog>,
    _links: Links,
}

/// A device's twin (docs/api.md, "Twins").
#[derive(ToSchema)]
pub struct Twin {
    id_physical_device: String,
    id_group: String,
    /// The configuration the device should have (a JSON object).
    desired: std::collections::BTreeMap<String, Value>,
    /// The configuration the device said it has (a JSON object).
    reported: std::collections::BTreeMap<String, Value>,
    /// Every desired key, recursively, whose value differs from the reported one or is missing
    /// there.
    delta: std::collections::BTreeMap<String, Value>,
    /// Changes of `desired` so far (0 before the first).
    version: i64,
    /// The desired version the device last said it applied; null before.
    reported_version: Option<i64>,
    /// Unix seconds; null before the first change.
    desired_updated_at: Option<i64>,
    /// Unix seconds; null before the first report.
    reported_updated_at: Option<i64>,
    /// 1 when `delta` is empty, else 0.
    in_sync: i64,
    _links: Links,
}

/// A job over many devices (docs/api.md, "Jobs").
#[derive(ToSchema)]
pub struct Job {
    id_job: String,
    label: String,
    /// As given: `{"command": "<method>", "params": {…}}`, `{"twin": {…}}` or `{"firmware": "<id>"}`.
    operation: std::collections::BTreeMap<String, Value>,
    /// As given: `{"filter": {…}}`.
    target: std::collections::BTreeMap<String, Value>,
    /// `queued`, `in_progress`, `succeeded`, `failed`, `aborted`, `cancelled` or `expired`.
    status: String,
    /// Executions: one per targeted device.
    total: i64,
    pending: i64,
    in_progress: i64,
    succeeded: i64,
    failed: i64,
    timed_out: i64,
    cancelled: i64,
    created_at: i64,
    /// The account that created it.
    created_by: Option<String>,
    /// When the first execution started; null before.
    started_at: Option<i64>,
    /// When the last execution ended; null before.
    finished_at: Option<i64>,
    rate_per_minute: i64,
    max_failures_percent: i64,
    timeout_s: i64,
    /// Past it, executions still pending time out.
    expires_at: i64,
    _links: Links,
}

/// One job's execution on one device.
#[derive(ToSchema)]
pub struct JobExecution {
    id_physical_device: String,
    /// `pending`, `in_progress`, `succeeded`, `failed`, `timed_out` or `cancelled`.
    status: String,
    attempts: i64,
    started_at: Option<i64>,
    finished_at: Option<i64>,
    /// The device's answer `{status, payload}`; null when it gave none.
    result: Option<std::collections::BTreeMap<String, Value>>,
}

/// An alarm rule (docs/api.md, "Alarms").
#[derive(ToSchema)]
pub struct AlarmRule {
    id_alarm_rule: String,
    id_group: String,
    label: String,
    /// `critical`, `major`, `minor` or `warning`.
    severity: String,
    /// A CEL expression over `value`, `previous`, `rate`, `datatype`, `serial`; null for an
    /// inactivity rule.
    condition: Option<String>,
    /// Null: the negation of `condition`.
    clear_condition: Option<String>,
    /// Seconds without a point that raise the alarm; null for a condition.
    inactivity_s: Option<i64>,
    /// The datatype looked at; null: every datatype.
    datatype: Option<i64>,
    /// The device looked at; null: every device of the group.
    source_device: Option<String>,
    /// Seconds the condition must hold on every point before the alarm is raised.
    for_s: i64,
    /// 1 or 0.
    is_active: i64,
    created_at: i64,
    updated_at: i64,
    created_by: Option<String>,
    _links: Links,
}

/// An alarm (docs/api.md, "Alarms").
#[derive(ToSchema)]
pub struct Alarm {
    id_alarm: String,
    id_alarm_rule: String,
    id_group: String,
    source_device: String,
    /// Null for an inactivity alarm over every datatype.
    datatype: Option<i64>,
    severity: String,
    /// `active`, `acknowledged` or `cleared`.
    status: String,
    raised_at: i64,
    acknowledged_at: Option<i64>,
    /// The account that acknowledged it.
    acknowledged_by: Option<String>,
    cleared_at: Option<i64>,
    /// The value of the last matching point; null for an inactivity.
    value: Option<f64>,
    /// Matching points while it was open.
    count: i64,
    _links: Links,
}

/// What a webhook has not delivered yet.
#[derive(ToSchema)]
pub struct Backlog {
    /// Records queued for the next batches.
    queued_items: i64,
    /// Batches being retried.
    pending_deliveries: i64,
    /// Batches given up after the retry window.
    failed_deliveries: i64,
}

/// One delivery attempt of a webhook.
#[derive(ToSchema)]
pub struct WebhookAttempt {
    id_attempt: i64,
    id_webhook: String,
    id_delivery: String,
    attempted_at: i64,
    /// The receiver's HTTP status; null when no answer came.
    status_code: Option<i64>,
    duration_ms: i64,
    error: Option<String>,
    item_count: i64,
    /// 1 for the first attempt of a batch, 2 for its first retry, …
    attempt: i64,
}

/// A body format webhooks can deliver in.
#[derive(ToSchema)]
pub struct WebhookFormatter {
    name: String,
    description: String,
    content_type: String,
}

collection!(GroupCollection, Group);
collection!(PhysicalDeviceCollection, PhysicalDevice, |e| with_device_statuses(
    with_labels(e)
));
collection!(DataPointCollection, DataPoint);
collection!(DownsampledPointCollection, DownsampledPoint);
collection!(EventCollection, Event);
collection!(EventTypeCollection, EventType);
collection!(DataSessionCollection, DataSession, with_labels);
collection!(UserCollection, User);
collection!(WebhookCollection, Webhook);
collection!(WebhookAttemptCollection, WebhookAttempt);
collection!(WebhookFormatterCollection, WebhookFormatter);
collection!(TwinCollection, Twin);
collection!(JobCollection, Job);
collection!(JobExecutionCollection, JobExecution);
collection!(FirmwareCollection, Firmware);
collection!(AlarmRuleCollection, AlarmRule);
collection!(AlarmCollection, Alarm);

/// The device collection's `deviceStatuses`: the names of `expected_live_status` and
/// `device_status` values.
fn with_device_statuses(envelope: ObjectBuilder) -> ObjectBuilder {
    let names = || ArrayBuilder::new().items(ObjectBuilder::new().schema_type(Type::String));
    envelope.property(
        "deviceStatuses",
        ObjectBuilder::new()
            .property("expectedStatuses", names())
            .required("expectedStatuses")
            .property("availableStatuses", names())
            .required("availableStatuses"),
    )
}

/// A group's retention: days kept, null keeping forever (docs/api.md, "Retention").
#[derive(ToSchema)]
pub struct Retention {
    raw_days: Option<i64>,
    minute_days: Option<i64>,
    hour_days: Option<i64>,
    day_days: Option<i64>,
}

/// A role given in a group.
#[derive(ToSchema)]
pub struct Membership {
    id_group: String,
    id_user: String,
    /// `viewer`, `operator` or `manager`.
    role: String,
}

/// A gateway's new device token.
#[derive(ToSchema)]
pub struct NewDeviceToken {
    id_physical_device: String,
    /// The new MQTT password, shown this once; the old one stops working at once.
    device_token: String,
}

/// A device's answer to a command, passed through: its status (also the HTTP status) and its
/// payload (docs/api.md, "Commands").
#[derive(ToSchema)]
pub struct DeviceAnswer {
    status: i64,
    payload: Value,
}

/// A Z-wave exclusion the gateway accepted; the outcome follows as event 420 on the node.
#[derive(ToSchema)]
pub struct ZwaveExclusion {
    #[schema(rename = "fromCloud")]
    from_cloud: bool,
    message: String,
    /// Where the outcome will show: the node's events of type 420.
    #[schema(rename = "routeToPollEvents")]
    route_to_poll_events: String,
    /// What each value of event 420 means.
    tips: Vec<ZwaveTip>,
}

/// One value of event 420 and its meaning.
#[derive(ToSchema)]
pub struct ZwaveTip {
    value: String,
    description: String,
}

/// What a gateway's HTTP upload stored.
#[derive(ToSchema)]
pub struct GatewayAnswer {
    status: i64,
    payload: Value,
}

/// The liveness answer.
#[derive(ToSchema)]
pub struct Health {
    /// `ok`.
    status: String,
}

/// A firmware image (docs/api.md, "Firmware").
#[derive(ToSchema)]
pub struct Firmware {
    id_firmware: String,
    /// `GO`, `CORE` or `PLUS`.
    kind: String,
    /// `platform` or `app`.
    component: String,
    version: String,
    /// Bytes.
    size: i64,
    /// Lowercase hex of the image's sha256; also the download's `ETag`.
    sha256: String,
    /// Standard base64 of the Ed25519 signature of `manifest`.
    signature: String,
    /// The exact signed text: JSON `{"id_firmware", "kind", "component", "version", "size", "sha256"}`.
    manifest: String,
    /// Null: an image for every group.
    id_group: Option<String>,
    created_at: i64,
    /// The account that uploaded it.
    created_by: Option<String>,
    _links: Links,
}

/// The key firmware manifests are signed with (docs/api.md, "Firmware").
#[derive(ToSchema)]
pub struct FirmwarePublicKey {
    /// Always `ed25519`.
    algorithm: String,
    /// The raw 32-byte public key, standard base64 with padding.
    public_key: String,
}
