//! The command router (docs/gateway-protocol.md, "Commands"; docs/api.md, "Commands"): an API
//! command becomes a request with a fresh id, queued to the gateway's live connection on this
//! node, which publishes it at QoS 1 and hands back the response published on
//! `v1/gateway/responses/<request_id>`.
//!
//! Waiting callers live in the connection that carries their request ([`Pending`]): when the
//! connection ends, its waiters fail at once; a caller that gives up (timeout) drops its end,
//! and the connection forgets it at its next command or answer, so nothing leaks.

mod log;
mod pending;

use std::time::Duration;

use devicecloud_protocol::{CommandMethod, CommandRequest, CommandResponse};
use tokio::sync::oneshot;

pub use log::{CommandLog, CommandRecord};
pub use pending::Pending;

/// What the gateway sent back for one request: the response, or why it could not be read.
pub type Reply = Result<CommandResponse, String>;

/// One request on its way to a connection.
#[derive(Debug)]
pub struct Outbound {
    /// The id the gateway answers on (`v1/gateway/responses/<request_id>`).
    pub request_id: String,
    /// The request as published (`{"method": …, "params": …}`).
    pub payload: Vec<u8>,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Reply>,
}

/// What a connection publishes for the cloud.
#[derive(Debug)]
pub enum Outgoing {
    /// A command request; its caller waits for the answer (docs/gateway-protocol.md, "Commands").
    Command(Outbound),
    /// A desired document on `v1/gateway/twin/desired`, which needs no answer
    /// (docs/gateway-protocol.md, "Twin").
    Desired(Vec<u8>),
}

/// The HTTP status the caller gets for a device's own `status`: the device's status when it is
/// one an answer with a body can carry, otherwise 502 (docs/api.md, "Commands").
pub fn answer_status(status: u16) -> u16 {
    let usable = (200..=999).contains(&status) && !matches!(status, 204 | 205 | 304);
    if usable { status } else { 502 }
}

/// Why a command got no answer from the gateway.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// No live connection: the request was never published.
    #[error("device is not online")]
    Offline,
    /// The connection ended before an answer came.
    #[error("device disconnected before answering")]
    Disconnected,
    /// No answer within the command timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The answer was not a command response (docs/gateway-protocol.md, "Commands"); the text says
    /// why.
    #[error("invalid answer: {0}")]
    BadResponse(String),
}

impl CommandError {
    /// The HTTP status the caller of `method` is answered with (docs/api.md, "Commands"): the
    /// counter resets answer 400 where the others answer 404 for a device that is not online
    /// (specification, Errors).
    pub fn http_status(&self, method: CommandMethod) -> u16 {
        let offline = match method {
            CommandMethod::ResetMainCounter | CommandMethod::ResetDailyCounter => 400,
            _ => 404,
        };
        match self {
            CommandError::Offline | CommandError::Disconnected => offline,
            CommandError::Timeout(_) => 504,
            CommandError::BadResponse(_) => 502,
        }
    }

    /// The short outcome recorded in the command event.
    pub fn outcome(&self) -> &'static str {
        match self {
            CommandError::Offline => "offline",
            CommandError::Disconnected => "disconnected",
            CommandError::Timeout(_) => "timeout",
            CommandError::BadResponse(_) => "invalid response",
        }
    }
}

/// A fresh request id: 32 hexadecimal characters, valid as a topic level
/// ([`devicecloud_protocol::is_valid_request_id`]).
pub fn request_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Sends `request` through `queue`, the command queue of a gateway's live connection (`None`:
/// not connected), and waits for its answer, at most `limit` (queueing included).
pub async fn send(
    queue: Option<flume::Sender<Box<Outgoing>>>,
    limit: Duration,
    request_id: String,
    request: &CommandRequest,
) -> Result<CommandResponse, CommandError> {
    send_payload(queue, limit, request_id, request.to_payload()).await
}

/// [`send`] of a request already written as published (one relayed from another node).
pub async fn send_payload(
    queue: Option<flume::Sender<Box<Outgoing>>>,
    limit: Duration,
    request_id: String,
    payload: Vec<u8>,
) -> Result<CommandResponse, CommandError> {
    let Some(queue) = queue else {
        return Err(CommandError::Offline);
    };
    let (reply, answer) = oneshot::channel();
    let outbound = Box::new(Outgoing::Command(Outbound {
        request_id,
        payload,
        reply,
    }));
    let exchange = async move {
        // A queue closed meanwhile means the connection ended before publishing.
        queue
            .send_async(outbound)
            .await
            .map_err(|_| CommandError::Disconnected)?;
        match answer.await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(why)) => Err(CommandError::BadResponse(why)),
            // The connection dropped its waiters: it ended.
            Err(_) => Err(CommandError::Disconnected),
        }
    };
    tokio::time::timeout(limit, exchange)
        .await
        .unwrap_or(Err(CommandError::Timeout(limit)))
}
