//! Jobs (docs/api.md, "Jobs"): creating one over a device filter (resolved once, over the
//! devices the caller can see), reading and cancelling it, with the rights the contract sets: a
//! manager of every group targeted (or an administrator) creates; whoever sees every group it
//! targets reads; its creator's peers (managers of those groups) cancel.

use devicecloud_engine::auth::Role;
use devicecloud_engine::jobs::operation::{self, Operation};
use devicecloud_query::{DEFAULT_MAX_LIST_VALUES, PageRequest, parse_filter};
use devicecloud_store::device_collection::{self, ATTRIBUTES as DEVICE_ATTRIBUTES};
use devicecloud_store::devices::DeviceRow;
use devicecloud_store::firmware::FirmwareRow;
use devicecloud_store::jobs::{self, JobRow, NewJob, Target};
use devicecloud_store::{ListArgs, unix_now};
use serde_json::Value;

use super::validate::Fields;
use super::{Input, Result, ServiceError, access, firmware};
use crate::caller::Caller;
use crate::state::AppState;

/// Most devices one job may target.
pub const MAX_TARGETS: usize = 100_000;
/// Devices read per page while a target is resolved.
const RESOLVE_PAGE: u64 = 1000;

/// Defaults and bounds (docs/api.md, "Jobs").
const RATE_DEFAULT: i64 = 6000;
const RATE_MAX: i64 = 600_000;
const TIMEOUT_DEFAULT_S: i64 = 60;
const FIRMWARE_TIMEOUT_DEFAULT_S: i64 = 900;
const TIMEOUT_MAX_S: i64 = 86_400;
const EXPIRES_DEFAULT_S: i64 = 86_400;
const EXPIRES_MAX_S: i64 = 30 * 86_400;

/// Creates a job from `{label, operation, target: {filter}, rate_per_minute?,
/// max_failures_percent?, timeout_s?, expires_in_s?}`.
pub async fn create(state: &AppState, caller: &Caller, input: &Input) -> Result<JobRow> {
    let mut f = Fields::new(input);
    let label = f.string("label", true, 255).map(str::to_string);
    let rate = f.integer("rate_per_minute", false, 1, RATE_MAX);
    let max_failures = f.integer("max_failures_percent", false, 0, 100);
    let timeout = f.integer("timeout_s", false, 1, TIMEOUT_MAX_S);
    let expires_in = f.integer("expires_in_s", false, 1, EXPIRES_MAX_S);
    let operation = match input.get("operation") {
        None | Some(Value::Null) => {
            f.error("operation", "Operation cannot be blank.");
            None
        }
        Some(value) => match operation::parse(value) {
            Ok(op) => Some(op),
            Err(why) => {
                f.error("operation", why);
                None
            }
        },
    };
    let filter = match input.get("target") {
        Some(Value::Object(target)) => match target.get("filter") {
            Some(filter @ Value::Object(_)) => {
                match parse_filter(filter, &DEVICE_ATTRIBUTES, DEFAULT_MAX_LIST_VALUES) {
                    Ok(filter) => Some(filter),
                    Err(e) => {
                        f.error("target", format!("Target filter: {e}"));
                        None
                    }
                }
            }
            _ => {
                f.error("target", "Target must be {\"filter\": {…}}, a physical-device filter.");
                None
            }
        },
        None | Some(Value::Null) => {
            f.error("target", "Target cannot be blank.");
            None
        }
        Some(_) => {
            f.error("target", "Target must be {\"filter\": {…}}, a physical-device filter.");
            None
        }
    };
    f.finish()?;
    let (Some(label), Some(operation), Some(filter)) = (label, operation, filter) else {
        return Err(ServiceError::invalid("operation", "Operation cannot be blank."));
    };
    let image = match &operation {
        Operation::Firmware(id) => Some(image_of(state, caller, id).await?),
        _ => None,
    };
    let runs_on = |device: &DeviceRow| {
        let gateway = device.id_parent.is_none();
        match &image {
            // An image installs on gateways of its kind, in its group when it has one.
            Some(image) => {
                gateway
                    && device
                        .kind
                        .as_deref()
                        .is_some_and(|kind| image.is_for(kind, &device.id_group))
            }
            None => gateway || !operation.gateways_only(),
        }
    };
    let devices = resolve(state, caller, filter.as_ref(), runs_on).await?;
    if devices.is_empty() {
        return Err(ServiceError::invalid(
            "target",
            "The target matches no device the job can run on (commands go to gateways only; firmware to gateways of the image's kind and group).",
        ));
    }
    let mut groups: Vec<String> = devices.iter().map(|d| d.id_group.clone()).collect();
    groups.sort_unstable();
    groups.dedup();
    if !caller.is_admin {
        access::groups(state, caller, &groups, Role::Manager).await?;
    }
    let timeout = timeout.unwrap_or(match operation {
        Operation::Firmware(_) => FIRMWARE_TIMEOUT_DEFAULT_S,
        _ => TIMEOUT_DEFAULT_S,
    });
    let now = unix_now();
    let operation_text = input.get("operation").map(Value::to_string).unwrap_or_default();
    let target_text = input.get("target").map(Value::to_string).unwrap_or_default();
    let new = NewJob {
        label: &label,
        kind: operation.kind(),
        operation: &operation_text,
        target: &target_text,
        created_by: &caller.id_user,
        rate_per_minute: rate.unwrap_or(RATE_DEFAULT),
        max_failures_percent: max_failures.unwrap_or(100),
        timeout_s: timeout,
        expires_at: now + expires_in.unwrap_or(EXPIRES_DEFAULT_S),
        devices: &devices,
        id_firmware: image.as_ref().map(|i| i.id_firmware.as_str()),
    };
    let Some(job) = jobs::create(&state.db, &new, now).await? else {
        return Err(ServiceError::invalid(
            "operation",
            "The firmware image was deleted meanwhile.",
        ));
    };
    state.jobs.wake.notify_one();
    Ok(job)
}

