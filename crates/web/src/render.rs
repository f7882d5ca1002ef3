//! What the JSON API and the dashboard show alike: the API's records (the fields and `_links`
//! of groups, devices, data sessions, accounts and webhooks, which the dashboard's pages list
//! too), a device's answer to a command, and the streamed CSV of a data session. Both front
//! ends render through here, so that neither calls the other's handlers.

use axum::body::Body;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use devicecloud_store::accounts::UserRow;
use devicecloud_store::devices::DeviceRow;
use devicecloud_store::groups::GroupRow;
use devicecloud_store::session_collection::SessionRow;
use devicecloud_store::webhooks::WebhookRow;
use serde_json::{Map, Value, json};

use crate::service::export::ExportBody;
use crate::service::groups::GROUP_TYPES;
use crate::service::sessions::SessionCsv;
use devicecloud_engine::webhooks::vault::{self, Vault};

/// A record's fields as the API shows them, from the record type's own `Serialize` (in its
/// declaration order), for records whose API fields are exactly their stored ones.
pub fn record_fields<T: serde::Serialize>(row: &T) -> Map<String, Value> {
    match serde_json::to_value(row) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// The human-readable label of a group type code.
pub fn type_label(code: &str) -> &'static str {
    GROUP_TYPES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or("Unknown", |(_, l)| l)
}

