//! Example answers for the OpenAPI document, taken from a running demo, so that a reader (and
//! the API reference's "Example Value") sees what a call really returns.

use serde_json::{Value, json};

const GROUP: &str = "809185dd-12b1-477a-bfc2-7cd061f36ee3";
const GATEWAY: &str = "068f1f66-abd4-44a7-b536-c9f923a04db6";
const SENSOR: &str = "fae881c5-861d-4f08-b32c-e4de5c0fc14a";

/// An example of the component schema `name`, if it has one.
pub fn of(name: &str) -> Option<Value> {
    Some(match name {
        "Group" => json!({
            "id": GROUP, "id_group": GROUP, "label": "Utrecht district heating", "type": "1",
            "type_label": "Project", "subtype": "", "id_country": null, "created_at": 1_795_854_071,
            "deleted_at": null,
            "_links": {"self": {"href": format!("/api/v2/group/{GROUP}")}, "index": {"href": "/api/v2/group/index"}},
        }),
        "PhysicalDevice" => json!({
            "id_physical_device": GATEWAY, "serial_hardware": "DEMO-GO-10", "label": "Service van",
            "id_parent": null, "id_group": GROUP, "id_device_type": "GO",
            "id_iot_device": "53df2d8a-25af-43c6-bf74-d3f5592d18cd", "is_connected": 1,
            "expected_offline_interval": 600, "expected_live_status": 0, "device_status": 0,
            "connection": "cellular", "created_at": 1_795_854_071, "last_data_at": 1_795_854_323,
            "signal": 17, "commissioned_at": 1_795_854_071, "calibrated_at": null, "reconnected_at": null,
            "platform_software_version": "5.1.2", "app_software_version": "2.4.0",
            "archived_serial": null, "archived_at": null, "archived_by": null,
            "_links": {"self": {"href": format!("/api/v2/physical-device/{GATEWAY}")}, "index": {"href": "/api/v2/physical-device"}},
        }),
        "DataPoint" => json!({
            "id_container_data_latest": "ebe0d6e0-0bb8-49b4-a953-646f767c8a37", "id_group": GROUP,
            "datatype": 30, "source_device": SENSOR, "timestamp_seconds": 1_795_854_139,
            "microseconds": 496_777, "value": 20.6,
        }),
        "DownsampledPoint" => json!({
            "id_container_data_latest": "00bcbaa3-362e-4d1c-9c2f-fc44f292875d", "id_group": GROUP,
            "datatype": 30, "source_device": SENSOR, "timestamp_seconds": 1_795_219_200,
            "min_val": 15.2, "max_val": 23.5, "avg_val": 20.44, "count_val": 188,
        }),
        "Event" => json!({
            "id_event": 16, "id_group": GROUP, "source_device": GATEWAY, "from_device": 0,
            "event_type": "209", "event_type_label": "Data session",
            "event_type_description": "A data session of a GO module was opened (module turned on) or closed (turned off).",
            "occurred_at": 1_795_854_071, "value": "1", "datatype": null, "event_value_label": "Opened",
            "event_value_description": "The module was turned on; a new session is active.",
        }),
        "EventType" => json!({
            "event_type": "209", "label": "Data session",
            "description": "A data session of a GO module was opened (module turned on) or closed (turned off).",
            "from_device": 0,
            "values": [
                {"value": "0", "label": "Closed", "description": "The module was turned off; the session has an end."},
                {"value": "1", "label": "Opened", "description": "The module was turned on; a new session is active."},
            ],
        }),
        "DataSession" => json!({
            "id_data_session": "d31a9ff2-0c9d-4043-8d31-e78eebf46b3c", "id_group": GROUP,
            "id_person": null, "label": "", "start": 1_795_854_071, "end": null,
            "created_at": 1_795_854_071, "created_by": null, "updated_at": 1_795_854_071,
            "updated_by": null, "archived_at": null, "datapoint_count": 6,
            "isIngestionFinished": false, "isArchived": false,
            "_links": {"self": {"href": "/api/v2/data-session/d31a9ff2-0c9d-4043-8d31-e78eebf46b3c"}, "index": {"href": "/api/v2/data-session"}},
        }),
        "User" => json!({
            "id_user": "6ba062b6-6bc1-453e-93c8-e466e647cfb8", "username": "viewer@devicecloud.demo",
            "is_admin": false, "disabled": false, "created_at": 1_795_854_071,
        }),
        "Webhook" => json!({
            "id": "5d0c0f7e-3f0b-4b7c-9a43-0c1a8b7e2f11", "id_webhook": "5d0c0f7e-3f0b-4b7c-9a43-0c1a8b7e2f11",
            "id_group": GROUP, "label": "Plant historian", "forwarding_type": "measurements",
            "formatter": "json", "url": "https://historian.example.com/ingest",
            "authorization": "Bearer ****3456", "is_active": 1, "disabled_reason": null,
            "disabled_at": null, "created_at": 1_795_854_400, "updated_at": 1_795_854_400,
            "created_by": "8699ff2a-224b-4d8b-aabd-0f13544b4207",
            "_links": {"self": {"href": "/api/v2/webhook/5d0c0f7e-3f0b-4b7c-9a43-0c1a8b7e2f11"}, "attempts": {"href": "/api/v2/webhook/5d0c0f7e-3f0b-4b7c-9a43-0c1a8b7e2f11/attempt"}},
        }),
        "WebhookAttempt" => json!({
            "id_attempt": 41, "id_webhook": "5d0c0f7e-3f0b-4b7c-9a43-0c1a8b7e2f11",
            "id_delivery": "b3c1d9e2-6a7f-4e11-8c2d-3f4a5b6c7d8e", "attempted_at": 1_795_854_460,
            "status_code": 503, "duration_ms": 18, "error": null, "item_count": 500, "attempt": 2,
        }),
        "WebhookFormatter" => json!({
            "name": "ndjson",
            "description": "Newline-delimited JSON: one record per line, each line ending with \\n.",
            "content_type": "application/x-ndjson",
        }),
        "Twin" => json!({
            "id_physical_device": GATEWAY, "id_group": GROUP,
            "desired": {"reporting_interval_s": 60, "led": {"on": true}},
            "reported": {"reporting_interval_s": 60},
            "delta": {"led": {"on": true}},
            "version": 3, "reported_version": 2,
            "desired_updated_at": 1_795_854_400, "reported_updated_at": 1_795_854_380, "in_sync": 0,
            "_links": {"self": {"href": format!("/api/v2/physical-device/{GATEWAY}/twin")}, "device": {"href": format!("/api/v2/physical-device/{GATEWAY}")}},
        }),
        "Job" => json!({
            "id_job": "9a7c2e41-5b3d-4f6a-8e1c-2d4b6f8a0c13", "label": "Ping the fleet",
            "operation": {"command": "ping"}, "target": {"filter": {"id_group": GROUP}},
            "status": "in_progress", "total": 120, "pending": 40, "in_progress": 2, "succeeded": 76,
            "failed": 1, "timed_out": 1, "cancelled": 0, "created_at": 1_795_854_400,
            "created_by": "8699ff2a-224b-4d8b-aabd-0f13544b4207", "started_at": 1_795_854_401,
            "finished_at": null, "rate_per_minute": 60, "max_failures_percent": 10, "timeout_s": 60,
            "expires_at": 1_795_940_800,
            "_links": {"self": {"href": "/api/v2/job/9a7c2e41-5b3d-4f6a-8e1c-2d4b6f8a0c13"}, "executions": {"href": "/api/v2/job/9a7c2e41-5b3d-4f6a-8e1c-2d4b6f8a0c13/execution"}},
        }),
        "Firmware" => json!({
            "id_firmware": "5f0c7d2e-8a41-4b6e-9c3d-1e2f3a4b5c6d", "kind": "CORE", "component": "app",
            "version": "2.4.1", "size": 1_048_576,
            "sha256": "30e14955ebf1352266dc2ff8067e68104607e750abb9d3b36582b8af909fcb58",
            "signature": "3f1ZQp3w2mJ6oV1b8M0Qy1f2o8lS1pQe6Xo3Vq0w9V8n0mZc4yJt1rQe3bH2k9sL5xW7aP4dF6gJ8hK0lM2nBw==",
            "manifest": "{\"id_firmware\":\"5f0c7d2e-8a41-4b6e-9c3d-1e2f3a4b5c6d\",\"kind\":\"CORE\",\"component\":\"app\",\"version\":\"2.4.1\",\"size\":1048576,\"sha256\":\"30e14955ebf1352266dc2ff8067e68104607e750abb9d3b36582b8af909fcb58\"}",
            "id_group": GROUP, "created_at": 1_795_854_400,
            "created_by": "8699ff2a-224b-4d8b-aabd-0f13544b4207",
            "_links": {"self": {"href": "/api/v2/firmware/5f0c7d2e-8a41-4b6e-9c3d-1e2f3a4b5c6d"}, "download": {"href": "/gateway/v1/firmware/5f0c7d2e-8a41-4b6e-9c3d-1e2f3a4b5c6d"}},
        }),
        "AlarmRule" => json!({
            "id_alarm_rule": "8b1e4c2a-7d3f-4a5b-9c6d-0e1f2a3b4c5d", "id_group": GROUP, "label": "Strong vibration",
            "severity": "major", "condition": "value > 3.0", "clear_condition": "value < 2.0",
            "inactivity_s": null, "datatype": 20, "source_device": null, "for_s": 6, "is_active": 1,
            "created_at": 1_795_854_071, "updated_at": 1_795_854_071, "created_by": "8699ff2a-224b-4d8b-aabd-0f13544b4207",
            "_links": {"self": {"href": "/api/v2/alarm-rule/8b1e4c2a-7d3f-4a5b-9c6d-0e1f2a3b4c5d"}, "alarms": {"href": "/api/v2/alarm?filter[id_alarm_rule]=8b1e4c2a-7d3f-4a5b-9c6d-0e1f2a3b4c5d"}},
        }),
        "Alarm" => json!({
            "id_alarm": "3c9a1f7e-2b4d-4e6f-8a0b-1c2d3e4f5a6b", "id_alarm_rule": "8b1e4c2a-7d3f-4a5b-9c6d-0e1f2a3b4c5d",
            "id_group": GROUP, "source_device": GATEWAY, "datatype": 20, "severity": "major", "status": "active",
            "raised_at": 1_795_854_460, "acknowledged_at": null, "acknowledged_by": null, "cleared_at": null,
            "value": 3.84, "count": 4,
            "_links": {"self": {"href": "/api/v2/alarm/3c9a1f7e-2b4d-4e6f-8a0b-1c2d3e4f5a6b"}, "rule": {"href": "/api/v2/alarm-rule/8b1e4c2a-7d3f-4a5b-9c6d-0e1f2a3b4c5d"}},
        }),
        "FirmwarePublicKey" => json!({
            "algorithm": "ed25519", "public_key": "O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik=",
        }),
        "JobExecution" => json!({
            "id_physical_device": GATEWAY, "status": "succeeded", "attempts": 1,
            "started_at": 1_795_854_401, "finished_at": 1_795_854_401,
            "result": {"status": 200, "payload": {"data": "pong", "result": "success"}},
        }),
        "Retention" => json!({"raw_days": 30, "minute_days": 90, "hour_days": 730, "day_days": null}),
        "Membership" => {
            json!({"id_group": GROUP, "id_user": "6ba062b6-6bc1-453e-93c8-e466e647cfb8", "role": "operator"})
        }
        "NewDeviceToken" => json!({
            "id_physical_device": GATEWAY,
            "device_token": "69eda0d59cdc4000228b3549af0c4d134128fdf8bed5b1acb5f1f6c6a7653448",
        }),
        "DeviceAnswer" => json!({"status": 200, "payload": {"data": "pong", "result": "success"}}),
        "ZwaveExclusion" => json!({
            "fromCloud": false, "message": "The gateway started the exclusion of the node.",
            "routeToPollEvents": format!("/api/v2/event?filter[source_device]={SENSOR}&filter[event_type]=420"),
            "tips": [{"value": "0", "description": "The node was excluded."}],
        }),
        "GatewayAnswer" => json!({"status": 200, "payload": {"result": "success", "points": 1}}),
        "Health" => json!({"status": "ok"}),
        "TokenAnswer" => json!({
            "access_token": "02878334ecd3b9938200be68194f623c44d4403f9f16d15fc110afe4224a0054",
            "expires_in": 86_400, "token_type": "Bearer", "scope": null,
            "refresh_token": "b9d37b39562648e1ee8a4dd37f4b4783ceeea3963823b05e65a7e4995f7444b1",
        }),
        "FieldErrors" => json!([{"field": "label", "message": "Label cannot be blank."}]),
        _ => return None,
    })
}

