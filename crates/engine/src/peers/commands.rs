//! Commands to a gateway connected to another node (docs/api.md, "Commands"): the node that
//! received the API call asks the node holding the gateway's connection, through the database
//! ([`Change::Command`]); that node sends the request as its own and tells the answer back
//! ([`Change::Answer`]). The caller's node records the command (event 213) as for a local one;
//! the gateway sees no difference.

use std::time::Duration;

use devicecloud_protocol::{CommandRequest, CommandResponse};
use devicecloud_store::notify::MAX_PAYLOAD;
use tokio::sync::oneshot;

use super::{Answer, Change};
use crate::commands::{self, CommandError};

use super::Context;
use std::sync::Arc;

/// Room kept in a notification for the envelope around an answer.
const ENVELOPE: usize = 256;

/// Sends `request` to gateway `device` through `node`, the node holding its connection (as
/// read with the caller's rights check), and waits for the answer at most the command timeout.
/// [`CommandError::Offline`] when no other node holds it (or there are no other nodes).
pub async fn call(
    ctx: &Arc<Context>,
    device: &str,
    node: Option<&str>,
    request_id: String,
    request: &CommandRequest,
) -> Result<CommandResponse, CommandError> {
    let limit = ctx.command_timeout;
    let node = match node {
        Some(node) if node != ctx.node_id && ctx.peers.reaches_others() => node.to_string(),
        _ => return Err(CommandError::Offline),
    };
    let (reply, answer) = oneshot::channel();
    ctx.peers.wait(&request_id, reply);
    let payload = String::from_utf8_lossy(&request.to_payload()).into_owned();
    let command = Change::Command {
        to: node,
        reply_to: ctx.node_id.clone(),
        device: device.to_string(),
        request_id: request_id.clone(),
        payload,
    };
    ctx.peers.tell(command);
    let answer = tokio::time::timeout(limit, answer).await;
    ctx.peers.forget(&request_id);
    match answer {
        Ok(Ok(answer)) => outcome(answer, limit),
        // The other node never answered (it died, or its answer was lost).
        Ok(Err(_)) | Err(_) => Err(CommandError::Timeout(limit)),
    }
}

/// The caller's outcome of an answer.
fn outcome(answer: Answer, limit: Duration) -> Result<CommandResponse, CommandError> {
    match answer {
        Answer::Response { status, payload } => Ok(CommandResponse { status, payload }),
        Answer::Failed { outcome, why } => Err(match outcome.as_str() {
            "offline" => CommandError::Offline,
            "disconnected" => CommandError::Disconnected,
            "timeout" => CommandError::Timeout(limit),
            _ => CommandError::BadResponse(why),
        }),
    }
}

/// Sends a command another node relays to a gateway connected here, and tells that node what
/// became of it.
pub(super) fn relay(ctx: &Arc<Context>, reply_to: &str, device: &str, request_id: &str, payload: &str) {
    let (ctx, reply_to, device, request_id, payload) = (
        ctx.clone(),
        reply_to.to_string(),
        device.to_string(),
        request_id.to_string(),
        payload.as_bytes().to_vec(),
    );
    // Bounded by the command timeout.
    tokio::spawn(async move {
        let queue = ctx.gateways.commands(&device);
        let limit = ctx.command_timeout;
        let answer = match commands::send_payload(queue, limit, request_id.clone(), payload).await {
            Ok(response) => Answer::Response {
                status: response.status,
                payload: response.payload,
            },
            Err(e) => Answer::Failed {
                outcome: e.outcome().to_string(),
                why: e.to_string(),
            },
        };
        let answer = fitting(answer);
        ctx.peers.tell(Change::Answer {
            to: reply_to,
            request_id,
            answer,
        });
    });
}

/// The answer, or why it cannot travel: a notification holds less than 8,000 bytes.
fn fitting(answer: Answer) -> Answer {
    let bytes = serde_json::to_string(&answer).map_or(usize::MAX, |text| text.len());
    if bytes + ENVELOPE <= MAX_PAYLOAD {
        return answer;
    }
    Answer::Failed {
        outcome: "invalid response".to_string(),
        why: format!("the answer ({bytes} bytes) is too large to pass between nodes"),
    }
}
