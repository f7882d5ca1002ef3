//! Measurements: raw points (`GET /api/v2/data`, `/api/v2/data/index`) and downsampled ones
//! (`GET /api/v2/data-downsampled`, `/index`), specification "Raw data" and "Downsampled data".

use axum::Router;
use axum::response::Response;
use axum::routing::get;
use devicecloud_query::{CollectionSpec, CompareOp, Filter, SortKey};
use devicecloud_store::downsampled::{self, Bucket};
use devicecloud_store::raw_data::{self, RawPoint};
use devicecloud_store::{ListArgs, Listing, unix_now};
use serde_json::{Map, Value, json};

use super::collection::{CollectionGet, CollectionPage, CollectionRoutes, Listed, Rendered, Selection, spec};
use crate::http::error::ApiError;
use crate::render::{export_response, record_fields};
use crate::service::export::{self, Format};
use crate::state::AppState;

/// Page sizes of the data endpoints: specification Limits (500 by default) and docs/api.md,
/// "Reading" (at most 10000).
const fn data_spec(spec: CollectionSpec) -> CollectionSpec {
    CollectionSpec {
        default_per_page: 500,
        max_per_page: 10_000,
        ..spec
    }
}

/// Raw points of one group, latest first.
struct RawData;

impl Listed for RawData {
    type Row = RawPoint;
    const SPEC: CollectionSpec = data_spec(spec(&raw_data::ATTRIBUTES, &raw_data::SORTABLE));

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<RawPoint>, ApiError> {
        if !names_group(args.filter) {
            return Err(ApiError::BadRequest("filter[id_group] is required".into()));
        }
        Ok(raw_data::list(&state.db, args).await?)
    }

    async fn render(&self, _: &AppState, points: &[RawPoint], selection: &Selection) -> Rendered {
        Ok(selection.plain(points, record_fields))
    }
}

/// Downsampled points: rollups, or raw points for short intervals.
struct Downsampled;

impl Listed for Downsampled {
    type Row = Bucket;
    const SPEC: CollectionSpec = data_spec(spec(&downsampled::ATTRIBUTES, downsampled::SORTABLE));

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<Bucket>, ApiError> {
        if let Some(why) = downsampled::unanswerable_session_filter(args.filter) {
            return Err(ApiError::invalid("filter", why));
        }
        Ok(downsampled::list(&state.db, args, unix_now()).await?)
    }

    async fn render(&self, _: &AppState, buckets: &[Bucket], selection: &Selection) -> Rendered {
        Ok(selection.plain(buckets, bucket_fields))
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .collection("/api/v2/data", get(raw))
        .route("/api/v2/data/export", get(export))
        .collection("/api/v2/data-downsampled", get(downsampled))
}

/// Whether the filter's top-level conjunction names the group (`filter[id_group]=…`, or its
/// `eq` / `in` forms): the specification requires it on `data`.
fn names_group(filter: Option<&Filter>) -> bool {
    match filter {
        Some(Filter::And(parts)) => parts.iter().any(|p| names_group(Some(p))),
        Some(Filter::Compare { attr, op, .. }) => *attr == "id_group" && *op == CompareOp::Eq,
        Some(Filter::In { attr, negated, .. }) => *attr == "id_group" && !negated,
        _ => false,
    }
}

/// A time as JSON: an integer when whole, a fraction otherwise.
fn seconds(value: f64) -> Value {
    if value.fract() == 0.0 && value.abs() < 9.0e15 {
        json!(value as i64)
    } else {
        json!(value)
    }
}

fn bucket_fields(b: &Bucket) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("id_container_data_latest".into(), json!(b.id_container_data_latest));
    map.insert("id_group".into(), json!(b.id_group));
    map.insert("datatype".into(), json!(b.datatype));
    map.insert("source_device".into(), json!(b.source_device));
    map.insert("timestamp_seconds".into(), seconds(b.timestamp_seconds));
    map.insert("min_val".into(), json!(b.min_val));
    map.insert("max_val".into(), json!(b.max_val));
    map.insert("avg_val".into(), json!(b.avg_val));
    map.insert("count_val".into(), json!(b.count_val));
    map
}