/// A page holding one `record`, as its collection answers it.
pub fn page_of(path: &str, record: Value) -> Value {
    let href = format!("https://devicecloud.example.com{path}?per-page=1&page=1");
    json!({
        "items": [record],
        "_links": {"self": {"href": href}, "first": {"href": href}, "last": {"href": href}},
        "_meta": {"totalCount": 1, "pageCount": 1, "currentPage": 1, "perPage": 1},
        "expand": [],
    })
}

/// The error body of the OAuth endpoints for `status`: the specification's, with RFC 6749's
/// `error` and `error_description`.
pub fn oauth_error(status: &str) -> Option<Value> {
    let (name, error, message) = match status {
        "400" => ("Bad Request", "invalid_client", "The client credentials are invalid"),
        "401" => (
            "Unauthorized",
            "invalid_grant",
            "Invalid username and password combination",
        ),
        "429" => (
            "Too Many Requests",
            "slow_down",
            "Too many failed sign-in attempts; try again in 300 seconds.",
        ),
        "503" => (
            "Service Unavailable",
            "temporarily_unavailable",
            "Too many password checks are running; try again in a few seconds.",
        ),
        _ => return error(status),
    };
    let code: u16 = status.parse().ok()?;
    Some(
        json!({"name": name, "message": message, "code": 0, "status": code, "error": error, "error_description": message}),
    )
}

