//! The query parameters of the collections, as the service reads them: Yii's rules admit more
//! text than a plain integer schema says, and the document says so.

use utoipa::openapi::OpenApi;
use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Schema, Type};

use super::operations_mut;

/// `page`, `per-page` and the numeric `filter[…]` parameters, as the service reads them.
pub struct QueryParams;

impl utoipa::Modify for QueryParams {
    fn modify(&self, openapi: &mut OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            for operation in operations_mut(item) {
                for parameter in operation.parameters.iter_mut().flatten() {
                    let utoipa::openapi::RefOr::T(parameter) = parameter else {
                        continue;
                    };
                    let declared = serde_json::to_value(&parameter.schema).unwrap_or_default();
                    let is = |kind: &str| declared["type"] == kind || declared["type"][0] == kind;
                    let (schema, description) = match parameter.name.as_str() {
                        "page" => (any_text(), Some(PAGE)),
                        "per-page" => (any_text(), Some(PER_PAGE)),
                        name if name.starts_with("filter[") && is("integer") => {
                            (filter_value(Type::Integer, INTEGER_TEXT), None)
                        }
                        name if name.starts_with("filter[") && is("number") => {
                            (filter_value(Type::Number, NUMBER_TEXT), None)
                        }
                        _ => continue,
                    };
                    parameter.schema = Some(schema.into());
                    if let Some(description) = description {
                        parameter.description = Some(description.into());
                    }
                }
            }
        }
    }
}

const PAGE: &str = "The page, from 1; read like PHP's (int) cast and clamped to [1, pageCount]: a page past \
                    the end shows the last page (docs/api.md, \"Collections\")";
const PER_PAGE: &str = "Records per page; read like PHP's (int) cast and clamped to [1, largest]: 10000 on \
                        data, data-downsampled and event, 1000 elsewhere (docs/api.md, \"Collections\")";

/// Yii's integer pattern `/^[+-]?\d+$/`, of any size (PCRE's `$` also takes one final newline).
const INTEGER_TEXT: &str = r"^[+-]?[0-9]+\n?$";
/// Yii's number pattern `/^[-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$/`.
const NUMBER_TEXT: &str = r"^[-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?\n?$";

/// `page` and `per-page`: whole numbers, but as in Yii any text is taken, read like PHP's `(int)`
/// cast and clamped; so the document admits any text.
fn any_text() -> Schema {
    AnyOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Integer))
        .item(ObjectBuilder::new().schema_type(Type::String))
        .into()
}

/// A numeric filter value: Yii's validator pattern, of any size, or empty (an empty filter
/// value is no condition, as in Yii).
fn filter_value(kind: Type, pattern: &str) -> Schema {
    AnyOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(kind))
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(format!("^$|{pattern}"))),
        )
        .into()
}

/// A write body without required fields may be left out: an empty body reads as `{}`
/// (`http::body::json_object`), so `PATCH` with nothing changes nothing.
pub struct OptionalBodies;

impl utoipa::Modify for OptionalBodies {
    fn modify(&self, openapi: &mut OpenApi) {
        let optional: Vec<String> = openapi
            .components
            .iter()
            .flat_map(|components| &components.schemas)
            .filter_map(|(name, schema)| match schema {
                utoipa::openapi::RefOr::T(Schema::Object(object)) if object.required.is_empty() => Some(name.clone()),
                _ => None,
            })
            .collect();
        let optional = |name: &str| optional.iter().any(|n| n == name);
        for item in openapi.paths.paths.values_mut() {
            for operation in operations_mut(item) {
                let Some(utoipa::openapi::RefOr::T(body)) = operation.request_body.as_mut() else {
                    continue;
                };
                let name = body
                    .content
                    .get("application/json")
                    .and_then(|content| match content {
                        utoipa::openapi::RefOr::T(content) => content.schema.as_ref(),
                        utoipa::openapi::RefOr::Ref(_) => None,
                    })
                    .and_then(|schema| match schema {
                        utoipa::openapi::RefOr::Ref(r) => r.ref_location.strip_prefix("#/components/schemas/"),
                        utoipa::openapi::RefOr::T(_) => None,
                    });
                if name.is_some_and(optional) {
                    body.required = Some(utoipa::openapi::Required::False);
                }
            }
        }
    }
}
