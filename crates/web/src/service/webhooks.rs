//! Webhooks (docs/api.md, "Webhooks"): creating, changing and deleting a group's webhooks, with
//! the validation both the JSON API and the dashboard's forms apply, the address check, the
//! per-group limit, the sealing of their credentials, and the wake-up of the delivery workers
//! after each change.

use axum::http::HeaderValue;
use devicecloud_store::unix_now;
use devicecloud_store::webhooks::{self, FORWARDING_TYPES, NewWebhook, WebhookChanges, WebhookRow};
use serde_json::{Map, Value};

use super::validate::Fields;
use super::{Input, Result, ServiceError, access};
use crate::caller::Caller;
use crate::state::AppState;
use devicecloud_engine::auth::Role;
use devicecloud_engine::auth::secrets::random_token;
use devicecloud_engine::peers::{self, Change};
use devicecloud_engine::webhooks::address::{self, MAX_URL_CHARS};
use devicecloud_engine::webhooks::format::{FORMATTERS, formatter};
use devicecloud_engine::webhooks::vault;

/// Longest `authorization` value accepted.
const MAX_AUTHORIZATION_CHARS: usize = 4096;

/// A URL field checked for form and, unless private addresses are allowed, for where it
/// resolves: every address public (docs/api.md, "Webhooks"). The worker checks again, with the
/// same resolver, at every delivery.
async fn check_url(state: &AppState, url: &str) -> Result<()> {
    let invalid = |e: address::AddressError| ServiceError::invalid("url", e.to_string());
    let parsed = address::parse(url).map_err(invalid)?;
    let resolver = &state.webhooks.resolver;
    if !resolver.allows_private() {
        resolver.resolve_url(&parsed).await.map_err(invalid)?;
    }
    Ok(())
}

/// The fields a body may set, validated (`creating` requires the mandatory ones).
struct WebhookBody {
    id_group: Option<String>,
    label: Option<String>,
    forwarding_type: Option<String>,
    formatter: Option<String>,
    url: Option<String>,
    /// `Some(None)`: removed (null or empty).
    authorization: Option<Option<String>>,
    is_active: Option<bool>,
}

fn read_webhook(body: &Input, creating: bool) -> Result<WebhookBody> {
    let mut f = Fields::new(body);
    let id_group = f.fixed("id_group", creating, 64).map(str::to_string);
    let label = f
        .string("label", creating || body.contains_key("label"), 255)
        .map(str::to_string);
    let forwarding_type = f.fixed("forwarding_type", creating, 32).map(str::to_string);
    if forwarding_type
        .as_deref()
        .is_some_and(|k| !FORWARDING_TYPES.contains(&k))
    {
        f.error(
            "forwarding_type",
            "Forwarding Type must be one of measurements, events.",
        );
    }
    let name = f
        .string("formatter", creating || body.contains_key("formatter"), 32)
        .map(str::to_string);
    if name.as_deref().is_some_and(|n| formatter(n).is_none()) {
        let names: Vec<&str> = FORMATTERS.iter().map(|f| f.name).collect();
        f.error("formatter", format!("Formatter must be one of {}.", names.join(", ")));
    }
    let url = f
        .string("url", creating || body.contains_key("url"), MAX_URL_CHARS)
        .map(str::to_string);
    let authorization = if body.contains_key("authorization") {
        let value = f
            .string("authorization", false, MAX_AUTHORIZATION_CHARS)
            .map(str::to_string)
            .filter(|v| !v.is_empty());
        // Sent verbatim as a header: it must be one.
        if value.as_deref().is_some_and(|v| HeaderValue::from_str(v).is_err()) {
            f.error(
                "authorization",
                "Authorization must be printable text without line breaks.",
            );
        }
        Some(value)
    } else {
        None
    };
    let is_active = f.boolean("is_active");
    f.finish()?;
    Ok(WebhookBody {
        id_group,
        label,
        forwarding_type,
        formatter: name,
        url,
        authorization,
        is_active,
    })
}

