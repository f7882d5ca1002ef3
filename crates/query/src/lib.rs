//! The Yii2 collection language of the REST API: `page`, `per-page`, `sort`, `fields`, `expand`
//! and `filter` (query string or JSON body), parsed into typed values with Yii2's error messages.
//!
//! Pure and synchronous: the server turns a request into a [`CollectionQuery`], the store turns its
//! [`Filter`] and [`SortKey`] into SQL, and [`links`] rebuilds the `_links` and `Link` header.
//! Behaviour follows Yii2's REST conventions, with the decisions of docs/api.md, "Collections".
//! No input can make it panic or recurse without bound.

// Input-derived data must never panic: these lints keep that promise checkable.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing,
        clippy::unreachable,
        clippy::todo
    )
)]

pub mod collection;
pub mod error;
pub mod fields;
pub mod filter;
pub mod links;
pub mod pagination;
pub mod params;
pub mod sort;

mod php;

pub use collection::{CollectionQuery, CollectionSpec};
pub use error::QueryError;
pub use filter::{
    AttrKind, Attribute, CompareOp, DEFAULT_MAX_LIST_VALUES, Filter, MAX_FILTER_BYTES, MAX_LIKE_CHARS, MAX_VALUES,
    Scalar, parse_filter,
};
pub use links::{link_header, page_links};
pub use pagination::{Page, PageRequest, php_intval};
pub use params::{MAX_INPUT_VARS, Param, Params};
pub use sort::{SortKey, parse_sort};
