//! `GET /sessions`, `/sessions/<id>` and `/sessions/<id>/csv`: the data sessions of the
//! viewer's groups, a session's charts (the API's 500-bucket session downsampling) and its CSV
//! through the API's own streaming download.

use axum::extract::{Path, Query, State};
use axum::response::{Html, Response};
use devicecloud_store::downsampled::SESSION_BUCKETS;
use devicecloud_store::session_collection;
use devicecloud_store::unix_now;
use maud::html;
use serde_json::json;

use crate::chart::{self, Chart};
use crate::format;
use crate::layout::{self, Section};
use crate::page::{PageQuery, PageResult, list_args, pager};
use crate::series::{self, datatype_title};
use crate::viewer::Viewer;
use devicecloud_engine::auth::Role;
use devicecloud_web::render::csv_response;
use devicecloud_web::service::{access, sessions as service};
use devicecloud_web::state::AppState;

/// `GET /sessions`: newest first.
pub async fn list(State(state): State<AppState>, viewer: Viewer, Query(q): Query<PageQuery>) -> PageResult {
    let newest_first = devicecloud_query::SortKey::desc("start");
    let listing = session_collection::list(
        &state.db,
        list_args(&viewer.caller, None, Some(&newest_first), q.page, 50),
    )
    .await?;
    let now = unix_now();
    let content = html! {
        @if listing.items.is_empty() { p.muted { "No data sessions yet: GO modules open one when they power on." } }
        @else {
            table {
                thead { tr { th { "Session" } th { "Device" } th { "Start" } th { "End" } th.num { "Points" } th { "" } } }
                tbody {
                    @for s in &listing.items {
                        tr {
                            td { a href=(format!("/sessions/{}", s.id_data_session)) { @if s.label.is_empty() { code { (s.id_data_session.get(..8).unwrap_or(&s.id_data_session)) } } @else { (s.label) } } }
                            td { a href=(format!("/devices/{}", s.id_physical_device)) { "device" } }
                            td { (format::utc(Some(s.start))) }
                            td { @if s.end.is_some() { (format::utc(s.end)) } @else { span.status.on { "open" } " " span.muted { (format::ago(Some(s.start), now)) } } }
                            td.num { (s.datapoint_count) }
                            td { a href=(format!("/sessions/{}/csv", s.id_data_session)) { "CSV" } }
                        }
                    }
                }
            }
            (pager(&listing.page, "/sessions"))
        }
    };
    Ok(Html(
        layout::page(&viewer, Section::Sessions, "Data sessions", content).into_string(),
    ))
}

/// `GET /sessions/<id>`: one chart per series of the session.
pub async fn page(State(state): State<AppState>, viewer: Viewer, Path(id): Path<String>) -> PageResult {
    let session = access::session(&state, &viewer.caller, &id, Role::Viewer).await?;
    let now = unix_now();
    let end = session.end.unwrap_or(now);
    // Fewer points than buckets come back raw; otherwise 500 equal buckets (docs/api.md,
    // "Downsampled data").
    let step = (session.datapoint_count >= SESSION_BUCKETS)
        .then(|| ((end - session.start).max(1) as f64) / SESSION_BUCKETS as f64);
    let (all, truncated) = series::load(&state, &viewer.caller, &json!({"id_data_session": id})).await?;
    // The labels and units the session's gateway names in its Modbus template.
    let names = match devicecloud_store::devices::get(&state.db, &session.id_physical_device).await? {
        Some(device) => crate::device::documents(&state, &device).await?.1,
        None => std::collections::HashMap::new(),
    };
    let title = if session.label.is_empty() {
        format!("Session {}", session.id_data_session)
    } else {
        session.label.clone()
    };
    let content = html! {
        p.muted {
            (format::utc(Some(session.start))) " → " @if session.end.is_some() { (format::utc(session.end)) } @else { "still open" }
            " · " (session.datapoint_count) " points · "
            a href=(format!("/devices/{}", session.id_physical_device)) { "device" } " · "
            a href=(format!("/sessions/{id}/csv")) download { "Download CSV" }
        }
        @if truncated { p.notice { "Only the first " (series::MAX_POINTS) " points are drawn." } }
        @if all.is_empty() { p.muted { "No data in this session." } }
        div.grid {
            @for s in &all {
                div.card {
                    (chart::render(&Chart {
                        title: &format!("{} · {}", datatype_title(&names, s.datatype), s.source_device.get(..8).unwrap_or(&s.source_device)),
                        unit: names.get(&s.datatype).map(|n| n.unit.as_str()),
                        from: session.start as f64,
                        to: end as f64,
                        step,
                        points: &s.points,
                    }))
                }
            }
        }
    };
    Ok(Html(
        layout::page(&viewer, Section::Sessions, &title, content).into_string(),
    ))
}

/// `GET /sessions/<id>/csv`: the API's streamed download, for the signed-in viewer.
pub async fn csv(State(state): State<AppState>, viewer: Viewer, Path(id): Path<String>) -> PageResult<Response> {
    Ok(csv_response(service::csv(&state, &viewer.caller, &id).await?))
}
