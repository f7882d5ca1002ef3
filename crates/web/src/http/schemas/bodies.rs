//! The request bodies the API takes, as their validators read them (`service::*`): required
//! fields, lengths, words, numbers also taken as text, and `null` where a field may be cleared
//! or left at its default. Unknown fields are ignored, as Yii's `load` does, so every body
//! admits more properties.

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AnyOfBuilder, ArrayBuilder, ObjectBuilder, Schema, Type};

use super::built_schema;
use super::text::{boolean_like, integer_like, nonblank, one_of, text};
use crate::service::accounts::{PASSWORD_MAX, PASSWORD_MIN};

/// A body: its fields, each `(name, schema, required)`.
fn body(description: &str, fields: Vec<(&str, Schema, bool)>) -> Schema {
    let mut object = ObjectBuilder::new().description(Some(description));
    for (name, schema, required) in fields {
        object = object.property(name, schema);
        if required {
            object = object.required(name);
        }
    }
    object.into()
}

/// `schema`, or `null` (the field's default, or cleared).
fn or_null(schema: Schema) -> Schema {
    AnyOfBuilder::new()
        .item(schema)
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .into()
}

/// A group type: its code as text or as a number (`0` Default … `4` Fleet).
fn group_type() -> Schema {
    let codes: Vec<&str> = crate::service::groups::GROUP_TYPES
        .iter()
        .map(|(code, _)| *code)
        .collect();
    AnyOfBuilder::new()
        .item(one_of(&codes))
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0))
                .maximum(Some(codes.len() as i64 - 1)),
        )
        .description(Some(
            "The group type's code: 0 Default, 1 Project, 2 Customer, 3 Site, 4 Fleet",
        ))
        .into()
}

/// A password: 8 to 1024 characters, not blank.
fn password() -> Schema {
    let mut schema = nonblank(PASSWORD_MAX);
    if let Schema::Object(object) = &mut schema {
        object.min_length = Some(PASSWORD_MIN);
    }
    schema
}

/// Seconds of silence after which a device is late: 0 to a year.
fn offline_interval() -> Schema {
    or_null(integer_like(0, 31_536_000))
}

/// The fields of a group body: `label` required when creating (never blank when present).
fn group_fields(creating: bool) -> Vec<(&'static str, Schema, bool)> {
    vec![
        ("label", nonblank(255), creating),
        ("type", or_null(group_type()), false),
        ("subtype", or_null(text(255)), false),
        ("id_country", or_null(text(64)), false),
    ]
}

built_schema!(
    /// `POST /api/v2/group`.
    NewGroup => body("A new group", group_fields(true))
);

built_schema!(
    /// `PATCH /api/v2/group/{id}`: the fields named change.
    GroupChanges => body("Changes to a group: the fields named change", group_fields(false))
);

built_schema!(
    /// `PUT /api/v2/group/{id}/member/{id_user}`.
    NewRole => body("The role to give", vec![("role", one_of(&["viewer", "operator", "manager"]), true)])
);

/// Days a tier is kept: 1 to 36500, `null` or `""` keeping forever.
fn days() -> Schema {
    AnyOfBuilder::new()
        .item(integer_like(1, 36_500))
        .item(one_of(&[""]))
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .description(Some("Days kept, 1 to 36500 (also as text); null or \"\" keeps forever"))
        .into()
}

built_schema!(
    /// `PUT /api/v2/group/{id}/retention`: the tiers named change.
    RetentionChanges => body("Days each tier keeps: the fields named change", vec![
        ("raw_days", days(), false),
        ("minute_days", days(), false),
        ("hour_days", days(), false),
        ("day_days", days(), false),
    ])
);

built_schema!(
    /// `POST /api/v2/physical-device`.
    NewGateway => body("A gateway to provision", vec![
        ("id_group", nonblank(64), true),
        (
            "serial_hardware",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[!-~]{1,64}$"))
                .description(Some("1 to 64 printable ASCII characters without spaces (also its MQTT user name)"))
                .into(),
            true,
        ),
        ("kind", one_of(&crate::service::devices::MODULE_KINDS), true),
        ("label", or_null(text(255)), false),
        ("expected_offline_interval", offline_interval(), false),
    ])
);

