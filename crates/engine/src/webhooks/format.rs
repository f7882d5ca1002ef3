//! Webhook formatters (docs/api.md, "Webhooks"): how a batch of records becomes one request body.
//! Records carry the fields of the `data` and `event` endpoints (specification, Raw data point and
//! Event), so a receiver parses webhook items and API items alike.

use devicecloud_store::webhooks::{QueuedEvent, QueuedPoint, WebhookRow};
use serde_json::{Value, json};

use crate::event_catalogue;

/// A formatter: its name (the webhook's `formatter` field), what it does, its content type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Formatter {
    pub name: &'static str,
    pub description: &'static str,
    pub content_type: &'static str,
}

/// Every formatter, as `GET /api/v2/webhook-formatter` lists them.
pub const FORMATTERS: [Formatter; 2] = [
    Formatter {
        name: "json",
        description: "One JSON object per batch: {\"webhook\": {id_webhook, label, id_group, forwarding_type}, \"items\": [records]}.",
        content_type: "application/json",
    },
    Formatter {
        name: "ndjson",
        description: "Newline-delimited JSON: one record per line, each line ending with \\n.",
        content_type: "application/x-ndjson",
    },
];

/// The formatter of a name, if there is one.
pub fn formatter(name: &str) -> Option<&'static Formatter> {
    FORMATTERS.iter().find(|f| f.name == name)
}

/// A measurement with the fields of the `data` endpoint, in its order.
pub fn point_record(p: &QueuedPoint) -> Value {
    json!({
        "id_container_data_latest": p.id_container_data_latest,
        "id_group": p.id_group,
        "datatype": p.datatype,
        "source_device": p.source_device,
        "timestamp_seconds": p.seconds,
        "microseconds": p.microseconds,
        "value": p.value,
    })
}

/// An event with the fields of the `event` endpoint, in its order, labelled from the event
/// catalogue as the endpoint labels it.
pub fn event_record(e: &QueuedEvent) -> Value {
    Value::Object(event_catalogue::event_fields(&e.event))
}

/// The body of one batch in the webhook's format (`json` for an unknown name, which
/// validation does not let in).
pub fn body(hook: &WebhookRow, records: &[Value]) -> (Vec<u8>, &'static str) {
    let format = formatter(&hook.formatter).unwrap_or(&FORMATTERS[0]);
    let body = match format.name {
        "ndjson" => {
            let mut out = Vec::with_capacity(records.len() * 200);
            for record in records {
                // Serializing a JSON value into memory cannot fail.
                let _ = serde_json::to_writer(&mut out, record);
                out.push(b'\n');
            }
            out
        }
        _ => {
            let envelope = json!({
                "webhook": {
                    "id_webhook": hook.id_webhook,
                    "label": hook.label,
                    "id_group": hook.id_group,
                    "forwarding_type": hook.forwarding_type,
                },
                "items": records,
            });
            serde_json::to_vec(&envelope).unwrap_or_default()
        }
    };
    (body, format.content_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(formatter: &str) -> WebhookRow {
        WebhookRow {
            id_webhook: "w".into(),
            id_group: "g".into(),
            label: "L".into(),
            forwarding_type: "measurements".into(),
            formatter: formatter.into(),
            url: "http://example.com/".into(),
            authorization_header: None,
            secret: "s".into(),
            is_active: 1,
            created_at: 0,
            updated_at: 0,
            created_by: None,
            disabled_reason: None,
            disabled_at: None,
        }
    }

    #[test]
    fn json_wraps_and_ndjson_lines() {
        let records = [json!({"a": 1}), json!({"a": 2})];
        let (body, kind) = body(&hook("json"), &records);
        assert_eq!(kind, "application/json");
        let parsed: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(parsed["items"], json!([{"a": 1}, {"a": 2}]));
        assert_eq!(parsed["webhook"]["id_webhook"], "w");
        let (body, kind) = super::body(&hook("ndjson"), &records);
        assert_eq!(kind, "application/x-ndjson");
        assert_eq!(String::from_utf8(body).unwrap(), "{\"a\":1}\n{\"a\":2}\n");
    }

    #[test]
    fn point_fields_follow_the_data_endpoint() {
        let p = QueuedPoint {
            id_outbox: 1,
            id_container_data_latest: "c".into(),
            id_group: "g".into(),
            datatype: 3,
            source_device: "d".into(),
            seconds: 10,
            microseconds: 5,
            value: 1.5,
        };
        let keys: Vec<String> = point_record(&p).as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "id_container_data_latest",
                "id_group",
                "datatype",
                "source_device",
                "timestamp_seconds",
                "microseconds",
                "value"
            ]
        );
    }
}
