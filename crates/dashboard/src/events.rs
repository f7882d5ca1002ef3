//! `GET /events`: the events of the viewer's groups, newest first, filtered by device, type
//! and a UTC time interval; and the event table the device page shares.

use axum::extract::{Query, State};
use axum::response::Html;
use devicecloud_store::event_collection::{self, ATTRIBUTES};
use devicecloud_store::events::EventRow;
use devicecloud_store::unix_now;
use maud::{Markup, html};
use serde_json::{Map, Value, json};
use time::PrimitiveDateTime;
use time::macros::format_description;

use crate::format;
use crate::layout::{self, Section};
use crate::page::{PageResult, filter, list_args, pager};
use crate::viewer::Viewer;
use devicecloud_engine::event_catalogue::{self, CATALOGUE};
use devicecloud_web::state::AppState;

/// Events per page.
const PER_PAGE: u64 = 50;

/// One event as a table row shows it.
pub struct Line<'a> {
    pub occurred_at: i64,
    pub source_device: &'a str,
    pub event_type: &'a str,
    pub type_label: &'a str,
    pub value: &'a str,
    pub value_label: &'a str,
    pub value_description: &'a str,
}

/// One event's row, with the catalogue's labels.
pub fn row(e: &Line<'_>, now: i64) -> Markup {
    html! {
        tr {
            td title=(format::ago(Some(e.occurred_at), now)) { (format::utc(Some(e.occurred_at))) }
            td { a href=(format!("/devices/{}", e.source_device)) { code { (e.source_device.get(..8).unwrap_or(e.source_device)) } } }
            td { (e.event_type) " · " (e.type_label) }
            td { (e.value) }
            td { (e.value_label) @if !e.value_description.is_empty() { span.muted { " — " (e.value_description) } } }
        }
    }
}

/// Events as a table, with the catalogue's labels; its body is where the live stream adds
/// new events (`data-live-events`), so it is there even without events.
pub fn table(rows: &[EventRow], now: i64) -> Markup {
    html! {
        table data-live-events {
            thead { tr { th { "When" } th { "Device" } th { "Event" } th { "Value" } th { "Meaning" } } }
            tbody {
                @if rows.is_empty() { tr.empty { td.muted colspan="5" { "No events." } } }
                @for e in rows {
                    @let event_type = e.event_type.to_string();
                    @let (type_label, _) = event_catalogue::type_text(e.event_type);
                    @let (value_label, value_description) = event_catalogue::value_text(e.event_type, &e.value, e.value_description.as_deref());
                    (row(&Line {
                        occurred_at: e.occurred_at,
                        source_device: &e.source_device,
                        event_type: &event_type,
                        type_label: &type_label,
                        value: &e.value,
                        value_label: &value_label,
                        value_description: &value_description,
                    }, now))
                }
            }
        }
    }
}

#[derive(serde::Deserialize, Default)]
pub struct EventQuery {
    #[serde(default)]
    device: String,
    #[serde(default)]
    r#type: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    #[serde(default, deserialize_with = "crate::page::lenient_page")]
    page: Option<i64>,
}

/// A `datetime-local` value read as UTC.
fn utc_input(text: &str) -> Result<Option<i64>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    let with_seconds = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    let without = format_description!("[year]-[month]-[day]T[hour]:[minute]");
    PrimitiveDateTime::parse(text, with_seconds)
        .or_else(|_| PrimitiveDateTime::parse(text, without))
        .map(|t| Some(t.assume_utc().unix_timestamp()))
        .map_err(|_| format!("“{text}” is not a time like 2026-11-22T08:00"))
}

pub async fn page(State(state): State<AppState>, viewer: Viewer, Query(q): Query<EventQuery>) -> PageResult {
    let mut problems = Vec::new();
    let mut condition = Map::new();
    if !q.device.is_empty() {
        condition.insert("source_device".into(), json!(q.device));
    }
    if !q.r#type.is_empty() {
        condition.insert("event_type".into(), json!(q.r#type));
    }
    let mut occurred = Map::new();
    for (key, text) in [("gte", &q.from), ("lte", &q.to)] {
        match utc_input(text) {
            Ok(Some(t)) => {
                occurred.insert(key.into(), json!(t));
            }
            Ok(None) => {}
            Err(problem) => problems.push(problem),
        }
    }
    if !occurred.is_empty() {
        condition.insert("occurred_at".into(), Value::Object(occurred));
    }
    let condition = filter(&Value::Object(condition), &ATTRIBUTES)?;
    let listing = event_collection::list(
        &state.db,
        list_args(&viewer.caller, condition.as_ref(), None, q.page, PER_PAGE),
    )
    .await?;
    let base = format!(
        "/events{}",
        format::query(&[
            ("device", &q.device),
            ("type", &q.r#type),
            ("from", &q.from),
            ("to", &q.to)
        ])
    );
    let content = html! {
        form.inline method="get" action="/events" {
            label { "Device id " input name="device" value=(q.device) size="38"; }
            label { "Type "
                select name="type" {
                    option value="" { "any" }
                    @for t in CATALOGUE {
                        option value=(t.code) selected[q.r#type == t.code.to_string()] { (t.code) " · " (t.label) }
                    }
                }
            }
            label { "From (UTC) " input type="datetime-local" name="from" value=(q.from); }
            label { "To (UTC) " input type="datetime-local" name="to" value=(q.to); }
            button type="submit" { "Filter" }
        }
        @for problem in &problems { p.error { (problem) } }
        (table(&listing.items, unix_now()))
        (pager(&listing.page, &base))
    };
    Ok(Html(
        layout::page(&viewer, Section::Events, "Events", content).into_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_times_are_utc() {
        assert_eq!(utc_input("2025-11-21T12:00"), Ok(Some(1_763_726_400)));
        assert_eq!(utc_input("2025-11-21T12:00:30"), Ok(Some(1_763_726_430)));
        assert_eq!(utc_input(""), Ok(None));
        assert!(utc_input("yesterday").is_err());
    }
}
