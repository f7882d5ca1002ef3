//! Alarm rules and alarms (docs/api.md, "Alarms"): `POST|GET /api/v2/alarm-rule`,
//! `GET|PATCH|DELETE /api/v2/alarm-rule/<id>`, `GET /api/v2/alarm`, `GET /api/v2/alarm/<id>` and
//! `POST /api/v2/alarm/<id>/acknowledge`.

use axum::Router;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use devicecloud_engine::auth::Role;
use devicecloud_query::CollectionSpec;
use devicecloud_store::alarm_rules::{self, RuleRow};
use devicecloud_store::alarms::{self, AlarmRow};
use devicecloud_store::{ListArgs, Listing};
use serde_json::{Map, Value, json};

use super::collection::{CollectionGet, CollectionPage, Listed, Rendered, Selection, spec};
use super::record::{Input, NewRecord, OneRecord};
use crate::http::error::ApiError;
use crate::service::alarms as service;
use crate::state::AppState;

/// The routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/alarm-rule", get(rules).post(create))
        .route("/api/v2/alarm-rule/{id}", get(rule).patch(update).delete(remove))
        .route("/api/v2/alarm", get(index))
        .route("/api/v2/alarm/{id}", get(view))
        .route("/api/v2/alarm/{id}/acknowledge", post(acknowledge))
}

/// The rule record, in its documented order.
pub fn rule_fields(row: &RuleRow) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("id_alarm_rule".into(), json!(row.id_alarm_rule));
    map.insert("id_group".into(), json!(row.id_group));
    map.insert("label".into(), json!(row.label));
    map.insert("severity".into(), json!(row.severity));
    map.insert("condition".into(), json!(row.condition));
    map.insert("clear_condition".into(), json!(row.clear_condition));
    map.insert("inactivity_s".into(), json!(row.inactivity_s));
    map.insert("datatype".into(), json!(row.datatype));
    map.insert("source_device".into(), json!(row.source_device));
    map.insert("for_s".into(), json!(row.for_s));
    map.insert("is_active".into(), json!(row.is_active));
    map.insert("created_at".into(), json!(row.created_at));
    map.insert("updated_at".into(), json!(row.updated_at));
    map.insert("created_by".into(), json!(row.created_by));
    map
}

fn render_rule(row: &RuleRow, selection: &Selection) -> Value {
    let links = json!({
        "self": {"href": format!("/api/v2/alarm-rule/{}", row.id_alarm_rule)},
        "alarms": {"href": format!("/api/v2/alarm?filter[id_alarm_rule]={}", row.id_alarm_rule)},
    });
    selection.render(rule_fields(row), Vec::new(), Some(links))
}

fn render_alarm(row: &AlarmRow, selection: &Selection) -> Value {
    let links = json!({
        "self": {"href": format!("/api/v2/alarm/{}", row.id_alarm)},
        "rule": {"href": format!("/api/v2/alarm-rule/{}", row.id_alarm_rule)},
    });
    selection.render(devicecloud_engine::alarms::record(row), Vec::new(), Some(links))
}

/// The rules of the groups the caller sees.
struct Rules;

impl Listed for Rules {
    type Row = RuleRow;
    const SPEC: CollectionSpec = spec(&alarm_rules::ATTRIBUTES, &alarm_rules::SORTABLE);

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<RuleRow>, ApiError> {
        Ok(alarm_rules::list(&state.db, args).await?)
    }

    async fn render(&self, _: &AppState, rows: &[RuleRow], selection: &Selection) -> Rendered {
        Ok(rows.iter().map(|row| render_rule(row, selection)).collect())
    }
}

/// The alarms of the groups the caller sees.
struct Alarms;

impl Listed for Alarms {
    type Row = AlarmRow;
    const SPEC: CollectionSpec = spec(&alarms::ATTRIBUTES, &alarms::SORTABLE);

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<AlarmRow>, ApiError> {
        Ok(alarms::list(&state.db, args).await?)
    }

    async fn render(&self, _: &AppState, rows: &[AlarmRow], selection: &Selection) -> Rendered {
        Ok(rows.iter().map(|row| render_alarm(row, selection)).collect())
    }
}

