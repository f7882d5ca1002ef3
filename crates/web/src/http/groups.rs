//! Groups: `GET /api/v2/group/index`, `GET|HEAD /api/v2/group`, `GET /api/v2/group/<id>`
//! (specification, Groups) and their management: create, edit, delete, members (docs/api.md,
//! "Management endpoints").

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, put};
use devicecloud_query::CollectionSpec;
use devicecloud_store::groups::{self, GroupRow};
use devicecloud_store::{ListArgs, Listing};
use serde_json::{Value, json};

use super::collection::{CollectionGet, CollectionPage, Listed, Rendered, Selection, spec};
use super::record::{Input, NewRecord, OneRecord};
use crate::caller::Caller;
use crate::http::error::ApiError;
use crate::render::{group_fields, group_links};
use crate::service::groups as service;
use crate::service::{access, memberships};
use crate::state::AppState;
use devicecloud_engine::auth::Role;

/// The groups the caller may see; pages are remembered (`page_cache`), since every client
/// starts with this list.
struct Groups;

impl Listed for Groups {
    type Row = GroupRow;
    const SPEC: CollectionSpec = spec(&groups::ATTRIBUTES, &groups::SORTABLE);
    const CACHED_AS: Option<&'static str> = Some("group");

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<GroupRow>, ApiError> {
        Ok(groups::list(&state.db, args).await?)
    }

    async fn render(&self, _: &AppState, rows: &[GroupRow], selection: &Selection) -> Rendered {
        Ok(rows.iter().map(|row| render(row, selection)).collect())
    }

    fn plain_json(&self, rows: &[GroupRow]) -> Option<String> {
        Some(crate::render::groups_json(rows))
    }
}

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/group", get(collection).post(create))
        .route("/api/v2/group/index", get(index))
        .route("/api/v2/group/{id}", get(view).patch(update).delete(remove))
        .route(
            "/api/v2/group/{id}/member/{id_user}",
            put(put_member).delete(remove_member),
        )
}

fn render(row: &GroupRow, selection: &Selection) -> Value {
    selection.render(group_fields(row), Vec::new(), Some(group_links(&row.id_group)))
}

/// List groups
///
/// The groups the caller holds a role in (administrators: every group), as a Yii2 collection. Also
/// at `/api/v2/group`. Any account.
#[utoipa::path(get, path = "/api/v2/group/index", tag = "groups",
    params(("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query), ("sort" = Option<String>, Query), ("fields" = Option<String>, Query), ("expand" = Option<String>, Query)),
    responses((status = 200, description = "Collection envelope of Group records", body = super::schemas::records::GroupCollection), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn index(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    get.serve(&Groups).await
}

/// List groups (collection path)
///
/// The same collection as `GET /api/v2/group/index`, at the collection's own path, where `POST`
/// creates a group. Any account.
#[utoipa::path(get, path = "/api/v2/group", tag = "groups",
    params(("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query), ("sort" = Option<String>, Query), ("fields" = Option<String>, Query), ("expand" = Option<String>, Query)),
    responses((status = 200, description = "Collection envelope of Group records", body = super::schemas::records::GroupCollection), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn collection(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    get.serve(&Groups).await
}

/// Get a group
///
/// One group. Viewer; 404 when invisible.
#[utoipa::path(get, path = "/api/v2/group/{id}", tag = "groups", params(("id" = String, Path)),
    responses((status = 200, description = "A Group record", body = super::schemas::records::Group), (status = 404, description = "Not found or not visible")), security(("bearer" = [])))]
pub async fn view(one: OneRecord) -> Result<Json, ApiError> {
    let group = access::group(&one.state, &one.caller, &one.id, Role::Viewer).await?;
    Ok(axum::Json(render(&group, &one.selection)))
}

/// A JSON answer with status 200.
type Json = axum::Json<Value>;

/// Create a group
///
/// Administrators only (401 otherwise); 201 with the group; 422 on invalid fields.
#[utoipa::path(post, path = "/api/v2/group", tag = "groups", request_body(content = super::schemas::bodies::NewGroup),
    responses((status = 201, description = "The created Group, with a Location header", body = super::schemas::records::Group), (status = 401, description = "Not an administrator"), (status = 422, description = "Invalid fields")), security(("bearer" = [])))]
pub async fn create(new: NewRecord) -> Result<Response, ApiError> {
    let row = service::create(&new.state, &new.caller, &new.input).await?;
    Ok(new.created(&format!("/api/v2/group/{}", row.id_group), render(&row, &new.selection)))
}

/// Change a group
///
/// Manager of the group; 422 on invalid fields.
#[utoipa::path(patch, path = "/api/v2/group/{id}", tag = "groups", params(("id" = String, Path)), request_body(content = super::schemas::bodies::GroupChanges),
    responses((status = 200, description = "The updated Group", body = super::schemas::records::Group), (status = 401, description = "Role below manager"), (status = 404, description = "Not found"), (status = 422, description = "Invalid fields")), security(("bearer" = [])))]
