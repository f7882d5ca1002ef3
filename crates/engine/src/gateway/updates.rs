//! What a gateway's own messages say of its firmware updates (docs/api.md, "Firmware:
//! update"): its `hello` ends the firmware executions in progress on it — the image's version
//! for the component: succeeded, with event 219; another one after it accepted the update: a
//! rollback, failed, with event 220; another one before it accepted it: the update is sent
//! again, at most once more — and its event 221 fails them with the cause it gave.
//!
//! Each end is conditional on the execution still being in progress under its attempt
//! (`runs::end`), so a hello and the runner's sweep never end one twice.

use devicecloud_protocol::firmware::version_of;
use devicecloud_store::StoreError;
use devicecloud_store::events::NewEvent;
use devicecloud_store::jobs::runs::Ended;
use devicecloud_store::jobs::status;
use devicecloud_store::jobs::updates::{self, Installing};
use serde_json::json;

use super::{Context, Gateway, now_parts};
use crate::event_types;

impl Gateway {
    /// Ends the firmware executions on this gateway that its hello decides: it reports
    /// `platform` and `app` versions (either may be absent, deciding nothing for that
    /// component).
    pub(super) async fn updates_after_hello(
        &self,
        ctx: &Context,
        platform: Option<&str>,
        app: Option<&str>,
    ) -> Result<(), StoreError> {
        let installing = updates::installing(&ctx.db, &self.id).await?;
        let mut ended = Vec::new();
        let mut outcomes = Vec::new();
        let mut again = Vec::new();
        for run in &installing {
            let running = version_of(&run.component, platform, app);
            let Some(running) = running else { continue };
            if running == run.version {
                let result = json!({"status": 200, "payload": {"result": "updated", "version": running}});
                ended.push(run.ended(status::SUCCEEDED, result.to_string()));
                outcomes.push((event_types::FIRMWARE_UPDATED, running.to_string()));
            } else if run.accepted == 1 {
                let result = json!({"status": 409, "payload": {"result": "rolled back", "version": running}});
                ended.push(run.ended(status::FAILED, result.to_string()));
                outcomes.push((event_types::FIRMWARE_ROLLED_BACK, running.to_string()));
            } else if run.started_at.is_some_and(|at| at <= self.connected_at) {
                // Back on the old version without having accepted an update sent over an
                // earlier connection: it never got it, or its answer was lost (a node died
                // while relaying it). It is sent again, at most once more. One sent over this
                // connection is on its way; times are whole seconds, so one sent in this
                // connection's first second is sent again too, which the gateway takes as the
                // same update.
                again.push(run.clone());
            }
        }
        updates::send_again(&ctx.db, &again).await?;
        self.end_updates(ctx, &ended, &outcomes).await
    }

    /// Fails the firmware executions in progress on this gateway: it published event 221 with
    /// `cause`.
    pub(super) async fn update_failed(&self, ctx: &Context, cause: &str) -> Result<(), StoreError> {
        let installing: Vec<Installing> = updates::installing(&ctx.db, &self.id).await?;
        let result = json!({"status": 500, "payload": {"result": "failed", "cause": cause}}).to_string();
        let ended: Vec<Ended> = installing
            .iter()
            .map(|run| run.ended(status::FAILED, result.clone()))
            .collect();
        self.end_updates(ctx, &ended, &[]).await
    }

    /// Ends `ended` and records the events of `outcomes` (type, value) on this gateway, in one
    /// transaction.
    async fn end_updates(&self, ctx: &Context, ended: &[Ended], outcomes: &[(i64, String)]) -> Result<(), StoreError> {
        if ended.is_empty() {
            return Ok(());
        }
        let now = now_parts().0;
        let events: Vec<NewEvent> = outcomes
            .iter()
            .map(|(event_type, value)| NewEvent {
                id_group: &self.id_group,
                source_device: &self.id,
                from_device: Some(0),
                event_type: *event_type,
                occurred_at: now,
                value,
                datatype: None,
                value_description: None,
            })
            .collect();
        let ids = updates::end(&ctx.db, &ctx.webhooks.routes, ended, &events, now).await?;
        ctx.stream.events(&events, &ids);
        Ok(())
    }
}
