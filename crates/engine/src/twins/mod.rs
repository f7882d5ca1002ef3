//! Device twins (docs/api.md, "Twins"; docs/gateway-protocol.md, "Twin"): the desired document an
//! operator changes with a merge patch, the reported one a gateway merges its reports into, the
//! delta between them, and the way a change reaches the gateway — at once through whichever node
//! holds its connection ([`deliver`]), or right after its next hello.
//!
//! A desired change is computed from the twin as read and written over that read's revision
//! (the store compares and sets), with its event 215 in the same transaction; a change that
//! lost the race is computed again from the newer twin. Gateways' reports are written in groups
//! by one writer ([`reports`]), each merged into its twin as locked in the transaction, with its
//! event 216. Once committed a change goes to the live stream (`twin`, and the event) and, for
//! desired changes, to the gateway.

pub mod batch;
pub mod deliver;
pub mod reports;

use std::sync::Arc;

use devicecloud_protocol::twin;
use devicecloud_store::events::NewEvent;
use devicecloud_store::twins::{self, DesiredWrite, TwinRow};
use devicecloud_store::{Db, StoreError};
use serde_json::{Map, Value, json};

use crate::event_types;
use crate::gateway::registry::GatewayRegistry;
use crate::peers;
use crate::stream::LiveFeed;

/// How often a change is computed again after losing the race to another change.
const ATTEMPTS: usize = 16;

/// What the twin engine works with, built once by the composition root.
pub struct Context {
    /// The store (twins, their events, the devices' connections).
    pub db: Db,
    /// The webhook routes the twins' events are queued by.
    pub routes: Arc<crate::webhooks::WebhookHub>,
    /// What this node commits, for the live stream's clients.
    pub stream: Arc<LiveFeed>,
    /// The live gateway connections of this node.
    pub gateways: Arc<GatewayRegistry>,
    /// Where a change goes to the node holding a gateway's connection.
    pub peers: Arc<peers::Context>,
}

/// Why a twin was not changed.
#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    /// No such device (or it has no twin).
    #[error("no twin for this device")]
    NotFound,
    /// The caller expected another desired version.
    #[error("the twin is at version {current}, not {expected}")]
    VersionMismatch { current: i64, expected: i64 },
    /// The document would break the limits; the text says how ("must be …").
    #[error("the document {0}")]
    Invalid(String),
    /// Other changes kept winning the race.
    #[error("the twin changed too often to be written; try again")]
    Busy,
    /// The write this change was part of failed (the first change of it has the store's error;
    /// logged), or the service is stopping.
    #[error("the twin could not be written: {0}")]
    Failed(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The twin record (docs/api.md, "Twins"), in its order.
pub fn record(row: &TwinRow) -> Map<String, Value> {
    let desired = twin::document(&row.desired);
    let reported = twin::document(&row.reported);
    let delta = twin::delta(&desired, &reported);
    let mut map = Map::new();
    map.insert("id_physical_device".into(), json!(row.id_physical_device));
    map.insert("id_group".into(), json!(row.id_group));
    map.insert("desired".into(), Value::Object(desired));
    map.insert("reported".into(), Value::Object(reported));
    let in_sync = i64::from(delta.is_empty());
    map.insert("delta".into(), Value::Object(delta));
    map.insert("version".into(), json!(row.version));
    map.insert("reported_version".into(), json!(row.reported_version));
    map.insert("desired_updated_at".into(), json!(row.desired_updated_at));
    map.insert("reported_updated_at".into(), json!(row.reported_updated_at));
    map.insert("in_sync".into(), json!(in_sync));
    map
}

/// Unix seconds now.
fn now() -> i64 {
    devicecloud_store::unix_now()
}

/// Applies the merge patch `patch` to the desired document of `device` (when its version is
/// `expected`, if given): the version goes up by one, event 215 is recorded, and the gateway
/// gets the new document at once if connected to any node. A patch that changes nothing leaves
/// the twin as it is (same version, no event). Returns the twin.
pub async fn change_desired(
    ctx: &Context,
    device: &str,
    patch: &Map<String, Value>,
    expected: Option<i64>,
) -> Result<TwinRow, TwinError> {
    let patch = Value::Object(patch.clone());
    if twin::depth(&patch) > twin::MAX_DEPTH {
        return Err(TwinError::Invalid(format!(
            "must not be nested deeper than {} levels",
            twin::MAX_DEPTH
        )));
    }
    for _ in 0..ATTEMPTS {
        let row = twins::get(&ctx.db, device).await?.ok_or(TwinError::NotFound)?;
        if let Some(expected) = expected.filter(|e| *e != row.version) {
            return Err(TwinError::VersionMismatch {
                current: row.version,
                expected,
            });
        }
        let Some((text, in_sync)) = desired_after(&row, &patch)? else {
            return Ok(row);
        };
        let version = (row.version + 1).to_string();
        let now = now();
        let write = DesiredWrite {
            id: device,
            revision: row.revision,
            version: row.version,
            document: Some(&text),
            in_sync,
            event: desired_event(&row, &version, now),
        };
        if let Some((written, id_event)) = twins::write_desired(&ctx.db, &ctx.routes.routes, &write, now).await? {
            announce(ctx, &write.event, id_event, &written).await;
            return Ok(written);
        }
    }
    Err(TwinError::Busy)
}

/// The desired document `patch` makes of `row`'s, as text, and whether it is in sync with the
/// reported one; `None` when the patch changes nothing.
fn desired_after(row: &TwinRow, patch: &Value) -> Result<Option<(String, bool)>, TwinError> {
    let mut desired = Value::Object(twin::document(&row.desired));
    let before = desired.clone();
    twin::merge_patch(&mut desired, patch);
    if desired == before {
        return Ok(None);
    }
    if let Some(why) = twin::document_error(&desired) {
        return Err(TwinError::Invalid(why));
    }
    let reported = twin::document(&row.reported);
    let in_sync = desired
        .as_object()
        .is_some_and(|d| twin::delta(d, &reported).is_empty());
    Ok(Some((desired.to_string(), in_sync)))
}

/// Event 215 of a change of `row`'s desired document to `version` (its text).
fn desired_event<'a>(row: &'a TwinRow, version: &'a str, now: i64) -> NewEvent<'a> {
    NewEvent {
        id_group: &row.id_group,
        source_device: &row.id_physical_device,
        from_device: Some(0),
        event_type: event_types::DESIRED_CHANGED,
        occurred_at: now,
        value: version,
        datatype: None,
        value_description: None,
    }
}

/// What follows a committed desired change: the stream's event and twin ([`show`]), and the
/// document on its way to the gateway.
async fn announce(ctx: &Context, event: &NewEvent<'_>, id_event: i64, written: &TwinRow) {
    show(ctx, event, id_event, written);
    deliver::desired(ctx, &written.id_physical_device).await;
}

/// A committed desired change on the live stream: its event and the twin as written.
fn show(ctx: &Context, event: &NewEvent<'_>, id_event: i64, written: &TwinRow) {
    ctx.stream.events(std::slice::from_ref(event), &[id_event]);
    ctx.stream
        .twin(&written.id_group, &written.id_physical_device, || record(written));
}
