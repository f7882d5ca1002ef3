//! `/api/v2/openapi.json`: the OpenAPI 3 document generated from the handlers' annotations, so
//! it cannot drift from the routes that exist.

use axum::Router;
use axum::routing::get;
use utoipa::OpenApi;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};

use super::{
    commands, data, device_collection, devices, events, gateway, groups, health, oauth, sessions, users, webhooks,
};
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(
    info(title = "devicecloud REST API", description = "Groups, physical devices, data, events and commands of an IoT device cloud."),
    paths(
        oauth::token,
        groups::index, groups::view, groups::create, groups::update, groups::remove, groups::put_member, groups::remove_member,
        users::create, users::view,
        gateway::measurements, gateway::events,
        device_collection::index, devices::provision, devices::view, devices::update, devices::archive, devices::rotate_token,
        commands::ping, commands::restart, commands::status, commands::request_measurement, commands::wifi_scan, commands::wifi_connect, commands::wifi_disconnect, commands::reset_main_counter, commands::reset_daily_counter, commands::modbus_write, commands::zwave_node,
        data::raw, data::downsampled, events::index, events::types,
        sessions::index, sessions::view, sessions::download_csv,
        health::healthz, health::readyz, health::metrics_text,
        webhooks::index, webhooks::view, webhooks::create, webhooks::update, webhooks::remove, webhooks::attempts, webhooks::formatters,
    ),
    modifiers(&BearerAuth),
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
        components.add_security_scheme("basic", SecurityScheme::Http(Http::new(HttpAuthScheme::Basic)));
    }
}

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v2/openapi.json", get(document))
}

async fn document() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(ApiDoc::openapi())
}
