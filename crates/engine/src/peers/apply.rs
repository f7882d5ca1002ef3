//! Changes applied on this node, made through it (then told to the other nodes) or told by
//! another node.

use devicecloud_store::notify::Heard;

use super::Context;
use super::{Change, Envelope, commands};
use std::sync::Arc;

impl Change {
    /// Its effect on this node.
    fn apply(&self, ctx: &Arc<Context>) {
        match self {
            Change::Token { hash } => ctx.auth.forget_token(hash),
            Change::Account { id_user } => ctx.auth.forget_user(id_user),
            Change::Roles { id_user } => {
                ctx.auth.forget_roles(id_user);
                ctx.pages.invalidate();
            }
            Change::Groups => {
                ctx.pages.invalidate();
                ctx.auth.rights_changed();
            }
            Change::Webhooks => ctx.webhooks.webhook_changed(),
            Change::Requests { counts } => {
                if let Some(limiter) = &ctx.account_limiter {
                    for (id_user, requests) in counts {
                        limiter.used_elsewhere(id_user, *requests);
                    }
                }
            }
            Change::SignInFailed { key } => ctx.login_limiter.failed_elsewhere(key, std::time::Instant::now()),
            Change::SignedIn { key } => ctx.login_limiter.succeeded(key),
            Change::Revoked { device } => ctx.gateways.revoke(device),
            Change::AssetArchived { gateway, asset } => ctx.gateways.archived.record(gateway, asset),
            Change::Connected { device } => ctx.gateways.take_over(device),
            Change::Command {
                to,
                reply_to,
                device,
                request_id,
                payload,
            } if *to == ctx.node_id => commands::relay(ctx, reply_to, device, request_id, payload),
            Change::Answer { to, request_id, answer } if *to == ctx.node_id => {
                ctx.peers.answered(request_id, answer.clone());
            }
            Change::Twin { to, device } if *to == ctx.node_id => {
                let (ctx, device) = (ctx.clone(), device.clone());
                tokio::spawn(
                    async move { crate::gateway::desired::to_connection(&ctx.db, &ctx.gateways, &device).await },
                );
            }
            Change::Command { .. } | Change::Answer { .. } | Change::Twin { .. } => {}
        }
    }
}

/// Applies a change (already committed) on this node and tells the other nodes.
pub fn change(ctx: &Arc<Context>, change: Change) {
    change.apply(ctx);
    ctx.peers.tell(change);
}

/// Tells the other nodes only: a change whose effect here already happened (a gateway that
/// connected here).
pub fn tell(ctx: &Arc<Context>, change: Change) {
    ctx.peers.tell(change);
}

/// Applies what the other nodes tell, until shutdown (nothing on SQLite).
pub async fn listen(ctx: Arc<Context>) {
    let Some(mut heard) = ctx.peers.take_heard() else {
        return;
    };
    while let Some(heard) = heard.recv().await {
        match heard {
            Heard::Notice { payload, .. } => match serde_json::from_str::<Envelope>(&payload) {
                Ok(envelope) if envelope.from != ctx.node_id => envelope.change.apply(&ctx),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "a change from another node that does not read"),
            },
            Heard::Lost => forget_everything(&ctx),
        }
    }
}

/// How often the requests let through per account are told to the other nodes.
const REPORT_EVERY: std::time::Duration = std::time::Duration::from_millis(500);
/// Accounts per report message, so that one fits a notification.
const REPORT_ACCOUNTS: usize = 100;

/// Tells the other nodes, every [`REPORT_EVERY`], how many requests each account made here
/// (nothing without a rate limit or other nodes).
pub async fn report_requests(ctx: Arc<Context>) {
    let Some(limiter) = &ctx.account_limiter else {
        return;
    };
    if !ctx.peers.reaches_others() {
        return;
    }
    let mut every = crate::periodic::Every::new(REPORT_EVERY, &ctx.shutdown);
    while every.tick().await {
        for counts in limiter.reports().chunks(REPORT_ACCOUNTS) {
            tell(
                &ctx,
                Change::Requests {
                    counts: counts.to_vec(),
                },
            );
        }
    }
}

/// After changes may have been missed: every cached right and page is read again.
fn forget_everything(ctx: &Arc<Context>) {
    ctx.auth.forget_all();
    ctx.pages.invalidate();
}