/// The specification's error body for `status`, with a message the service really gives.
pub fn error(status: &str) -> Option<Value> {
    let (name, message) = match status {
        "400" => (
            "Bad Request",
            "Invalid expand: \"a.b.c.d.e.f\" has 6 segments; at most 4 are allowed (such as parent.parent.parent.group).",
        ),
        "401" => ("Unauthorized", "Your request was made with invalid credentials."),
        "404" => (
            "Not Found",
            "Physical device not found: 068f1f66-abd4-44a7-b536-c9f923a04db6",
        ),
        "405" => (
            "Method Not Allowed",
            "Method Not Allowed. This URL can only handle the following request methods: GET.",
        ),
        "408" => ("Request Timeout", "The request body did not arrive within 30 s."),
        "413" => (
            "Payload Too Large",
            "Failed to buffer the request body: length limit exceeded",
        ),
        "415" => (
            "Unsupported Media Type",
            "The body must be multipart/form-data with a file and the fields kind, component, version and id_group.",
        ),
        "416" => (
            "Range Not Satisfiable",
            "The image has 1048576 bytes; ask for one range within them (bytes=first-last).",
        ),
        "429" => ("Too Many Requests", "Rate limit exceeded."),
        "503" => (
            "Service Unavailable",
            "The store's disk is full; nothing was written. Try again later.",
        ),
        "504" => ("Gateway Timeout", "The device did not answer within 10000 ms."),
        "409" => (
            "Conflict",
            "The twin's desired document is at version 3, not 2; read it again and retry.",
        ),
        _ => return None,
    };
    let code: u16 = status.parse().ok()?;
    Some(json!({"name": name, "message": message, "code": 0, "status": code}))
}