built_schema!(
    /// `PATCH /api/v2/physical-device/{id}`: the fields named change.
    DeviceChanges => body("Changes to a device: the fields named change", vec![
        ("label", or_null(text(255)), false),
        ("expected_offline_interval", offline_interval(), false),
        ("expected_live_status", or_null(integer_like(0, 1)), false),
    ])
);

built_schema!(
    /// `POST /api/v2/user`.
    NewUser => body("A new account", vec![
        ("username", nonblank(255), true),
        ("password", password(), true),
        ("is_admin", or_null(boolean_like()), false),
    ])
);

built_schema!(
    /// `PATCH /api/v2/user/{id}`: the fields named change.
    UserChanges => body("Changes to an account: the fields named change", vec![
        ("password", or_null(password()), false),
        ("is_admin", or_null(boolean_like()), false),
        ("disabled", or_null(boolean_like()), false),
    ])
);

built_schema!(
    /// `PATCH /api/v2/user/me`.
    NewPassword => body("The caller's new password", vec![
        ("current_password", nonblank(PASSWORD_MAX), true),
        ("password", password(), true),
    ])
);

/// A header value as a webhook sends it: no control characters but tab.
fn header_text() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .max_length(Some(4096))
        .pattern(Some(r"^[^\x00-\x08\x0A-\x1F\x7F]*$"))
        .into()
}

/// A webhook's URL: http or https, a host that resolves to public addresses only.
fn url() -> Schema {
    let mut schema = nonblank(devicecloud_engine::webhooks::address::MAX_URL_CHARS);
    if let Schema::Object(object) = &mut schema {
        object.description = Some(
            "An http or https URL without user or password, whose host resolves to public \
             addresses only (docs/api.md, \"Webhooks\")"
                .into(),
        );
    }
    schema
}

/// The formatter names.
fn formatter() -> Schema {
    let names: Vec<&str> = devicecloud_engine::webhooks::format::FORMATTERS
        .iter()
        .map(|f| f.name)
        .collect();
    one_of(&names)
}

/// The fields of a webhook body: creating requires them and also takes `id_group` and
/// `forwarding_type`, which never change after.
fn webhook_fields(creating: bool) -> Vec<(&'static str, Schema, bool)> {
    let mut fields = Vec::new();
    if creating {
        fields.push(("id_group", nonblank(64), true));
        fields.push(("forwarding_type", one_of(&["measurements", "events"]), true));
    }
    fields.extend([
        ("label", nonblank(255), creating),
        ("formatter", formatter(), creating),
        ("url", url(), creating),
        ("authorization", or_null(header_text()), false),
        ("is_active", or_null(boolean_like()), false),
    ]);
    fields
}

built_schema!(
    /// `POST /api/v2/webhook`.
    NewWebhook => body("A webhook", webhook_fields(true))
);

built_schema!(
    /// `PATCH /api/v2/webhook/{id}`: the fields named change; `id_group` and
    /// `forwarding_type` cannot.
    WebhookChanges => body("Changes to a webhook: the fields named change", webhook_fields(false))
);

built_schema!(
    /// `PATCH /api/v2/physical-device/{id}/twin`.
    TwinChange => body("A change of the desired document", vec![
        (
            "desired",
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .description(Some("A JSON merge patch (RFC 7386) of the desired document: null removes a key; the result at most 32 KiB serialized and 8 levels deep"))
                .into(),
            true,
        ),
        (
            "version",
            or_null(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0))
                    .description(Some("Applied only when the desired document is at this version (409 otherwise)"))
                    .into(),
            ),
            false,
        ),
    ])
);