/// Raw measurements
///
/// Raw points of the groups the caller can see, latest first. `filter[id_group]` is required (400
/// without it); every attribute filters, sorts and pages as a Yii2 collection (per-page 500 by
/// default, at most 10,000). Any account; an invisible group is simply empty. 422 on an invalid
/// filter (like at most 256 characters, a filter at most 64 KiB, at most 1,000 query parameters).
#[utoipa::path(get, path = "/api/v2/data", tag = "data",
    params(("filter[id_group]" = String, Query, description = "required"), ("filter[timestamp_seconds][gte]" = Option<i64>, Query), ("filter[datatype]" = Option<i64>, Query), ("filter[source_device]" = Option<String>, Query), ("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query), ("sort" = Option<String>, Query)),
    responses((status = 200, description = "Collection envelope of raw data points, latest first", body = super::schemas::records::DataPointCollection), (status = 400, description = "filter[id_group] is missing"), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn raw(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    get.serve(&RawData).await
}

/// Downsampled measurements
///
/// Buckets of min, max, avg and count per series: per day, hour or minute (or raw points) as the
/// length of the `timestamp_seconds` interval decides; bounds apply to bucket starts. Without
/// `filter[id_group]` the caller's visible groups are read; `filter[id_data_session]=<id>` cuts a session's
/// span into 500 buckets (any other form over it is a 422). Any account.
#[utoipa::path(get, path = "/api/v2/data-downsampled", tag = "data",
    params(("filter[id_group]" = Option<String>, Query), ("filter[timestamp_seconds][gt]" = Option<f64>, Query), ("filter[timestamp_seconds][lt]" = Option<f64>, Query), ("filter[id_data_session]" = Option<String>, Query), ("sort" = Option<String>, Query), ("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query)),
    responses((status = 200, description = "Collection envelope of downsampled points: per day, hour, minute or raw from the interval length; 500 buckets for a data session", body = super::schemas::records::DownsampledPointCollection), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn downsampled(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    get.serve(&Downsampled).await
}

/// The formats of the export (`format`), as the API reference lists them.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // Named only by the API reference; the handler reads `format` as text.
pub enum ExportFormat {
    Csv,
    Parquet,
}

/// Export raw measurements
///
/// Every raw point of the groups the caller can see that matches the filters of `data`, oldest
/// first (ties by series), in one streamed download without pagination: `format=csv` (the
/// default; a header of the record's fields, then a line a point) or `format=parquet` (the same
/// columns; `timestamp_seconds`/`microseconds` int64, `datatype` int32, `value` double, ids as
/// strings). `filter[id_group]` is required (400 without it); a `sort` other than
/// `timestamp_seconds` is a 422 (the export is always oldest first). Any account.
#[utoipa::path(get, path = "/api/v2/data/export", tag = "data",
    params(("filter[id_group]" = String, Query, description = "required"), ("format" = Option<ExportFormat>, Query, description = "csv (the default) or parquet"), ("filter[timestamp_seconds][gte]" = Option<i64>, Query), ("filter[timestamp_seconds][lt]" = Option<i64>, Query), ("filter[datatype]" = Option<i64>, Query), ("filter[source_device]" = Option<String>, Query)),
    responses((status = 200, description = "The points as CSV (text/csv) or Parquet (application/vnd.apache.parquet), as an attachment", content((String = "text/csv"), (Vec<u8> = "application/vnd.apache.parquet"))), (status = 400, description = "filter[id_group] is missing"), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter, format or sort")),
    security(("bearer" = [])))]
pub async fn export(get: CollectionGet) -> Result<Response, ApiError> {
    let CollectionGet { state, caller, raw } = get;
    let query = raw.parse(&RawData::SPEC)?;
    if !names_group(query.filter.as_ref()) {
        return Err(ApiError::BadRequest("filter[id_group] is required".into()));
    }
    let oldest_first = SortKey {
        attr: "timestamp_seconds",
        descending: false,
    };
    if query.sort.as_ref().is_some_and(|sort| *sort != oldest_first) {
        return Err(ApiError::invalid(
            "sort",
            "The export is always sorted oldest first (timestamp_seconds).",
        ));
    }
    let format = Format::of_query(raw.query_bytes())?;
    let body = export::export(&state, &caller, query.filter.as_ref(), format).await?;
    Ok(export_response(body))
}
