//! One attempt of a command execution (docs/api.md, "Jobs", "job execution"): the command sent
//! to the gateway where it is connected and its answer awaited (2xx: succeeded). Twin executions
//! start in batches (`twins::batch`) and end with their device's report. A job's command records no event 213 per device: its execution is the record
//! (a job over a fleet would otherwise flood the events and every Events webhook).

use std::sync::Arc;
use std::time::Duration;

use devicecloud_protocol::{CommandResponse, ModuleKind};
use devicecloud_store::jobs::runs::{Ended, Ready};
use devicecloud_store::jobs::status;
use serde_json::json;

use super::Context;
use crate::commands::{self, CommandError};

/// An attempt about to run.
pub(super) struct Attempt {
    pub ctx: Arc<Context>,
    pub id_job: String,
    pub timeout: Duration,
    /// The runner the attempt was started under.
    pub runner: String,
    pub ready: Ready,
}

impl Attempt {
    /// Sends the command and waits for its answer; the attempt's end.
    pub async fn run(self, request: &devicecloud_protocol::CommandRequest) -> Ended {
        self.command(request).await
    }

    fn ended(&self, status: &'static str, result: Option<String>) -> Ended {
        Ended {
            id_job: self.id_job.clone(),
            device: self.ready.device.clone(),
            runner: self.runner.clone(),
            status,
            result,
        }
    }

    async fn command(&self, request: &devicecloud_protocol::CommandRequest) -> Ended {
        let ctx = &self.ctx;
        let gateway = &self.ready.gateway;
        let kind = self.ready.kind.as_deref().and_then(|k| k.parse::<ModuleKind>().ok());
        if kind.is_some_and(|kind| !request.method.supported_by(kind)) {
            // As the API answers it: the device layer's 501.
            let answer = CommandResponse::failure(501, "Wifi disabled");
            return self.ended(status::FAILED, Some(result_text(&answer)));
        }
        let request_id = commands::request_id();
        let outcome = match ctx.gateways.commands(gateway) {
            Some(queue) => commands::send(Some(queue), self.timeout, request_id.clone(), request).await,
            None => {
                let node = match &self.ready.node {
                    Some(node) => Some(node.clone()),
                    None => devicecloud_store::devices::get_owned(&ctx.db, gateway)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|owned| owned.connected_node),
                };
                peers_call(ctx, gateway, node.as_deref(), request_id.clone(), request).await
            }
        };
        match outcome {
            Ok(response) if (200..300).contains(&response.status) => {
                self.ended(status::SUCCEEDED, Some(result_text(&response)))
            }
            Ok(response) => self.ended(status::FAILED, Some(result_text(&response))),
            // Never published: its turn comes again.
            Err(CommandError::Offline) => self.ended(status::PENDING, None),
            Err(CommandError::Timeout(_)) => self.ended(status::TIMED_OUT, None),
            Err(CommandError::Disconnected | CommandError::BadResponse(_)) => self.ended(status::FAILED, None),
        }
    }
}

/// A command through the node holding the gateway's connection (none: not online).
async fn peers_call(
    ctx: &Context,
    gateway: &str,
    node: Option<&str>,
    request_id: String,
    request: &devicecloud_protocol::CommandRequest,
) -> Result<CommandResponse, CommandError> {
    crate::peers::commands::call(&ctx.peers, gateway, node, request_id, request).await
}

/// A device's answer as an execution's `result`.
fn result_text(response: &CommandResponse) -> String {
    json!({"status": response.status, "payload": response.payload}).to_string()
}