/// List alarm rules
///
/// The rules of the groups the caller sees, oldest first.
#[utoipa::path(get, path = "/api/v2/alarm-rule", tag = "alarms",
    params(("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query), ("sort" = Option<String>, Query), ("fields" = Option<String>, Query)),
    responses((status = 200, description = "Collection envelope of AlarmRule records", body = super::schemas::records::AlarmRuleCollection), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn rules(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    get.serve(&Rules).await
}

/// Create an alarm rule
///
/// A CEL `condition` over `value`, `previous`, `rate`, `datatype` and `serial`, or an
/// `inactivity_s`; a manager of the group. A condition that does not compile or does not give a
/// boolean is a 422 naming its position.
#[utoipa::path(post, path = "/api/v2/alarm-rule", tag = "alarms",
    request_body(content = super::schemas::bodies::NewAlarmRule),
    responses((status = 201, description = "The AlarmRule, with a Location header", body = super::schemas::records::AlarmRule), (status = 401, description = "Role below manager"), (status = 422, description = "Invalid fields, a condition that does not compile, or a group with alarm_rules_per_group rules already")),
    security(("bearer" = [])))]
pub async fn create(new: NewRecord) -> Result<Response, ApiError> {
    let rule = service::create(&new.state, &new.caller, &new.input).await?;
    let record = render_rule(&rule, &new.selection);
    Ok(new.created(&format!("/api/v2/alarm-rule/{}", rule.id_alarm_rule), record))
}

/// Get an alarm rule
///
/// One rule, to whoever sees its group.
#[utoipa::path(get, path = "/api/v2/alarm-rule/{id}", tag = "alarms", params(("id" = String, Path)),
    responses((status = 200, description = "An AlarmRule record", body = super::schemas::records::AlarmRule), (status = 404, description = "Not found or not visible")),
    security(("bearer" = [])))]
pub async fn rule(one: OneRecord) -> Result<axum::Json<Value>, ApiError> {
    let rule = service::get_rule(&one.state, &one.caller, &one.id, Role::Viewer).await?;
    Ok(axum::Json(render_rule(&rule, &one.selection)))
}

/// Change an alarm rule
///
/// Any field but `id_group`; null clears an optional one. A manager of its group. Made inactive,
/// its open alarms clear.
#[utoipa::path(patch, path = "/api/v2/alarm-rule/{id}", tag = "alarms", params(("id" = String, Path)),
    request_body(content = super::schemas::bodies::AlarmRuleChanges),
    responses((status = 200, description = "The changed AlarmRule", body = super::schemas::records::AlarmRule), (status = 401, description = "Role below manager"), (status = 404, description = "Not found or not visible"), (status = 422, description = "Invalid fields or a condition that does not compile")),
    security(("bearer" = [])))]
pub async fn update(one: OneRecord, Input(input): Input) -> Result<axum::Json<Value>, ApiError> {
    let rule = service::update(&one.state, &one.caller, &one.id, &input).await?;
    Ok(axum::Json(render_rule(&rule, &one.selection)))
}

/// Delete an alarm rule
///
/// A manager of its group; its open alarms clear, its alarms stay.
#[utoipa::path(delete, path = "/api/v2/alarm-rule/{id}", tag = "alarms", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 401, description = "Role below manager"), (status = 404, description = "Not found or not visible")),
    security(("bearer" = [])))]
pub async fn remove(one: OneRecord) -> Result<StatusCode, ApiError> {
    service::delete(&one.state, &one.caller, &one.id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// List alarms
///
/// The alarms of the groups the caller sees, newest first; `filter[status]=active` for the open
/// ones not acknowledged.
#[utoipa::path(get, path = "/api/v2/alarm", tag = "alarms",
    params(("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query), ("sort" = Option<String>, Query), ("fields" = Option<String>, Query)),
    responses((status = 200, description = "Collection envelope of Alarm records", body = super::schemas::records::AlarmCollection), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn index(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    get.serve(&Alarms).await
}

/// Get an alarm
///
/// One alarm, to whoever sees its group.
#[utoipa::path(get, path = "/api/v2/alarm/{id}", tag = "alarms", params(("id" = String, Path)),
    responses((status = 200, description = "An Alarm record", body = super::schemas::records::Alarm), (status = 404, description = "Not found or not visible")),
    security(("bearer" = [])))]
pub async fn view(one: OneRecord) -> Result<axum::Json<Value>, ApiError> {
    let alarm = service::get_alarm(&one.state, &one.caller, &one.id, Role::Viewer).await?;
    Ok(axum::Json(render_alarm(&alarm, &one.selection)))
}

/// Acknowledge an alarm
///
/// An active alarm becomes `acknowledged` (and stays so on later matches until it clears), with
/// event 231; an operator of its group. An alarm acknowledged before is answered as it is.
#[utoipa::path(post, path = "/api/v2/alarm/{id}/acknowledge", tag = "alarms", params(("id" = String, Path)),
    responses((status = 200, description = "The Alarm", body = super::schemas::records::Alarm), (status = 401, description = "Role below operator"), (status = 404, description = "Not found or not visible")),
    security(("bearer" = [])))]
pub async fn acknowledge(one: OneRecord) -> Result<axum::Json<Value>, ApiError> {
    let alarm = service::acknowledge(&one.state, &one.caller, &one.id).await?;
    Ok(axum::Json(render_alarm(&alarm, &one.selection)))
}