/// The image a firmware job installs, as the caller sees it; one they cannot see is a field
/// error on `operation`.
async fn image_of(state: &AppState, caller: &Caller, id: &str) -> Result<FirmwareRow> {
    firmware::get(state, caller, id, Role::Viewer)
        .await
        .map_err(|e| match e {
            ServiceError::NotFound(_) => ServiceError::invalid("operation", format!("Firmware image not found: {id}.")),
            other => other,
        })
}

/// The devices `filter` matches among those the caller sees, not archived, that the job runs
/// on (`runs_on`), each with the gateway that carries its execution; at most [`MAX_TARGETS`].
async fn resolve(
    state: &AppState,
    caller: &Caller,
    filter: Option<&devicecloud_query::Filter>,
    runs_on: impl Fn(&DeviceRow) -> bool,
) -> Result<Vec<Target>> {
    let mut targets = Vec::new();
    let mut page = 1;
    loop {
        let args = ListArgs {
            scope: caller.group_scope(),
            filter,
            sort: None,
            page: PageRequest {
                page,
                per_page: RESOLVE_PAGE,
                default_per_page: RESOLVE_PAGE,
            },
            count_only: false,
        };
        let listing = device_collection::list(&state.db, args).await?;
        for device in listing.items {
            if device.archived_at.is_some() || !runs_on(&device) {
                continue;
            }
            let gateway = device
                .id_parent
                .clone()
                .unwrap_or_else(|| device.id_physical_device.clone());
            targets.push(Target {
                device: device.id_physical_device,
                gateway,
                id_group: device.id_group,
            });
        }
        if targets.len() > MAX_TARGETS {
            return Err(ServiceError::invalid(
                "target",
                format!("The target matches more than {MAX_TARGETS} devices; narrow the filter."),
            ));
        }
        if listing.page.current_page >= listing.page.page_count {
            return Ok(targets);
        }
        page += 1;
    }
}

/// The job `id` if the caller sees every group it targets, with `need` in each.
pub async fn get(state: &AppState, caller: &Caller, id: &str, need: Role) -> Result<JobRow> {
    let not_found = || ServiceError::not_found("Job", id);
    let job = jobs::get(&state.db, id).await?.ok_or_else(not_found)?;
    let groups = jobs::groups_of(&state.db, id).await?;
    access::groups(state, caller, &groups, need)
        .await
        .map_err(|e| match e {
            ServiceError::NotFound(_) => not_found(),
            other => other,
        })?;
    Ok(job)
}

/// Cancels a job: its pending executions become `cancelled`; in-progress ones end normally.
/// A manager of every group it targets (or an administrator).
pub async fn cancel(state: &AppState, caller: &Caller, id: &str) -> Result<JobRow> {
    get(state, caller, id, Role::Manager).await?;
    let job = jobs::cancel(&state.db, id, unix_now())
        .await?
        .ok_or_else(|| ServiceError::not_found("Job", id))?;
    state.jobs.wake.notify_one();
    Ok(job)
}
