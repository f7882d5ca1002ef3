//! A connected gateway as the service sees it, whatever transport carries its messages (MQTT, or
//! HTTP for gateways that cannot speak MQTT): authentication, and the effect of every message of
//! the gateway protocol (docs/gateway-protocol.md, "Messages" and "Event codes the cloud records").

pub mod archived;
mod auth;
mod context;
pub mod departures;
pub mod desired;
pub mod losses;
mod measurements;
pub mod registry;
pub mod rejections;
mod twin;
mod updates;

use std::collections::HashMap;

use devicecloud_protocol::{
    GatewayTopic, Hello, ModuleKind, RejectReason, Rejection, parse_devices, parse_events, parse_hello, parse_power,
    parse_response,
};
use devicecloud_store::devices::{self, Asset, Child, HelloUpdate};
use devicecloud_store::events::{self, NewEvent};
use devicecloud_store::{Db, StoreError, data_sessions};

pub use auth::{AuthError, authenticate};
pub use context::Context;
pub use rejections::{Record as RejectionRecord, RejectionLog, WINDOW as REJECTION_WINDOW};

use crate::commands::Pending;
use crate::event_types;
use crate::ingest::IngestError;
use crate::metrics::{Closed, Dropped, Failed, Outcome};

use archived::Forget;
pub use departures::{Departure, Departures};

/// Why a message had no effect.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// Refused whole (docs/gateway-protocol.md, "Messages"); already recorded. Over MQTT still
    /// acknowledged.
    #[error("message rejected: {0}")]
    Rejected(Rejection),
    /// A hello with another module kind than provisioned (docs/gateway-protocol.md, "Messages"):
    /// close the connection.
    #[error("hello with module kind {0}, provisioned as another kind")]
    KindMismatch(String),
    /// The data could not be committed: not acknowledged, so the gateway sends it again.
    #[error(transparent)]
    Ingest(#[from] IngestError),
    /// A store failure outside the ingest path.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl GatewayError {
    /// The outcome of the message this error ended; `None` for an ingest error, which the
    /// ingest queue counted with the message's points.
    fn outcome(&self) -> Option<Outcome> {
        match self {
            GatewayError::Rejected(rejection) => Some(Outcome::Rejected(rejection.reason())),
            GatewayError::KindMismatch(_) => Some(Outcome::Closed(Closed::KindMismatch)),
            GatewayError::Ingest(_) => None,
            GatewayError::Store(_) => Some(Outcome::Failed(Failed::Store)),
        }
    }

    /// Counts the message this error ended (see [`GatewayError::outcome`]).
    fn counted(self) -> GatewayError {
        if let Some(outcome) = self.outcome() {
            outcome.message();
        }
        self
    }
}

/// Counts how a message ended, `success` if it took effect: every public message method of
/// [`Gateway`] hands its result through here once (a measurements message that reaches the
/// ingest queue is counted there instead).
fn counted<T>(result: Result<T, GatewayError>, success: Outcome) -> Result<T, GatewayError> {
    match result {
        Ok(value) => {
            success.message();
            Ok(value)
        }
        Err(e) => Err(e.counted()),
    }
}

/// An authenticated gateway and what its connection remembers.
#[derive(Debug)]
pub struct Gateway {
    pub id: String,
    pub id_group: String,
    pub serial: String,
    pub kind: ModuleKind,
    /// The active data session (GO modules, from hello until power off).
    session_key: Option<i64>,
    /// Asset serial → device id.
    children: HashMap<String, String>,
    /// Source device → datatype → series key; looked up by `&str` so that the per-point path
    /// allocates nothing.
    series: HashMap<String, HashMap<i64, i64>>,
    /// A power-off message came: the disconnect that follows is expected.
    pub powered_off: bool,
    /// The archivings of assets this connection has looked at (`archived::ArchivedAssets`).
    pub(super) archivings_seen: u64,
    /// When this connection was accepted (Unix seconds): an update sent before it was not
    /// received on it.
    connected_at: i64,
}

