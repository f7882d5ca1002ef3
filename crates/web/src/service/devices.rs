//! Gateways (docs/api.md, "Management endpoints"): provisioning with a device token shown once,
//! changes, archiving and token rotation, by managers of the gateway's group. Archiving and
//! rotation end the gateway's live connection at once.

use devicecloud_store::devices::{self, DeviceChanges, DeviceRow, NewGateway};
use devicecloud_store::unix_now;

use super::validate::Fields;
use super::{Input, Result, ServiceError, access};
use crate::caller::Caller;
use crate::state::AppState;
use devicecloud_engine::auth::Role;
use devicecloud_engine::auth::secrets::{random_token, token_hash};
use devicecloud_engine::peers::{self, Change};

/// Module kinds a gateway may be provisioned as (specification: GO, CORE, PLUS).
pub const MODULE_KINDS: [&str; 3] = ["GO", "CORE", "PLUS"];

/// Default `expected_offline_interval` in seconds: a gateway silent for an hour is late.
const DEFAULT_OFFLINE_INTERVAL_S: i64 = 3600;

/// Serials: printable, no spaces, at most 64 characters (they are MQTT user names too).
fn valid_serial(serial: &str) -> bool {
    !serial.is_empty() && serial.chars().count() <= 64 && serial.chars().all(|c| c.is_ascii_graphic())
}

/// A provisioned gateway and its device token (stored only as a hash: shown this once).
pub struct Provisioned {
    pub row: DeviceRow,
    pub device_token: String,
}

/// Provisions a gateway from `{id_group, serial_hardware, kind, label?,
/// expected_offline_interval?}`: a manager of the group.
pub async fn provision(state: &AppState, caller: &Caller, input: &Input) -> Result<Provisioned> {
    let mut f = Fields::new(input);
    let id_group = f.string("id_group", true, 64).map(str::to_string);
    let serial = f.string("serial_hardware", true, 64).map(str::to_string);
    if serial.as_deref().is_some_and(|s| !valid_serial(s)) {
        f.error(
            "serial_hardware",
            "Serial Hardware must be 1 to 64 printable characters without spaces.",
        );
    }
    let kind = f.string("kind", true, 8).map(str::to_string);
    if kind.as_deref().is_some_and(|k| !MODULE_KINDS.contains(&k)) {
        f.error("kind", "Kind must be one of GO, CORE, PLUS.");
    }
    let label = f.string("label", false, 255).unwrap_or_default().to_string();
    let interval = f.integer("expected_offline_interval", false, 0, 31_536_000);
    f.finish()?;
    let (id_group, serial, kind) = (
        id_group.unwrap_or_default(),
        serial.unwrap_or_default(),
        kind.unwrap_or_default(),
    );

    access::input_group(state, caller, &id_group, Role::Manager).await?;
    let token = random_token();
    let gateway = NewGateway {
        id_group: &id_group,
        serial_hardware: &serial,
        kind: &kind,
        label: &label,
        expected_offline_interval: interval.unwrap_or(DEFAULT_OFFLINE_INTERVAL_S),
    };
    let row = devices::provision(&state.db, &gateway, &token_hash(&token), unix_now()).await?;
    Ok(Provisioned {
        row,
        device_token: token,
    })
}

/// Changes a device with `{label?, expected_offline_interval?, expected_live_status?}`; the
/// changed expectation shows in `device_status` at once.
pub async fn update(state: &AppState, caller: &Caller, id: &str, input: &Input) -> Result<DeviceRow> {
    access::device(state, caller, id, Role::Manager).await?;
    let mut f = Fields::new(input);
    let label = f.string("label", false, 255).map(str::to_string);
    let interval = f.integer("expected_offline_interval", false, 0, 31_536_000);
    let live = f.integer("expected_live_status", false, 0, 1);
    f.finish()?;
    let changes = DeviceChanges {
        label: label.as_deref(),
        expected_offline_interval: interval,
        expected_live_status: live,
    };
    devices::update(&state.db, id, &changes).await?;
    // A changed expectation shows in device_status at once, not at the next refresh.
    devices::refresh_status_of(&state.db, id, unix_now()).await?;
    let row = devices::get(&state.db, id)
        .await?
        .ok_or_else(|| ServiceError::not_found("Physical device", id))?;
    Ok(row)
}

/// Archives a device: a gateway's live connection ends now and later CONNECTs are refused; an
/// asset's gateway forgets it, so that its serial's next data makes a new asset.
pub async fn archive(state: &AppState, caller: &Caller, id: &str) -> Result<()> {
    let device = access::device(state, caller, id, Role::Manager).await?;
    if !devices::archive(&state.db, id, &caller.id_user, unix_now()).await? {
        return Err(ServiceError::not_found("Physical device", id));
    }
    match device.id_parent {
        // An asset: its gateway's connection stops sending its data to it.
        Some(gateway) => peers::apply::change(
            &state.peers,
            Change::AssetArchived {
                gateway,
                asset: id.to_string(),
            },
        ),
        None => peers::apply::change(&state.peers, Change::Revoked { device: id.to_string() }),
    }
    Ok(())
}

/// Gives a gateway a new device token; the connection that used the old one ends now.
pub async fn rotate_token(state: &AppState, caller: &Caller, id: &str) -> Result<String> {
    access::device(state, caller, id, Role::Manager).await?;
    let token = random_token();
    if !devices::rotate_token(&state.db, id, &token_hash(&token)).await? {
        return Err(ServiceError::not_found("Physical device", id));
    }
    peers::apply::change(&state.peers, Change::Revoked { device: id.to_string() });
    Ok(token)
}
