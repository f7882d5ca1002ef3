//! The measurements a gateway sends, and the sources and series they name: a message is
//! validated whole (every source this gateway's to use, every series within the limits) and
//! then queued for the group-committing writer (`crate::ingest`).

use devicecloud_protocol::{RejectReason, Rejection, parse_measurements};
use devicecloud_store::StoreError;
use devicecloud_store::devices::{self, Asset, Child};
use devicecloud_store::ingest::{self, Point, SeriesId};

use super::{Gateway, GatewayError, not_an_asset, now_parts, too_many_assets};
use crate::ingest::Receipt;
use crate::state::AppState;

impl Gateway {
    /// The device id of a source serial: the gateway itself, or an asset (created on first
    /// sight); a rejection when the serial is not this gateway's to use or the gateway has its
    /// most assets (docs/gateway-protocol.md, "Limits").
    pub(super) async fn source(
        &mut self,
        state: &AppState,
        serial: Option<&str>,
    ) -> Result<Result<String, Rejection>, StoreError> {
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
        let max = state.settings.limits.assets_per_gateway;
        Ok(match devices::child(&state.db, &asset, max, now_parts().0).await? {
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
        state: &AppState,
        unknown: Vec<(String, i64)>,
    ) -> Result<Result<(), Rejection>, StoreError> {
        if unknown.is_empty() {
            return Ok(Ok(()));
        }
        let series: Vec<SeriesId> = unknown
            .into_iter()
            .map(|(source_device, datatype)| SeriesId {
                id_group: self.id_group.clone(),
                source_device,
                datatype,
            })
            .collect();
        let max = state.settings.limits.datatypes_per_device;
        let keys = ingest::container_keys(&state.db, &series, max).await?;
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

    /// Measurements (docs/gateway-protocol.md, "Messages"): validated whole, then stored through
    /// the ingest queue; returns once every point is durably committed.
    pub async fn measurements(&mut self, state: &AppState, payload: &[u8]) -> Result<usize, GatewayError> {
        let (count, receipt) = self.queue_measurements(state, payload).await?;
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
        state: &AppState,
        payload: &[u8],
    ) -> Result<(usize, Receipt), GatewayError> {
        let (points, touched) = self
            .prepare_measurements(state, payload)
            .await
            .map_err(GatewayError::counted)?;
        let count = points.len();
        Ok((count, state.ingest.enqueue(&self.id, points, touched).await?))
    }

    /// The points of a measurements message, validated whole, and the devices whose
    /// `last_data_at` they move.
    async fn prepare_measurements(
        &mut self,
        state: &AppState,
        payload: &[u8],
    ) -> Result<(Vec<Point>, Vec<(String, i64)>), GatewayError> {
        const TOPIC: &str = "v1/gateway/measurements";
        let (now, now_us) = now_parts();
        let batch = match parse_measurements(payload, now) {
            Ok(b) => b,
            Err(r) => return Err(self.reject(state, TOPIC, r).await),
        };
        let mut sources = Vec::with_capacity(batch.len());
        for m in &batch {
            match self.source(state, m.device.as_deref()).await? {
                Ok(source) => sources.push(source),
                Err(r) => return Err(self.reject(state, TOPIC, r).await),
            }
        }
        // The series not known yet (none, past a gateway's first message).
        let mut unknown: Vec<(String, i64)> = Vec::new();
        for (m, source) in batch.iter().zip(&sources) {
            let by_type = self.series.get(source);
            for (datatype, _) in &m.values {
                let series = (source, i64::from(*datatype));
                let known = by_type.is_some_and(|t| t.contains_key(&series.1))
                    || unknown.iter().any(|(s, d)| s == series.0 && *d == series.1);
                if !known {
                    unknown.push((source.clone(), series.1));
                }
            }
        }
        if let Err(r) = self.make_series(state, unknown).await? {
            return Err(self.reject(state, TOPIC, r).await);
        }
        let mut points = Vec::new();
        let mut touched = vec![(self.id.clone(), now)];
        for (m, source) in batch.iter().zip(sources) {
            let (seconds, microseconds) = m.ts.map_or((now, now_us), |t| (t.seconds, i64::from(t.microseconds)));
            let by_type = self.series.get(&source);
            for (datatype, value) in &m.values {
                // Known: `make_series` made every series of the message.
                let Some(&container_key) = by_type.and_then(|t| t.get(&i64::from(*datatype))) else {
                    return Err(
                        StoreError::Decode(format!("series of device {source}, datatype {datatype} not made")).into(),
                    );
                };
                points.push(Point {
                    container_key,
                    seconds,
                    microseconds,
                    value: *value,
                    session_key: self.session_key,
                });
            }
            if source != self.id && !touched.iter().any(|(id, _)| *id == source) {
                touched.push((source, now));
            }
        }
        Ok((points, touched))
    }
}