/// A created webhook and its signing secret, shown this once.
pub struct Created {
    pub row: WebhookRow,
    pub secret: String,
}

/// Creates a webhook from `{label, id_group, forwarding_type, formatter, url, authorization?,
/// is_active?}`; the caller must be a manager of the group, which must hold fewer than
/// `webhooks_per_group` webhooks.
pub async fn create(state: &AppState, caller: &Caller, input: &Input) -> Result<Created> {
    let body = read_webhook(input, true)?;
    let id_group = body.id_group.unwrap_or_default();
    access::input_group(state, caller, &id_group, Role::Manager).await?;
    let url = body.url.unwrap_or_default();
    check_url(state, &url).await?;
    let secret = random_token();
    let vault = &state.webhooks.vault;
    let sealed_secret = vault.seal(vault::SECRET, &secret);
    let sealed_authorization = body
        .authorization
        .flatten()
        .map(|a| vault.seal(vault::AUTHORIZATION, &a));
    let new = NewWebhook {
        id_group: &id_group,
        label: body.label.as_deref().unwrap_or_default(),
        forwarding_type: body.forwarding_type.as_deref().unwrap_or_default(),
        formatter: body.formatter.as_deref().unwrap_or_default(),
        url: &url,
        authorization_header: sealed_authorization.as_deref(),
        secret: &sealed_secret,
        is_active: body.is_active.unwrap_or(true),
        created_by: &caller.id_user,
    };
    let per_group = state.settings.limits.webhooks_per_group;
    let row = webhooks::create(&state.db, &new, per_group as u64, unix_now())
        .await?
        .ok_or_else(|| {
            ServiceError::invalid(
                "id_group",
                format!("The group already has {per_group} webhooks, the most it may have."),
            )
        })?;
    peers::apply::change(&state.peers, Change::Webhooks);
    Ok(Created { row, secret })
}

/// Changes a webhook with `{label?, formatter?, url?, authorization?, is_active?}`; the caller
/// must be a manager of its group. Activating an inactive webhook starts it from new data
/// (whatever it had queued is dropped, and counted as dropped).
pub async fn update(state: &AppState, caller: &Caller, id: &str, input: &Input) -> Result<WebhookRow> {
    access::webhook(state, caller, id, Role::Manager).await?;
    let body = read_webhook(input, false)?;
    if let Some(url) = &body.url {
        check_url(state, url).await?;
    }
    let vault = &state.webhooks.vault;
    let sealed_authorization = body
        .authorization
        .as_ref()
        .map(|a| a.as_deref().map(|a| vault.seal(vault::AUTHORIZATION, a)));
    let changes = WebhookChanges {
        label: body.label.as_deref(),
        formatter: body.formatter.as_deref(),
        url: body.url.as_deref(),
        authorization_header: sealed_authorization.as_ref().map(|a| a.as_deref()),
        is_active: body.is_active,
    };
    let (row, dropped) = webhooks::update(&state.db, id, &changes, unix_now())
        .await?
        .ok_or_else(|| ServiceError::not_found("Webhook", id))?;
    metrics::counter!(devicecloud_engine::webhooks::ITEMS, "outcome" => "dropped").increment(dropped);
    peers::apply::change(&state.peers, Change::Webhooks);
    Ok(row)
}

/// Enables a disabled webhook or disables an enabled one.
pub async fn toggle(state: &AppState, caller: &Caller, id: &str) -> Result<WebhookRow> {
    let row = access::webhook(state, caller, id, Role::Manager).await?;
    let mut input = Map::new();
    input.insert("is_active".into(), Value::Bool(row.is_active != 1));
    update(state, caller, id, &input).await
}

/// Deletes a webhook with its queue and attempts; the caller must be a manager of its group.
pub async fn delete(state: &AppState, caller: &Caller, id: &str) -> Result<()> {
    access::webhook(state, caller, id, Role::Manager).await?;
    webhooks::delete(&state.db, id).await?;
    peers::apply::change(&state.peers, Change::Webhooks);
    Ok(())
}
