//! The measurements a gateway sends, and the sources and series they name: a message is
//! validated whole (every source this gateway's to use, every series within the limits) and
//! then queued for the group-committing writer (`crate::ingest`).

use devicecloud_protocol::{Measurement, RejectReason, Rejection, parse_measurements};
use devicecloud_store::StoreError;
use devicecloud_store::devices::{self, Asset, Child};
use devicecloud_store::ingest::{self, Point, SeriesId};

use super::Context;
use super::{Gateway, GatewayError, not_an_asset, now_parts, too_many_assets};
use crate::ingest::Receipt;

impl Gateway {
    /// The source device of each record of a message, in order; a serial that is no source
    /// of this gateway refuses the whole message (recorded under `topic`).
    pub(super) async fn sources(
        &mut self,
        ctx: &Context,
        topic: &str,
        serials: Vec<Option<&str>>,
    ) -> Result<Vec<String>, GatewayError> {
        let mut sources = Vec::with_capacity(serials.len());
        for serial in serials {
            match self.source(ctx, serial).await? {
                Ok(source) => sources.push(source),
                Err(r) => return Err(self.reject(ctx, topic, r).await),
            }
        }
        Ok(sources)
    }

    /// The device id of a source serial: the gateway itself, or an asset (created on first
    /// sight); a rejection when the serial is not this gateway's to use or the gateway has its
    /// most assets (docs/gateway-protocol.md, "Limits").
    pub(super) async fn source(
        &mut self,
        ctx: &Context,
        serial: Option<&str>,
    ) -> Result<Result<String, Rejection>, StoreError> {
        self.forget_archived(ctx);
        let Some(serial) = serial.filter(|s| *s != self.serial) else {
            return Ok(Ok(self.id.clone()));
        };
        if let Some(id) = self.children.get(serial) {
            return Ok(Ok(id.clone()));
        }
        let asset = Asset {
            gateway: &self.id,
            id_group: &self.id_group,
            serial,
            device_type: None,
            label: None,
        };
        let max = ctx.assets_per_gateway;
        Ok(match devices::child(&ctx.db, &asset, max, now_parts().0).await? {
            Child::Device(id) => {
                self.children.insert(serial.to_string(), id.clone());
                Ok(id)
            }
            Child::Taken => Err(not_an_asset(Some(serial))),
            Child::Full => Err(too_many_assets(max, &[serial])),
        })
    }

    /// Makes the series `unknown` names (source device, datatype) in one transaction
    /// (`ingest::container_keys`) and keeps their keys; a rejection when a device has its most
    /// datatypes (docs/gateway-protocol.md, "Limits").
    async fn make_series(
        &mut self,
        ctx: &Context,
        unknown: Vec<(String, i64)>,
    ) -> Result<Result<(), Rejection>, StoreError> {
        let series: Vec<SeriesId> = unknown
            .into_iter()
            .map(|(source_device, datatype)| SeriesId {
                id_group: self.id_group.clone(),
                source_device,
                datatype,
            })
            .collect();
        let max = ctx.datatypes_per_device;
        let keys = ingest::container_keys(&ctx.db, &series, max).await?;
        for (id, key) in series.into_iter().zip(keys) {
            let Some(key) = key else {
                return Ok(Err(Rejection::invalid(
                    RejectReason::OverLimit,
                    format!(
                        "device {} already has {max} datatypes: datatype {} is over the limit",
                        id.source_device, id.datatype
                    ),
                )));
            };
            self.series
                .entry(id.source_device)
                .or_default()
                .insert(id.datatype, key);
        }
        Ok(Ok(()))
    }

    /// The points of `batch`, whose measurements come from `sources`, with the keys of their
    /// series; the series not known yet (source device, datatype) when there are any. One
    /// look-up a value: this is every message's path.
    fn points_of(
        &self,
        batch: &[Measurement],
        sources: &[String],
        (now, now_us): (i64, i64),
    ) -> Result<Vec<Point>, Vec<(String, i64)>> {
        let mut points = Vec::new();
        let mut unknown: Vec<(String, i64)> = Vec::new();
        for (m, source) in batch.iter().zip(sources) {
            let (seconds, microseconds) = m.ts.map_or((now, now_us), |t| (t.seconds, i64::from(t.microseconds)));
            let by_type = self.series.get(source);
            for (datatype, value) in &m.values {
                let datatype = i64::from(*datatype);
                match by_type.and_then(|t| t.get(&datatype)) {
                    Some(&container_key) => points.push(Point {
                        container_key,
                        seconds,
                        microseconds,
                        value: *value,
                        session_key: self.session_key,
                    }),
                    None if !unknown.iter().any(|(s, d)| s == source && *d == datatype) => {
                        unknown.push((source.clone(), datatype));
                    }
                    None => {}
                }
            }
        }
        if unknown.is_empty() { Ok(points) } else { Err(unknown) }
    }

    /// Measurements (docs/gateway-protocol.md, "Messages"): validated whole, then stored through
    /// the ingest queue; returns once every point is durably committed.
    pub async fn measurements(&mut self, ctx: &Context, payload: &[u8]) -> Result<usize, GatewayError> {
        let (count, receipt) = self.queue_measurements(ctx, payload).await?;
        receipt.await?;
        Ok(count)
    }

    /// Measurements validated and queued for the writer, without waiting for the commit: the
    /// MQTT connection reads the gateway's next message meanwhile and acknowledges each one
    /// when its receipt resolves. Returns the number of points and the receipt. A queued
    /// message is counted by the ingest writer once its commit ends; one that is not queued,
    /// here.
    pub async fn queue_measurements(
        &mut self,
        ctx: &Context,
        payload: &[u8],
    ) -> Result<(usize, Receipt), GatewayError> {
        let (points, touched) = self
            .prepare_measurements(ctx, payload)
            .await
            .map_err(GatewayError::counted)?;
        let count = points.len();
        Ok((count, ctx.ingest.enqueue(&self.id, points, touched).await?))
    }

    /// The points of a measurements message, validated whole, and the devices whose
    /// `last_data_at` they move.
    async fn prepare_measurements(
        &mut self,
        ctx: &Context,
        payload: &[u8],
    ) -> Result<(Vec<Point>, Vec<(String, i64)>), GatewayError> {
        const TOPIC: &str = "v1/gateway/measurements";
        let (now, now_us) = now_parts();
        let batch = match parse_measurements(payload, now) {
            Ok(b) => b,
            Err(r) => return Err(self.reject(ctx, TOPIC, r).await),
        };
        let sources = self
            .sources(ctx, TOPIC, batch.iter().map(|m| m.device.as_deref()).collect())
            .await?;
        // A gateway's first message names series not made yet: they are made, all at once,
        // and the points looked up again.
        let points = match self.points_of(&batch, &sources, (now, now_us)) {
            Ok(points) => points,
            Err(unknown) => {
                if let Err(r) = self.make_series(ctx, unknown).await? {
                    return Err(self.reject(ctx, TOPIC, r).await);
                }
                self.points_of(&batch, &sources, (now, now_us))
                    .map_err(|unknown| StoreError::Decode(format!("series not made: {unknown:?}")))?
            }
        };
        let mut touched = vec![(self.id.clone(), now)];
        for source in sources {
            if source != self.id && !touched.iter().any(|(id, _)| *id == source) {
                touched.push((source, now));
            }
        }
        Ok((points, touched))
    }
}
