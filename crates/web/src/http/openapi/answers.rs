//! What the document says of answers beyond the handlers' annotations: the body of every error,
//! an example of every answer, and the `[]` a record becomes when `fields` keeps nothing.

use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::AnyOfBuilder;
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr};

use super::operations_mut;
use crate::http::schemas::{examples, record_or_nothing, records::RECORDS};

/// The component a schema refers to (`#/components/schemas/<name>`), if it is a reference.
fn referenced(schema: Option<&RefOr<utoipa::openapi::schema::Schema>>) -> Option<&str> {
    match schema {
        Some(RefOr::Ref(reference)) => reference.ref_location.strip_prefix("#/components/schemas/"),
        _ => None,
    }
}

/// Every error answer has a JSON body: `FieldErrors` for 422 (`[{field, message}]`), the
/// specification's `Error` otherwise (OAuth answers add `error` and `error_description`). A
/// command's error may also be the device's own `{status, payload}`, passed through with its
/// status (a gateway's 400 `Invalid request`, or 404 for a node it does not have).
pub struct ErrorBodies;

impl utoipa::Modify for ErrorBodies {
    fn modify(&self, openapi: &mut OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            for operation in operations_mut(item) {
                let command = operation.tags.iter().flatten().any(|tag| tag == "commands");
                for (status, response) in operation.responses.responses.iter_mut() {
                    let RefOr::T(response) = response else { continue };
                    if status.as_str() < "400" || !response.content.is_empty() {
                        continue;
                    }
                    let content = match status.as_str() {
                        "422" => ContentBuilder::new().schema(Some(Ref::from_schema_name("FieldErrors"))),
                        "401" => ContentBuilder::new().schema(Some(Ref::from_schema_name("Error"))),
                        _ if command => ContentBuilder::new()
                            .schema(Some(
                                AnyOfBuilder::new()
                                    .item(Ref::from_schema_name("Error"))
                                    .item(Ref::from_schema_name("DeviceAnswer")),
                            ))
                            .example(examples::error(status)),
                        _ => ContentBuilder::new().schema(Some(Ref::from_schema_name("Error"))),
                    };
                    response
                        .content
                        .insert("application/json".into(), content.build().into());
                }
            }
        }
    }
}

/// An example on every JSON answer: the record's, a page of one for a collection, the
/// specification's error body with a message the service gives.
pub struct Examples;

impl utoipa::Modify for Examples {
    fn modify(&self, openapi: &mut OpenApi) {
        for (path, item) in openapi.paths.paths.iter_mut() {
            for operation in operations_mut(item) {
                add_examples(path, operation);
            }
        }
    }
}

fn add_examples(path: &str, operation: &mut Operation) {
    for (status, response) in operation.responses.responses.iter_mut() {
        let RefOr::T(response) = response else { continue };
        for content in response.content.values_mut() {
            let RefOr::T(content) = content else { continue };
            let Some(name) = referenced(content.schema.as_ref()) else {
                continue;
            };
            content.example = match (name, name.strip_suffix("Collection")) {
                ("Error", _) if path.starts_with("/oauth2/") => examples::oauth_error(status),
                ("Error", _) => examples::error(status),
                (_, Some(record)) => examples::of(record).map(|r| examples::page_of(path, r)),
                _ => examples::of(name),
            };
        }
    }
}

/// `fields` can leave any field of a record out, and nothing of it (`[]`): the records' fields
/// are optional, and each answer of a single record may be `[]`.
pub struct FieldsSelection;

impl utoipa::Modify for FieldsSelection {
    fn modify(&self, openapi: &mut OpenApi) {
        if let Some(components) = openapi.components.as_mut() {
            for name in RECORDS {
                if let Some(RefOr::T(utoipa::openapi::schema::Schema::Object(object))) =
                    components.schemas.get_mut(name)
                {
                    object.required.clear();
                }
            }
        }
        for item in openapi.paths.paths.values_mut() {
            for operation in operations_mut(item) {
                for response in operation.responses.responses.values_mut() {
                    let RefOr::T(response) = response else { continue };
                    for content in response.content.values_mut() {
                        let RefOr::T(content) = content else { continue };
                        if let Some(name) = referenced(content.schema.as_ref())
                            && RECORDS.contains(&name)
                        {
                            content.schema = Some(RefOr::T(record_or_nothing(name)));
                        }
                    }
                }
            }
        }
    }
}
