//! The twin messages of a gateway (docs/gateway-protocol.md, "Twin"): its reports, merged into
//! the reported document of itself or an asset, and its requests for a desired document; and
//! the documents it gets right after its hello.

use devicecloud_protocol::twin::{parse_get, parse_reported, too_large};

use super::desired;
use super::{Context, Gateway, GatewayError, counted};
use crate::metrics::Outcome;
use crate::twins::TwinError;

const REPORTED: &str = "v1/gateway/twin/reported";
const GET: &str = "v1/gateway/twin/get";

impl Gateway {
    /// `v1/gateway/twin/reported`: merged into the reported document (event 216); a message that
    /// does not read, names a serial that is not this gateway's to use, or would make the
    /// document too large is rejected whole (event 212).
    pub async fn twin_reported(&mut self, ctx: &Context, payload: &[u8]) -> Result<(), GatewayError> {
        let result = self.apply_report(ctx, payload).await;
        counted(result, Outcome::Stored)
    }

    async fn apply_report(&mut self, ctx: &Context, payload: &[u8]) -> Result<(), GatewayError> {
        let report = match parse_reported(payload) {
            Ok(report) => report,
            Err(r) => return Err(self.reject(ctx, REPORTED, r).await),
        };
        let device = match self.source(ctx, report.device.as_deref()).await? {
            Ok(device) => device,
            Err(r) => return Err(self.reject(ctx, REPORTED, r).await),
        };
        match ctx.twin_reports.submit(device, report).await {
            Ok(_) => Ok(()),
            Err(TwinError::Invalid(why)) => {
                let rejection = too_large(format!("the reported document {why}"));
                Err(self.reject(ctx, REPORTED, rejection).await)
            }
            Err(TwinError::Store(e)) => Err(GatewayError::Store(e)),
            // Not written (other changes kept winning): not acknowledged, so the gateway sends
            // it again.
            Err(e) => Err(GatewayError::Store(devicecloud_store::StoreError::Timeout(
                e.to_string(),
            ))),
        }
    }

    /// `v1/gateway/twin/get`: the desired document of the gateway or the asset named, to publish
    /// on `v1/gateway/twin/desired`.
    pub async fn twin_get(&mut self, ctx: &Context, payload: &[u8]) -> Result<Vec<u8>, GatewayError> {
        let result = self.read_desired(ctx, payload).await;
        counted(result, Outcome::Stored)
    }

    async fn read_desired(&mut self, ctx: &Context, payload: &[u8]) -> Result<Vec<u8>, GatewayError> {
        let serial = match parse_get(payload) {
            Ok(serial) => serial,
            Err(r) => return Err(self.reject(ctx, GET, r).await),
        };
        let device = match self.source(ctx, serial.as_deref()).await? {
            Ok(device) => device,
            Err(r) => return Err(self.reject(ctx, GET, r).await),
        };
        Ok(desired::current(&ctx.db, &device).await?.unwrap_or_default())
    }

    /// The desired documents this gateway and its assets are behind on, to publish right after
    /// an accepted hello.
    pub async fn twins_behind(&self, ctx: &Context) -> Result<Vec<Vec<u8>>, GatewayError> {
        Ok(desired::behind(&ctx.db, &self.id).await?)
    }
}