/// The rejection of a message naming a serial that belongs to a device other than this
/// gateway's assets.
fn not_an_asset(serial: Option<&str>) -> Rejection {
    Rejection::invalid(
        RejectReason::BadField,
        format!(
            "device {:?} is not an asset of this gateway",
            serial.unwrap_or_default()
        ),
    )
}

/// Writes rejection events (212) through the writers' pool; a failure is logged, as the
/// message's refusal stands whatever happens to its event.
pub async fn record_rejections(ctx: &Context, records: &[RejectionRecord]) {
    let now = now_parts().0;
    let events: Vec<NewEvent> = records
        .iter()
        .map(|r| NewEvent {
            id_group: &r.id_group,
            source_device: &r.gateway,
            from_device: Some(0),
            event_type: event_types::MESSAGE_REJECTED,
            occurred_at: now,
            value: &r.topic,
            datatype: None,
            value_description: Some(&r.description),
        })
        .collect();
    if let Err(e) = record_events(ctx, &ctx.writer, &events, now).await {
        tracing::warn!(error = %e, "cannot record a rejected message");
    }
}

/// Records events through `db`, routed to the webhooks of their groups, and hands them to the
/// live stream once committed; returns how many.
async fn record_events(ctx: &Context, db: &Db, events: &[NewEvent<'_>], now: i64) -> Result<usize, StoreError> {
    let ids = events::insert_routed(db, &ctx.webhooks.routes, events, now).await?;
    ctx.stream.events(events, &ids);
    Ok(ids.len())
}

/// The rejection of a message naming assets a gateway at its limit cannot have.
fn too_many_assets(max: usize, serials: &[&str]) -> Rejection {
    Rejection::invalid(
        RejectReason::OverLimit,
        format!(
            "this gateway already has {max} assets: {} over the limit",
            serials.join(", ")
        ),
    )
}

/// Unix time now as seconds and microseconds.
pub fn now_parts() -> (i64, i64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (now.as_secs() as i64, i64::from(now.subsec_micros()))
}

impl Gateway {
    fn new(id: String, id_group: String, serial: String, kind: ModuleKind) -> Gateway {
        Gateway {
            id,
            id_group,
            serial,
            kind,
            session_key: None,
            children: HashMap::new(),
            series: HashMap::new(),
            powered_off: false,
            archivings_seen: 0,
            connected_at: now_parts().0,
        }
    }

    /// Forgets the assets of this gateway archived since it last looked, so that the next
    /// message naming one of their serials makes a new asset, as after a reconnection
    /// (docs/gateway-protocol.md, "Messages").
    pub(super) fn forget_archived(&mut self, ctx: &Context) {
        let (forget, seen) = ctx.gateways.archived.since(&self.id, self.archivings_seen);
        self.archivings_seen = seen;
        match forget {
            Forget::Nothing => {}
            Forget::Assets(assets) => {
                self.children.retain(|_, id| !assets.contains(id));
                for asset in &assets {
                    self.series.remove(asset);
                }
            }
            Forget::All => {
                self.children.clear();
                self.series.clear();
            }
        }
    }

    /// Records a refused message (event 212, coalesced per minute: see [`RejectionLog`]), and
    /// hands the rejection back (counted as the message's outcome by the method that received
    /// it).
    async fn reject(&self, ctx: &Context, topic: &str, rejection: Rejection) -> GatewayError {
        let record = RejectionRecord {
            id_group: self.id_group.clone(),
            gateway: self.id.clone(),
            topic: topic.to_string(),
            description: rejection.description(),
        };
        if let Some(record) = ctx
            .rejections
            .note(rejection.reason(), record, std::time::Instant::now())
        {
            record_rejections(ctx, &[record]).await;
        }
        GatewayError::Rejected(rejection)
    }

    async fn cloud_event(
        &self,
        ctx: &Context,
        event_type: i64,
        value: &str,
        from_device: i64,
    ) -> Result<(), StoreError> {
        let now = now_parts().0;
        let event = NewEvent {
            id_group: &self.id_group,
            source_device: &self.id,
            from_device: Some(from_device),
            event_type,
            occurred_at: now,
            value,
            datatype: None,
            value_description: None,
        };
        record_events(ctx, &ctx.db, &[event], now).await.map(drop)
    }

    /// Hello (docs/gateway-protocol.md, "Messages"): device fields, event 208, and for a GO module
    /// a data session. A hello with another module kind than provisioned records event 211 and
    /// ends with [`GatewayError::KindMismatch`] (the connection is to be closed).
    pub async fn hello(&mut self, ctx: &Context, payload: &[u8], client_id: &str) -> Result<(), GatewayError> {
        let result = self.apply_hello(ctx, payload, client_id).await;
        counted(result, Outcome::Stored)
    }

    async fn apply_hello(&mut self, ctx: &Context, payload: &[u8], client_id: &str) -> Result<(), GatewayError> {
        let hello: Hello = match parse_hello(payload) {
            Ok(h) => h,
            Err(r) => return Err(self.reject(ctx, "v1/gateway/hello", r).await),
        };
        if hello.kind != self.kind {
            self.cloud_event(ctx, event_types::KIND_MISMATCH, &hello.kind.to_string(), 0)
                .await?;
            return Err(GatewayError::KindMismatch(hello.kind.to_string()));
        }
        let now = now_parts().0;
        let json = |v: &Option<serde_json::Value>| v.as_ref().map(serde_json::Value::to_string);
        let update = HelloUpdate {
            connection: hello.connection.as_str(),
            signal: hello.signal,
            platform_software_version: hello.platform_software_version.as_deref(),
            app_software_version: hello.app_software_version.as_deref(),
            wifi_enabled: hello.wifi_enabled,
            location_json: json(&hello.location),
            sim_json: json(&hello.sim),
            modbus_template_json: json(&hello.modbus_template),
            client_identifier: client_id,
            node_id: &ctx.node_id,
        };
        devices::hello(&ctx.db, &self.id, &update, now).await?;
        self.updates_after_hello(
            ctx,
            hello.platform_software_version.as_deref(),
            hello.app_software_version.as_deref(),
        )
        .await?;
        self.cloud_event(
            ctx,
            event_types::CONNECTIVITY,
            &hello.connection.event_value().to_string(),
            1,
        )
        .await?;
        if self.kind == ModuleKind::Go && self.session_key.is_none() {
            let opened = data_sessions::active(&ctx.db, &self.id).await?.is_none();
            self.session_key = Some(data_sessions::open(&ctx.db, &self.id_group, &self.id, now).await?);
            if opened {
                self.cloud_event(ctx, event_types::DATA_SESSION, "1", 0).await?;
            }
        }
        self.powered_off = false;
        Ok(())
    }

    /// Events (docs/gateway-protocol.md, "Messages"): stored with `from_device` 1 on their source
    /// device.
    pub async fn events(&mut self, ctx: &Context, payload: &[u8]) -> Result<usize, GatewayError> {
        let result = self.store_events(ctx, payload).await;
        counted(result, Outcome::Stored)
    }

    async fn store_events(&mut self, ctx: &Context, payload: &[u8]) -> Result<usize, GatewayError> {
        const TOPIC: &str = "v1/gateway/events";
        let (now, _) = now_parts();
        let batch = match parse_events(payload, now) {
            Ok(b) => b,
            Err(r) => return Err(self.reject(ctx, TOPIC, r).await),
        };
        let sources = self
            .sources(ctx, TOPIC, batch.iter().map(|e| e.device.as_deref()).collect())
            .await?;
        let records: Vec<NewEvent> = batch
            .iter()
            .zip(&sources)
            .map(|(e, source)| NewEvent {
                id_group: &self.id_group,
                source_device: source,
                from_device: Some(1),
                event_type: e.event_type,
                occurred_at: e.ts.map_or(now, |t| t.seconds),
                value: &e.value,
                datatype: e.datatype.map(i64::from),
                value_description: None,
            })
            .collect();
        let stored = record_events(ctx, &ctx.db, &records, now).await?;
        // The gateway says it could not install an image: its firmware executions fail.
        if let Some(failed) = records
            .iter()
            .find(|e| e.event_type == event_types::FIRMWARE_FAILED && e.source_device == self.id)
        {
            self.update_failed(ctx, failed.value).await?;
        }
        Ok(stored)
    }

    /// Attached assets (docs/gateway-protocol.md, "Messages"): created or updated as children of
    /// the gateway.
    pub async fn devices(&mut self, ctx: &Context, payload: &[u8]) -> Result<usize, GatewayError> {
        let result = self.store_devices(ctx, payload).await;
        counted(result, Outcome::Stored)
    }

    async fn store_devices(&mut self, ctx: &Context, payload: &[u8]) -> Result<usize, GatewayError> {
        let assets = match parse_devices(payload) {
            Ok(a) => a,
            Err(r) => return Err(self.reject(ctx, "v1/gateway/devices", r).await),
        };
        let now = now_parts().0;
        let max = ctx.assets_per_gateway;
        let (mut taken, mut over) = (Vec::new(), Vec::new());
        for item in &assets {
            let asset = Asset {
                gateway: &self.id,
                id_group: &self.id_group,
                serial: &item.serial,
                device_type: Some(&item.r#type),
                label: item.label.as_deref(),
            };
            match devices::child(&ctx.db, &asset, max, now).await? {
                Child::Device(id) => {
                    self.children.insert(item.serial.clone(), id);
                }
                Child::Taken => taken.push(item.serial.as_str()),
                Child::Full => over.push(item.serial.as_str()),
            }
        }
        let rejection = if !over.is_empty() {
            too_many_assets(max, &over)
        } else if !taken.is_empty() {
            Rejection::invalid(
                RejectReason::BadField,
                format!("serials already used by other devices: {}", taken.join(", ")),
            )
        } else {
            return Ok(assets.len());
        };
        Err(self.reject(ctx, "v1/gateway/devices", rejection).await)
    }

    /// Power off (docs/gateway-protocol.md, "Messages"): a GO module's data session is closed; the
    /// disconnect that follows is expected and records no connection loss.
    pub async fn power(&mut self, ctx: &Context, payload: &[u8]) -> Result<(), GatewayError> {
        let result = self.power_off(ctx, payload).await;
        counted(result, Outcome::Stored)
    }

    async fn power_off(&mut self, ctx: &Context, payload: &[u8]) -> Result<(), GatewayError> {
        if let Err(r) = parse_power(payload) {
            return Err(self.reject(ctx, "v1/gateway/power", r).await);
        }
        if data_sessions::close(&ctx.db, &self.id, now_parts().0).await? {
            self.cloud_event(ctx, event_types::DATA_SESSION, "0", 0).await?;
        }
        self.session_key = None;
        self.powered_off = true;
        Ok(())
    }

    /// A command answer (docs/gateway-protocol.md, "Commands"): handed to the caller waiting in
    /// `pending`; a late or unknown one is dropped. An unreadable one fails its caller and is
    /// recorded as a rejection.
    pub async fn response(
        &self,
        ctx: &Context,
        pending: &mut Pending,
        request_id: String,
        payload: &[u8],
    ) -> Result<(), GatewayError> {
        match parse_response(payload) {
            Ok(response) => {
                let delivered = pending.resolve(&request_id, Ok(response));
                let outcome = if delivered {
                    Outcome::Stored
                } else {
                    Outcome::Dropped(Dropped::UnknownRequest)
                };
                counted(Ok(()), outcome)
            }
            Err(rejection) => {
                pending.resolve(&request_id, Err(rejection.description()));
                let topic = GatewayTopic::Response { request_id }.as_topic();
                Err(self.reject(ctx, &topic, rejection).await.counted())
            }
        }
    }

    /// The connection ended. `lost`: without power-off (TCP close, keep-alive expiry, clean
    /// DISCONNECT, token rotated or device archived) — event 208 with value 0. A take-over by a new
    /// connection records nothing and leaves `is_connected` alone (docs/gateway-protocol.md,
    /// "Transport").
    pub async fn ended(&self, ctx: &Context, taken_over: bool) {
        if taken_over {
            return;
        }
        let departure = Departure {
            id: self.id.clone(),
            id_group: self.id_group.clone(),
            serial: self.serial.clone(),
            event: !self.powered_off,
        };
        let batch = ctx.departures.queue(departure).await;
        for chunk in batch.chunks() {
            losses::write(ctx, chunk).await;
        }
    }
}
