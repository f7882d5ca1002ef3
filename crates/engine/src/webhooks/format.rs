//! Webhook formatters (docs/api.md, "Webhooks"): how a batch of records becomes one request body.
//! Records carry the fields of the `data` and `event` endpoints (specification, Raw data point and
//! Event), so a receiver parses webhook items and API items alike.

use devicecloud_store::series::Series;
use devicecloud_store::webhooks::{PackedPoint, QueuedEvent, WebhookRow};
use serde::Serialize;
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

/// A measurement with the fields of the `data` endpoint, in its order: serialized straight
/// from its series' fields, with no JSON tree a point.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PointRecord<'a> {
    pub id_container_data_latest: &'a str,
    pub id_group: &'a str,
    pub datatype: i64,
    pub source_device: &'a str,
    pub timestamp_seconds: i64,
    pub microseconds: i64,
    pub value: f64,
}

/// The record of point `p` of series `s`.
pub fn point_record<'a>(s: &'a Series, p: &PackedPoint) -> PointRecord<'a> {
    PointRecord {
        id_container_data_latest: &s.id_container_data_latest,
        id_group: &s.id_group,
        datatype: s.datatype,
        source_device: &s.source_device,
        timestamp_seconds: p.time_us.div_euclid(1_000_000),
        microseconds: p.time_us.rem_euclid(1_000_000),
        value: p.value,
    }
}

/// An event with the fields of the `event` endpoint, in its order, labelled from the event
/// catalogue as the endpoint labels it.
pub fn event_record(e: &QueuedEvent) -> Value {
    Value::Object(event_catalogue::event_fields(&e.event))
}

/// The body of one batch in the webhook's format (`json` for an unknown name, which
/// validation does not let in): each record serialized once, into the body itself.
pub fn body<R: Serialize>(hook: &WebhookRow, records: &[R]) -> (Vec<u8>, &'static str) {
    let format = formatter(&hook.formatter).unwrap_or(&FORMATTERS[0]);
    let mut out = Vec::with_capacity(records.len() * 200 + 256);
    // Serializing into memory cannot fail for these types.
    match format.name {
        "ndjson" => {
            for record in records {
                let _ = serde_json::to_writer(&mut out, record);
                out.push(b'\n');
            }
        }
        _ => {
            // `{"webhook": {…}, "items": [records]}`, compact, as serde_json writes it.
            let webhook = json!({
                "id_webhook": hook.id_webhook,
                "label": hook.label,
                "id_group": hook.id_group,
                "forwarding_type": hook.forwarding_type,
            });
            out.extend_from_slice(b"{\"webhook\":");
            let _ = serde_json::to_writer(&mut out, &webhook);
            out.extend_from_slice(b",\"items\":[");
            for (i, record) in records.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let _ = serde_json::to_writer(&mut out, record);
            }
            out.extend_from_slice(b"]}");
        }
    }
    (out, format.content_type)
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
        let s = Series {
            container_key: 1,
            id_container_data_latest: "c".into(),
            id_group: "g".into(),
            datatype: 3,
            source_device: "d".into(),
        };
        let p = PackedPoint {
            container_key: 1,
            time_us: 10_000_005,
            value: 1.5,
        };
        let record = serde_json::to_value(point_record(&s, &p)).unwrap();
        let keys: Vec<String> = record.as_object().unwrap().keys().cloned().collect();
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
        assert_eq!(record["timestamp_seconds"], 10);
        assert_eq!(record["microseconds"], 5);
        // The json formatter writes what serializing the envelope as one value writes.
        let records = [point_record(&s, &p)];
        let (written, _) = body(&hook("json"), &records);
        let whole = serde_json::to_vec(&json!({
            "webhook": {"id_webhook": "w", "label": "L", "id_group": "g", "forwarding_type": "measurements"},
            "items": [record],
        }))
        .unwrap();
        assert_eq!(String::from_utf8(written).unwrap(), String::from_utf8(whole).unwrap());
    }
}
