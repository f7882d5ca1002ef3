//! Changes applied on this node, made through it (then told to the other nodes) or told by
//! another node.

use devicecloud_store::notify::Heard;

use super::{Change, Envelope, commands};
use crate::state::AppState;

impl Change {
    /// Its effect on this node.
    fn apply(&self, state: &AppState) {
        match self {
            Change::Token { hash } => state.auth.forget_token(hash),
            Change::Account { id_user } => state.auth.forget_user(id_user),
            Change::Roles { id_user } => {
                state.auth.forget_roles(id_user);
                state.pages.invalidate();
            }
            Change::Groups => {
                state.pages.invalidate();
                state.auth.rights_changed();
            }
            Change::Webhooks => state.webhooks.webhook_changed(),
            Change::Requests { counts } => {
                if let Some(limiter) = &state.account_limiter {
                    for (id_user, requests) in counts {
                        limiter.used_elsewhere(id_user, *requests);
                    }
                }
            }
            Change::SignInFailed { key } => state.login_limiter.failed_elsewhere(key, std::time::Instant::now()),
            Change::SignedIn { key } => state.login_limiter.succeeded(key),
            Change::Revoked { device } => state.gateways.revoke(device),
            Change::AssetArchived { gateway, asset } => state.gateways.archived.record(gateway, asset),
            Change::Connected { device } => state.gateways.take_over(device),
            Change::Command {
                to,
                reply_to,
                device,
                request_id,
                payload,
            } if *to == state.node_id => commands::relay(state, reply_to, device, request_id, payload),
            Change::Answer { to, request_id, answer } if *to == state.node_id => {
                state.peers.answered(request_id, answer.clone());
            }
            Change::Command { .. } | Change::Answer { .. } => {}
        }
    }
}

/// Applies a change (already committed) on this node and tells the other nodes.
pub fn change(state: &AppState, change: Change) {
    change.apply(state);
    state.peers.tell(change);
}

/// Tells the other nodes only: a change whose effect here already happened (a gateway that
/// connected here).
pub fn tell(state: &AppState, change: Change) {
    state.peers.tell(change);
}

/// Applies what the other nodes tell, until shutdown (nothing on SQLite).
pub async fn listen(state: AppState) {
    let Some(mut heard) = state.peers.take_heard() else {
        return;
    };
    while let Some(heard) = heard.recv().await {
        match heard {
            Heard::Notice { payload, .. } => match serde_json::from_str::<Envelope>(&payload) {
                Ok(envelope) if envelope.from != state.node_id => envelope.change.apply(&state),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "a change from another node that does not read"),
            },
            Heard::Lost => forget_everything(&state),
        }
    }
}

/// How often the requests let through per account are told to the other nodes.
const REPORT_EVERY: std::time::Duration = std::time::Duration::from_millis(500);
/// Accounts per report message, so that one fits a notification.
const REPORT_ACCOUNTS: usize = 100;

/// Tells the other nodes, every [`REPORT_EVERY`], how many requests each account made here
/// (nothing without a rate limit or other nodes).
pub async fn report_requests(state: AppState) {
    let Some(limiter) = &state.account_limiter else {
        return;
    };
    if !state.peers.reaches_others() {
        return;
    }
    let mut every = crate::periodic::Every::new(REPORT_EVERY, &state.shutdown);
    while every.tick().await {
        for counts in limiter.reports().chunks(REPORT_ACCOUNTS) {
            tell(
                &state,
                Change::Requests {
                    counts: counts.to_vec(),
                },
            );
        }
    }
}

/// After changes may have been missed: every cached right and page is read again.
fn forget_everything(state: &AppState) {
    state.auth.forget_all();
    state.pages.invalidate();
}
