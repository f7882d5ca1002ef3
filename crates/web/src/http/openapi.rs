//! `/api/v2/openapi.json`: the OpenAPI 3 document generated from the handlers' annotations, so
//! it cannot drift from the routes that exist.

use axum::Router;
use axum::routing::get;
use utoipa::OpenApi;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};

use super::{
    alarms, commands, data, device_collection, devices, events, firmware, firmware_download, gateway, groups, health,
    jobs, oauth, retention, sessions, stream, twins, users, webhooks,
};
use crate::state::AppState;

mod answers;
mod requests;

use answers::{ErrorBodies, Examples, FieldsSelection};
use requests::{OptionalBodies, QueryParams};

#[derive(OpenApi)]
#[openapi(
    info(title = "devicecloud REST API", description = "Groups, physical devices, data, events and commands of an IoT device cloud."),
    paths(
        oauth::token::token, oauth::revoke::revoke,
        groups::index, groups::collection, groups::view, groups::create, groups::update, groups::remove, groups::put_member, groups::remove_member,
        retention::view_retention, retention::update_retention,
        users::index, users::create, users::view, users::view_me, users::update, users::update_me,
        gateway::measurements, gateway::events, firmware_download::download,
        device_collection::index, devices::provision, devices::view, devices::update, devices::archive, devices::rotate_token,
        commands::ping, commands::restart, commands::status, commands::request_measurement, commands::wifi_scan, commands::wifi_connect, commands::wifi_disconnect, commands::reset_main_counter, commands::reset_daily_counter, commands::modbus_write, commands::zwave_node,
        data::raw, data::export, data::downsampled, events::index, events::types, stream::stream,
        sessions::index, sessions::view, sessions::download_csv,
        health::healthz, health::readyz, health::metrics_text,
        webhooks::index, webhooks::view, webhooks::create, webhooks::update, webhooks::remove, webhooks::attempts, webhooks::formatters,
        twins::index, twins::view, twins::update,
        jobs::index, jobs::create, jobs::view, jobs::cancel, jobs::executions,
        firmware::index, firmware::upload, firmware::view, firmware::remove, firmware::public_key,
        alarms::rules, alarms::create, alarms::rule, alarms::update, alarms::remove, alarms::index, alarms::view, alarms::acknowledge,
    ),
    components(schemas(data::ExportFormat)),
    modifiers(&BearerAuth, &StandardErrors, &ErrorBodies, &RateLimits, &Examples, &FieldsSelection, &QueryParams, &OptionalBodies, &OperationIds),
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

/// The error answers every operation can give, added where an operation does not describe
/// them itself, with the specification's error body as their schema: 400 (a malformed query
/// string, an `expand` deeper than allowed, an unreadable body), 401 on operations that need a
/// token, 404 on paths that name a record, 422 on operations that take a body, 408 and 413 on
/// those too (docs/operations.md, "Limits").
struct StandardErrors;

impl utoipa::Modify for StandardErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};

        let error = ObjectBuilder::new()
            .property("name", ObjectBuilder::new().schema_type(Type::String))
            .property("message", ObjectBuilder::new().schema_type(Type::String))
            .property("code", ObjectBuilder::new().schema_type(Type::Integer))
            .property("status", ObjectBuilder::new().schema_type(Type::Integer))
            .required("name")
            .required("message")
            .required("code")
            .required("status");
        let field_error = ObjectBuilder::new()
            .property("field", ObjectBuilder::new().schema_type(Type::String))
            .property("message", ObjectBuilder::new().schema_type(Type::String))
            .required("field")
            .required("message");
        let components = openapi.components.get_or_insert_with(Default::default);
        components.schemas.insert("Error".into(), error.into());
        components
            .schemas
            .insert("FieldErrors".into(), ArrayBuilder::new().items(field_error).into());

        for (path, item) in openapi.paths.paths.iter_mut() {
            if !path.starts_with("/api/") {
                continue;
            }
            let names_a_record = path.contains('{');
            for operation in operations_mut(item) {
                let secured = operation.security.as_ref().is_some_and(|s| !s.is_empty());
                let has_body = operation.request_body.is_some();
                let mut wanted = vec![(
                    "400",
                    "Bad request: a malformed query string, `expand` too deep, or an unreadable body",
                    "Error",
                )];
                if secured {
                    wanted.push((
                        "401",
                        "Missing or invalid bearer token, or a role too low for the action",
                        "Error",
                    ));
                }
                if names_a_record {
                    wanted.push(("404", "Not found, or not visible to the caller", "Error"));
                }
                if has_body {
                    wanted.push(("408", "The body did not arrive within the body timeout", "Error"));
                    wanted.push(("413", "The body is larger than the limit", "Error"));
                    wanted.push(("422", "Invalid fields", "FieldErrors"));
                }
                for (status, description, schema) in wanted {
                    operation
                        .responses
                        .responses
                        .entry(status.to_string())
                        .or_insert_with(|| error_answer(description, schema).build().into());
                }
            }
        }
    }
}