built_schema!(
    /// `POST /api/v2/job`.
    NewJob => body("A job over the devices a filter matches", vec![
        ("label", nonblank(255), true),
        (
            "operation",
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .description(Some("One of {\"command\": \"<method>\", \"params\": {…}}, {\"twin\": <desired merge patch>}, {\"firmware\": \"<id_firmware>\"}"))
                .into(),
            true,
        ),
        (
            "target",
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .property("filter", ObjectBuilder::new().schema_type(Type::Object))
                .required("filter")
                .description(Some("{\"filter\": <a physical-device filter in the JSON-body form>}"))
                .into(),
            true,
        ),
        ("rate_per_minute", or_null(integer_like(1, 600_000)), false),
        ("max_failures_percent", or_null(integer_like(0, 100)), false),
        ("timeout_s", or_null(integer_like(1, 86_400)), false),
        ("expires_in_s", or_null(integer_like(1, 2_592_000)), false),
    ])
);

built_schema!(
    /// `POST /api/v2/firmware` (multipart/form-data).
    NewFirmware => body("A firmware image and what it is", vec![
        (
            "file",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Binary)))
                .description(Some("The image; at most DEVICECLOUD_FIRMWARE_MAX_BYTES (64 MiB)"))
                .into(),
            true,
        ),
        ("kind", one_of(&["GO", "CORE", "PLUS"]), true),
        ("component", one_of(&devicecloud_protocol::firmware::COMPONENTS), true),
        (
            "version",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(64))
                .pattern(Some(r"^[^\s\x00-\x1f\x7f-\x9f]+$"))
                .into(),
            true,
        ),
        // Left out or empty (as a form's "every group" sends it): an image for every group.
        ("id_group", text(64), false),
    ])
);

built_schema!(
    /// `PUT /api/v2/physical-device/{id}/wifi`.
    WifiNetwork => body("The network to join", vec![
        ("ssid", ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).into(), true),
        ("password", or_null(ObjectBuilder::new().schema_type(Type::String).into()), false),
    ])
);

/// One register write.
fn modbus_write() -> Schema {
    body(
        "One register write",
        vec![
            (
                "datatype",
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0))
                    .maximum(Some(u32::MAX))
                    .into(),
                true,
            ),
            ("value", ObjectBuilder::new().schema_type(Type::Number).into(), true),
        ],
    )
}

built_schema!(
    /// `PUT /api/v2/physical-device/{id}/modbus-write`.
    ModbusWrites => AnyOfBuilder::new()
        .item(modbus_write())
        .item(
            ArrayBuilder::new()
                .items(RefOr::T(modbus_write()))
                .min_items(Some(1))
                .max_items(Some(devicecloud_protocol::MAX_BATCH)),
        )
        .description(Some("One register write, or an array of them"))
        .into()
);

/// The fields of an alarm rule; `required` for a new one.
fn alarm_rule_fields(required: bool) -> Vec<(&'static str, Schema, bool)> {
    let condition = || {
        let mut schema = nonblank(crate::service::alarms::CONDITION_MAX_CHARS);
        if let Schema::Object(object) = &mut schema {
            object.description = Some("A CEL expression over value, previous, rate, datatype and serial".into());
        }
        or_null(schema)
    };
    let seconds = |min| or_null(integer_like(min, crate::service::alarms::SECONDS_MAX as u64));
    vec![
        ("label", nonblank(255), required),
        ("severity", one_of(&crate::service::alarms::SEVERITIES), required),
        ("condition", condition(), false),
        ("clear_condition", condition(), false),
        ("inactivity_s", seconds(1), false),
        ("datatype", or_null(integer_like(0, i32::MAX as u64)), false),
        ("source_device", or_null(text(64)), false),
        ("for_s", seconds(0), false),
        ("is_active", or_null(boolean_like()), false),
    ]
}

built_schema!(
    /// `POST /api/v2/alarm-rule`.
    NewAlarmRule => {
        let mut fields = vec![("id_group", nonblank(64), true)];
        fields.extend(alarm_rule_fields(true));
        body("An alarm rule: a condition or an inactivity_s", fields)
    }
);

built_schema!(
    /// `PATCH /api/v2/alarm-rule/<id>`.
    AlarmRuleChanges => body("Changes of an alarm rule; null clears an optional field", alarm_rule_fields(false))
);