/// A group record with every field of the specification, in its order: the stored ones, with
/// `id` first and `type_label` beside `type`.
pub fn group_fields(row: &GroupRow) -> Map<String, Value> {
    let mut map = record_fields(row);
    map.shift_insert(0, "id".into(), json!(row.id_group));
    insert_after(&mut map, "type", "type_label", json!(type_label(&row.r#type)));
    map
}

/// Puts `key` right after `after`: a field the API derives stands beside the one it comes from.
fn insert_after(map: &mut Map<String, Value>, after: &str, key: &str, value: Value) {
    let at = map.keys().position(|k| k == after).map_or(map.len(), |i| i + 1);
    map.shift_insert(at, key.into(), value);
}

/// The item `_links` of a group: relative paths (specification, Group).
pub fn group_links(id: &str) -> Value {
    let filter = format!("filter%5Bid_group%5D={id}");
    json!({
        "self": {"href": format!("/api/v2/group/{id}")},
        "index": {"href": "/api/v2/group/index"},
        "data": {"href": format!("/api/v2/data?{filter}")},
        "downsampled_data": {"href": format!("/api/v2/data-downsampled?{filter}")},
        "raw_data": {"href": format!("/api/v2/data/index?{filter}")},
    })
}

/// The group records of a page asked for with no `fields` and no `expand`, as JSON text:
/// exactly what [`group_fields`] and [`group_links`] give through `Selection::render`, written
/// straight from the rows. A map per record took about a fifth of the server's time for a page
/// of groups, and serializing through serde about a sixth after that, mostly escaping the
/// constant parts of the links and formatting them (docs/benchmarks.md, "API"): here only the
/// stored strings are escaped.
pub fn groups_json(rows: &[GroupRow]) -> String {
    use std::fmt::Write;
    /// The `_links` of a group, each up to where its href goes on, and whether the id follows.
    const LINKS: [(&str, bool); 5] = [
        (r#""self":{"href":"/api/v2/group/"#, true),
        (r#""index":{"href":"/api/v2/group/index"#, false),
        (r#""data":{"href":"/api/v2/data?filter%5Bid_group%5D="#, true),
        (
            r#""downsampled_data":{"href":"/api/v2/data-downsampled?filter%5Bid_group%5D="#,
            true,
        ),
        (r#""raw_data":{"href":"/api/v2/data/index?filter%5Bid_group%5D="#, true),
    ];
    let mut out = String::with_capacity(2 + rows.len() * 700);
    out.push('[');
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let id = row.id_group.as_str();
        for (key, value) in [
            ("{\"id\":", id),
            (",\"id_group\":", id),
            (",\"label\":", &row.label),
            (",\"type\":", &row.r#type),
            (",\"type_label\":", type_label(&row.r#type)),
            (",\"subtype\":", &row.subtype),
        ] {
            out.push_str(key);
            json_string(&mut out, value);
        }
        out.push_str(",\"id_country\":");
        match &row.id_country {
            Some(country) => json_string(&mut out, country),
            None => out.push_str("null"),
        }
        // Writing to a String cannot fail.
        let _ = write!(out, ",\"created_at\":{}", row.created_at);
        match row.deleted_at {
            Some(at) => _ = write!(out, ",\"deleted_at\":{at}"),
            None => out.push_str(",\"deleted_at\":null"),
        }
        out.push_str(",\"_links\":{");
        for (n, (link, with_id)) in LINKS.into_iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(link);
            if with_id {
                json_string_contents(&mut out, id);
            }
            out.push_str("\"}");
        }
        out.push_str("}}");
    }
    out.push(']');
    out
}

/// Appends `text` as a JSON string, escaped as serde_json escapes it.
fn json_string(out: &mut String, text: &str) {
    out.push('"');
    json_string_contents(out, text);
    out.push('"');
}

/// Appends `text` escaped for the inside of a JSON string, as serde_json escapes it (control
/// characters, `"` and `\\`; the rest as is). Most stored strings need no escape at all.
fn json_string_contents(out: &mut String, text: &str) {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push_str(text);
    } else {
        let quoted = Value::String(text.into()).to_string();
        out.push_str(&quoted[1..quoted.len() - 1]);
    }
}

/// A device record with every field of the specification, in its order.
pub fn device_fields(row: &DeviceRow) -> Map<String, Value> {
    record_fields(row)
}

/// The item `_links` of a device (specification: self, index).
pub fn device_links(id: &str) -> Value {
    json!({
        "self": {"href": format!("/api/v2/physical-device/{id}")},
        "index": {"href": "/api/v2/physical-device"},
    })
}

/// A session record with every field of the specification, in its order.
///
/// `isIngestionFinished`: a session is closed by the power-off message, which its gateway's
/// connection handles only after every earlier measurement message is committed; so once
/// `end` is set nothing of the session is still queued.
pub fn session_fields(row: &SessionRow) -> Map<String, Value> {
    let mut map = record_fields(row);
    map.insert("isIngestionFinished".into(), json!(row.end.is_some()));
    map.insert("isArchived".into(), json!(row.archived_at.is_some()));
    map
}

pub fn session_links(id: &str) -> Value {
    json!({
        "self": {"href": format!("/api/v2/data-session/{id}")},
        "index": {"href": "/api/v2/data-session"},
    })
}

/// The CSV download as an HTTP answer: streamed, with its file name.
pub fn csv_response(csv: SessionCsv) -> Response {
    let filename = format!("data-session-{}.csv", csv.id_data_session);
    (
        [
            (CONTENT_TYPE, "text/csv; charset=UTF-8".to_string()),
            (CONTENT_DISPOSITION, format!("attachment; filename=\"{filename}\"")),
        ],
        Body::from_stream(csv.lines),
    )
        .into_response()
}

/// The streamed export as a download (docs/api.md, "Export").
pub fn export_response(export: ExportBody) -> Response {
    let filename = format!("data-export.{}", export.format.extension());
    (
        [
            (CONTENT_TYPE, export.format.content_type().to_string()),
            (CONTENT_DISPOSITION, format!("attachment; filename=\"{filename}\"")),
        ],
        Body::from_stream(export.bytes),
    )
        .into_response()
}

/// An account record: `{id_user, username, is_admin, disabled, created_at}`, as [`UserRow`]
/// serialises.
pub fn user_fields(row: &UserRow) -> Map<String, Value> {
    record_fields(row)
}

/// The `authorization` value as shown: its scheme, and the last four characters of a long
/// credential, never the whole (docs/api.md, "Webhooks").
pub fn mask(authorization: &str) -> String {
    let (scheme, credential) = match authorization.split_once(' ') {
        Some((scheme, rest)) if scheme.len() <= 20 => (Some(scheme), rest),
        _ => (None, authorization),
    };
    let chars: Vec<char> = credential.chars().collect();
    let tail: String = if chars.len() >= 16 {
        chars[chars.len() - 4..].iter().collect()
    } else {
        String::new()
    };
    match scheme {
        Some(scheme) => format!("{scheme} ****{tail}"),
        None => format!("****{tail}"),
    }
}

/// A webhook record: every stored field except the secret, the authorization opened from its
/// sealed form and masked (one that cannot be opened, under another key, shows as `****`).
pub fn webhook_fields(row: &WebhookRow, vault: &Vault) -> Map<String, Value> {
    let authorization = row.authorization_header.as_deref().map(|stored| {
        vault
            .open(vault::AUTHORIZATION, stored)
            .map_or_else(|_| "****".to_string(), |clear| mask(&clear))
    });
    let mut map = record_fields(row);
    map.shift_insert(0, "id".into(), json!(row.id_webhook));
    map.insert("authorization".into(), json!(authorization));
    map
}

#[cfg(test)]
mod tests;