/// An error answer of `description` whose JSON body has the component schema `schema`.
fn error_answer(description: &str, schema: &str) -> utoipa::openapi::ResponseBuilder {
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    ResponseBuilder::new().description(description).content(
        "application/json",
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name(schema)))
            .build(),
    )
}

/// The rate limit per account (docs/operations.md, "Limits") on every operation that needs a
/// token: Yii2's `X-Rate-Limit-*` headers on its answers, and the 429 with `Retry-After`.
struct RateLimits;

impl utoipa::Modify for RateLimits {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::RefOr;
        use utoipa::openapi::header::HeaderBuilder;
        use utoipa::openapi::schema::{ObjectBuilder, Type};

        let header = |description: &str| {
            HeaderBuilder::new()
                .schema(Some(ObjectBuilder::new().schema_type(Type::Integer)))
                .description(Some(description))
                .build()
        };
        let headers = [
            ("X-Rate-Limit-Limit", "Requests allowed per period to this account"),
            ("X-Rate-Limit-Remaining", "Requests left now"),
            (
                "X-Rate-Limit-Reset",
                "Seconds until every request of the period is available again",
            ),
        ];
        for (path, item) in openapi.paths.paths.iter_mut() {
            if !path.starts_with("/api/") {
                continue;
            }
            for operation in operations_mut(item) {
                if operation.security.as_ref().is_none_or(|s| s.is_empty()) {
                    continue;
                }
                operation
                    .responses
                    .responses
                    .entry("429".to_string())
                    .or_insert_with(|| {
                        error_answer("Rate limit exceeded for this account", "Error")
                            .header("Retry-After", header("Seconds until one more request is allowed"))
                            .build()
                            .into()
                    });
                for response in operation.responses.responses.values_mut() {
                    if let RefOr::T(response) = response {
                        for (name, description) in headers {
                            response
                                .headers
                                .entry(name.to_string())
                                .or_insert_with(|| RefOr::T(header(description)));
                        }
                    }
                }
            }
        }
    }
}

/// Every operation of a path item (the methods the service answers).
fn operations_mut(item: &mut utoipa::openapi::PathItem) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.patch,
        &mut item.head,
    ]
    .into_iter()
    .flatten()
}

/// Operation ids unique across the document, as OpenAPI requires: `<tag>_<handler>`
/// (`groups_index`, `data_sessions_view`, `commands_ping`), since several modules name their
/// handlers alike (`index`, `view`, …). Swagger UI's "Try it out" keys operations by id, and
/// client generators name their functions after it (docs/api.md).
struct OperationIds;

impl utoipa::Modify for OperationIds {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            for operation in operations_mut(item) {
                let tag = operation.tags.as_ref().and_then(|tags| tags.first());
                if let (Some(tag), Some(id)) = (tag, &operation.operation_id) {
                    operation.operation_id = Some(format!("{}_{id}", tag.replace(' ', "_")));
                }
            }
        }
    }
}

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v2/openapi.json", get(document))
}

/// The document, built and serialized once: it depends on nothing but the code, and its
/// modifiers walk every operation.
static DOCUMENT: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| serde_json::to_string(&ApiDoc::openapi()).expect("the document serializes"));

async fn document() -> impl axum::response::IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        DOCUMENT.as_str(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_has_an_id_of_its_own() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        let mut ids = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let id = operation["operationId"].as_str();
                ids.push(
                    id.unwrap_or_else(|| panic!("{method} {path} has no operationId"))
                        .to_owned(),
                );
            }
        }
        let count = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), count, "operation ids used twice among {ids:?}");
        assert!(ids.contains(&"groups_index".to_owned()), "{ids:?}");
        assert!(ids.contains(&"data_sessions_index".to_owned()), "{ids:?}");
    }
}
