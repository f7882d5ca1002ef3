//! One attempt of a command or firmware execution (docs/api.md, "Jobs", "job execution"): the
//! command sent to the gateway where it is connected and its answer awaited (2xx: succeeded; a
//! firmware update goes on until the gateway's next hello). Twin executions start in batches
//! (`twins::batch`) and end with their device's report. A job's command records no event 213
//! per device: its execution is the record (a job over a fleet would otherwise flood the events
//! and every Events webhook).

use std::sync::Arc;
use std::time::Duration;

use devicecloud_protocol::firmware::{UpdateParams, version_of};
use devicecloud_protocol::{CommandResponse, ModuleKind};
use devicecloud_store::jobs::runs::{Ended, Ready};
use devicecloud_store::jobs::status;
use serde_json::json;

use super::Context;
use crate::commands::{self, CommandError};

/// Longest a firmware execution waits for the gateway's acceptance of `update` (it answers at
/// once, before downloading); past it the execution still ends with the gateway's hello.
const UPDATE_ANSWER_WAIT: Duration = Duration::from_secs(60);

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
        let kind = self.ready.kind.as_deref().and_then(|k| k.parse::<ModuleKind>().ok());
        if kind.is_some_and(|kind| !request.method.supported_by(kind)) {
            // As the API answers it: the device layer's 501.
            let answer = CommandResponse::failure(501, "Wifi disabled");
            return self.ended(status::FAILED, Some(result_text(&answer)));
        }
        match self.send(request, self.timeout).await {
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

    /// A firmware execution's attempt (docs/api.md, "Firmware: update"): a gateway already on
    /// the version succeeds at once; otherwise `update` is sent. Its acceptance is recorded (an
    /// outcome `in_progress`) and the execution goes on until the gateway's next hello, its
    /// event 221 or the deadline ends it (`gateway::updates`, the sweep); a refusal fails it,
    /// and a gateway that went away before answering gets it again when it connects. `None`:
    /// nothing to record yet (no answer in time).
    pub async fn update(self, params: &UpdateParams) -> Option<Ended> {
        let running = version_of(
            &params.component,
            &self.ready.platform_software_version,
            &self.ready.app_software_version,
        );
        if running.as_deref() == Some(params.version.as_str()) {
            let answer = json!({"status": 200, "payload": {"result": "installed", "version": params.version}});
            return Some(self.ended(status::SUCCEEDED, Some(answer.to_string())));
        }
        match self
            .send(
                &devicecloud_protocol::CommandRequest::update(params),
                self.timeout.min(UPDATE_ANSWER_WAIT),
            )
            .await
        {
            // Accepted: the answer is recorded and the execution goes on.
            Ok(response) if (200..300).contains(&response.status) => {
                Some(self.ended(status::IN_PROGRESS, Some(result_text(&response))))
            }
            Ok(response) => Some(self.ended(status::FAILED, Some(result_text(&response)))),
            Err(CommandError::Offline | CommandError::Disconnected) => Some(self.ended(status::PENDING, None)),
            // The answer may still come, and the hello surely will if it installs.
            Err(CommandError::Timeout(_)) => None,
            Err(CommandError::BadResponse(_)) => Some(self.ended(status::FAILED, None)),
        }
    }

    /// Sends `request` to the gateway, through the node holding its connection, and waits at
    /// most `timeout` for the answer.
    async fn send(
        &self,
        request: &devicecloud_protocol::CommandRequest,
        timeout: Duration,
    ) -> Result<CommandResponse, CommandError> {
        let ctx = &self.ctx;
        let gateway = &self.ready.gateway;
        let request_id = commands::request_id();
        match ctx.gateways.commands(gateway) {
            Some(queue) => commands::send(Some(queue), timeout, request_id, request).await,
            None => {
                let node = match &self.ready.node {
                    Some(node) => Some(node.clone()),
                    None => devicecloud_store::devices::get_owned(&ctx.db, gateway)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|owned| owned.connected_node),
                };
                peers_call(ctx, gateway, node.as_deref(), request_id, request).await
            }
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