pub async fn update(one: OneRecord, Input(input): Input) -> Result<Json, ApiError> {
    let row = service::update(&one.state, &one.caller, &one.id, &input).await?;
    Ok(axum::Json(render(&row, &one.selection)))
}

/// Delete a group
///
/// Manager of the group; 204. The group is marked deleted: its webhooks are set inactive (event
/// 214), its gateways disconnected and refused (CONNACK 5).
#[utoipa::path(delete, path = "/api/v2/group/{id}", tag = "groups", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted (deleted_at set)"), (status = 401, description = "Role below manager"), (status = 404, description = "Not found")), security(("bearer" = [])))]
pub async fn remove(one: OneRecord) -> Result<StatusCode, ApiError> {
    service::delete(&one.state, &one.caller, &one.id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Give an account a role in a group
///
/// `{role}`: viewer, operator or manager. Manager of the group.
#[utoipa::path(put, path = "/api/v2/group/{id}/member/{id_user}", tag = "groups", params(("id" = String, Path), ("id_user" = String, Path)),
    request_body(content = super::schemas::bodies::NewRole),
    responses((status = 200, description = "The role given", body = super::schemas::records::Membership), (status = 401, description = "Neither administrator nor manager"), (status = 404, description = "Group or user not found"), (status = 422, description = "Invalid role")), security(("bearer" = [])))]
pub async fn put_member(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, id_user)): Path<(String, String)>,
    Input(input): Input,
) -> Result<Json, ApiError> {
    let role = memberships::put(&state, &caller, &id, &id_user, &input).await?;
    Ok(axum::Json(json!({"id_group": id, "id_user": id_user, "role": role})))
}

/// Take an account's role in a group
///
/// Manager of the group; 204, or 404 when the account held no role.
#[utoipa::path(delete, path = "/api/v2/group/{id}/member/{id_user}", tag = "groups", params(("id" = String, Path), ("id_user" = String, Path)),
    responses((status = 204, description = "Role removed"), (status = 401, description = "Neither administrator nor manager"), (status = 404, description = "No such membership")), security(("bearer" = [])))]
pub async fn remove_member(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, id_user)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    memberships::remove(&state, &caller, &id, &id_user).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::render::{group_fields, group_links, groups_json};
    #[test]
    fn group_pages_written_straight_match_the_records_rendered_through_maps() {
        let row = |id: &str, label: &str, kind: &str, country: Option<&str>, deleted: Option<i64>| GroupRow {
            id_group: id.into(),
            label: label.into(),
            r#type: kind.into(),
            subtype: "sub \"quoted\"".into(),
            id_country: country.map(Into::into),
            created_at: 1_763_726_400,
            deleted_at: deleted,
        };
        let rows = vec![
            row("0b9a-1", "Plain", "0", Some("FR"), None),
            row("0b9a-2", "Ünïcode \\ \u{1}", "3", None, Some(1_763_726_401)),
            row("0b9a-3", "", "unknown code", Some(""), None),
            row("0b9a-\"4\\\n", "tab\there", "1", Some("D\"E"), Some(-1)),
        ];
        let through_maps: Vec<Value> = rows
            .iter()
            .map(|r| Selection::default().render(group_fields(r), Vec::new(), Some(group_links(&r.id_group))))
            .collect();
        assert_eq!(groups_json(&rows), serde_json::to_string(&through_maps).unwrap());
        assert_eq!(groups_json(&[]), "[]");
    }
}
