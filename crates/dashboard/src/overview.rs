//! `GET /`: the groups the viewer can see, with device counts and how many are online,
//! offline, and expected on but off.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::response::Html;
use devicecloud_store::device_collection::{self, StatusCounts};
use devicecloud_store::groups;
use maud::html;

use crate::alarms;
use crate::layout::{self, Section};
use crate::page::{PageQuery, PageResult, list_args, pager, role_name};
use crate::viewer::Viewer;
use devicecloud_web::state::AppState;

pub async fn page(State(state): State<AppState>, viewer: Viewer, Query(q): Query<PageQuery>) -> PageResult {
    let listing = groups::list(&state.db, list_args(&viewer.caller, None, None, q.page, 100)).await?;
    let ids: Vec<&str> = listing.items.iter().map(|g| g.id_group.as_str()).collect();
    let counts: HashMap<String, StatusCounts> = device_collection::status_counts(&state.db, &ids)
        .await?
        .into_iter()
        .map(|c| (c.id_group.clone(), c))
        .collect();
    let open = alarms::open_alarms(&state, &viewer, serde_json::Map::new(), "/").await?;
    let content = html! {
        h2 { "Open alarms" }
        (open)
        h2 { "Groups" }
        @if listing.items.is_empty() {
            p.notice { "You hold no role in any group yet. An administrator can add you to one." }
        } @else {
            table {
                thead { tr {
                    th { "Group" } th { "Type" } th { "Your role" }
                    th.num { "Devices" } th.num { "Online" } th.num { "Offline" } th.num { "Expected on · off" }
                } }
                tbody {
                    @for group in &listing.items {
                        @let c = counts.get(&group.id_group).cloned().unwrap_or_default();
                        tr {
                            td {
                                a href=(format!("/groups/{}", group.id_group)) { (group.label) }
                                @if group.deleted_at.is_some() { " " span.status.off { "deleted" } }
                            }
                            td { (group.r#type) }
                            td { (role_name(&viewer.caller, &group.id_group)) }
                            td.num { (c.devices) }
                            td.num { (c.online) }
                            td.num { (c.offline) }
                            td.num { @if c.expected_on_but_off > 0 { span.status.alarm { (c.expected_on_but_off) } } @else { "0" } }
                        }
                    }
                }
            }
            (pager(&listing.page, "/"))
        }
    };
    Ok(Html(
        layout::page(&viewer, Section::Fleet, "Fleet", content).into_string(),
    ))
}
