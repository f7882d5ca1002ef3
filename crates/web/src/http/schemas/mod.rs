//! The schemas of the OpenAPI document (`http::openapi`): the records and envelopes the API
//! answers ([`records`]) and the bodies it takes ([`bodies`]), exact enough that a generated
//! client parses every answer into typed models and that a fuzzer finds no request the document
//! and the service judge differently (docs/api.md, "OpenAPI document").

pub mod bodies;
pub mod examples;
pub mod records;
mod text;

use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::{RefOr, schema::AdditionalProperties};
use utoipa::{PartialSchema, ToSchema};

/// A schema type whose JSON Schema a function builds, for what a derive cannot say (patterns,
/// unions, numbers also taken as text).
macro_rules! built_schema {
    ($(#[doc = $doc:literal])* $name:ident => $schema:expr) => {
        $(#[doc = $doc])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                let schema: utoipa::openapi::schema::Schema = $schema;
                schema.into()
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}
pub(crate) use built_schema;

/// A Yii2 collection envelope of `$record`s: `items` (each the record, or `[]` when `fields`
/// kept nothing), `_links` (self, first, last, prev, next), `_meta` (the page) and `expand`
/// (the relations the records can expand); `$extra` adds a collection's own keys (`labels`, …).
macro_rules! collection {
    ($name:ident, $record:ident $(, $extra:expr)?) => {
        #[doc = concat!("A page of ", stringify!($record), " records.")]
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                let envelope = $crate::http::schemas::envelope(stringify!($record));
                $(let envelope = $extra(envelope);)?
                utoipa::openapi::schema::Schema::from(envelope).into()
            }
        }

        impl utoipa::ToSchema for $name {
            fn schemas(
                out: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>,
            ) {
                use utoipa::PartialSchema;
                out.push((stringify!($record).into(), $record::schema()));
                <$record as utoipa::ToSchema>::schemas(out);
                $crate::http::schemas::envelope_parts(out);
            }
        }
    };
}
pub(crate) use collection;

/// The `_links` of a record or a page: `{name: {href}}`.
pub struct Links;

impl PartialSchema for Links {
    fn schema() -> RefOr<Schema> {
        let link = ObjectBuilder::new()
            .property("href", ObjectBuilder::new().schema_type(Type::String))
            .required("href");
        ObjectBuilder::new()
            .additional_properties(Some(AdditionalProperties::from(RefOr::T(Schema::from(link)))))
            .description(Some("Links by name (`self`, `index`, …), each `{href}`"))
            .into()
    }
}

impl ToSchema for Links {}

/// The `_meta` of a page (specification, Pagination).
#[derive(ToSchema)]
#[expect(dead_code, reason = "describes the page the collection layer builds")]
pub struct Meta {
    #[schema(rename = "totalCount")]
    total_count: i64,
    #[schema(rename = "pageCount")]
    page_count: i64,
    #[schema(rename = "currentPage")]
    current_page: i64,
    #[schema(rename = "perPage")]
    per_page: i64,
}

/// The name of the schema of a record that `fields` emptied: `[]`, as Yii answers it.
pub const NO_FIELDS: &str = "NoFields";

/// A record reference that may also be `[]` (every record the API answers: `fields` can leave
/// nothing of it).
pub fn record_or_nothing(record: &str) -> Schema {
    utoipa::openapi::schema::AnyOfBuilder::new()
        .item(utoipa::openapi::Ref::from_schema_name(record))
        .item(utoipa::openapi::Ref::from_schema_name(NO_FIELDS))
        .into()
}

/// The envelope of a page of `record`s.
pub fn envelope(record: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .property("items", ArrayBuilder::new().items(RefOr::T(record_or_nothing(record))))
        .required("items")
        .property("_links", utoipa::openapi::Ref::from_schema_name("Links"))
        .required("_links")
        .property("_meta", utoipa::openapi::Ref::from_schema_name("Meta"))
        .required("_meta")
        .property(
            "expand",
            ArrayBuilder::new()
                .items(ObjectBuilder::new().schema_type(Type::String))
                .description(Some("The relations `expand` takes on these records")),
        )
}

/// The `labels` key of a collection: a field path → its human-readable label.
pub fn with_labels(envelope: ObjectBuilder) -> ObjectBuilder {
    envelope.property(
        "labels",
        ObjectBuilder::new()
            .additional_properties(Some(AdditionalProperties::from(RefOr::T(Schema::from(
                ObjectBuilder::new().schema_type(Type::String),
            )))))
            .description(Some("Field path → its human-readable label")),
    )
}

/// The schemas every envelope refers to.
pub fn envelope_parts(out: &mut Vec<(String, RefOr<Schema>)>) {
    out.push(("Links".into(), Links::schema()));
    out.push(("Meta".into(), Meta::schema()));
    out.push((
        NO_FIELDS.into(),
        ArrayBuilder::new()
            .items(ObjectBuilder::new())
            .max_items(Some(0))
            .description(Some("A record of which `fields` kept nothing"))
            .into(),
    ));
}
