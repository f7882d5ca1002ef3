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

    /// The key of a series of `source`, made on first use; a rejection when the device has its
    /// most datatypes (docs/gateway-protocol.md, "Limits").
    async fn series_key(
        &mut self,
        state: &AppState,
        source: &str,
        datatype: i64,
    ) -> Result<Result<i64, Rejection>, StoreError> {
        if let Some(key) = self.series.get(source).and_then(|by_type| by_type.get(&datatype)) {
            return Ok(Ok(*key));
        }
        let id = SeriesId {
            id_group: self.id_group.clone(),
            source_device: source.to_string(),
            datatype,
        };
        let max = state.settings.limits.datatypes_per_device;
        let Some(key) = ingest::container_key(&state.db, &id, max).await? else {
            return Ok(Err(Rejection::invalid(
                RejectReason::OverLimit,
                format!("device {source} already has {max} datatypes: datatype {datatype} is over the limit"),
            )));
        };
        self.series.entry(source.to_string()).or_default().insert(datatype, key);
        Ok(Ok(key))
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
        let mut points = Vec::new();
        let mut touched = vec![(self.id.clone(), now)];
        for m in &batch {
            let source = match self.source(state, m.device.as_deref()).await? {
                Ok(source) => source,
                Err(r) => return Err(self.reject(state, TOPIC, r).await),
            };
            let (seconds, microseconds) = m.ts.map_or((now, now_us), |t| (t.seconds, i64::from(t.microseconds)));
            for (datatype, value) in &m.values {
                let container_key = match self.series_key(state, &source, i64::from(*datatype)).await? {
                    Ok(key) => key,
                    Err(r) => return Err(self.reject(state, TOPIC, r).await),
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
