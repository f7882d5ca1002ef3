//! A twin job's batch (docs/api.md, "Jobs"): one merge patch applied to many devices' desired
//! documents in one transaction, with each execution's awaited version recorded in it, instead
//! of a transaction (and a turn at SQLite's one writer) per device. A twin another change came
//! first to is done alone, as through the API.

use devicecloud_store::jobs::runs;
use devicecloud_store::twins::{self, DesiredWrite};
use serde_json::{Map, Value};

use super::{Context, TwinError, change_desired, deliver, desired_after, desired_event, now, show};

/// Applies `patch` to the desired documents of `devices` for job `id_job`; for each device, in
/// order, whether its execution now waits for its report (`Ok`) or why not. `Err` when the
/// batch could not be written at all (nothing of it was).
pub async fn change_desired_for_job(
    ctx: &Context,
    id_job: &str,
    devices: &[String],
    patch: &Map<String, Value>,
) -> Result<Vec<Result<(), TwinError>>, devicecloud_store::StoreError> {
    let patch_value = Value::Object(patch.clone());
    let rows = twins::get_many(&ctx.db, devices).await?;
    // Each device's row and new document (`None`: unchanged), or why not.
    let mut planned = Vec::with_capacity(devices.len());
    for device in devices {
        let Some(row) = rows.iter().find(|r| r.id_physical_device == *device) else {
            planned.push(Err(TwinError::NotFound));
            continue;
        };
        planned.push(desired_after(row, &patch_value).map(|after| match after {
            None => (row, None, true),
            Some((document, in_sync)) => (row, Some(document), in_sync),
        }));
    }
    let now = now();
    let versions: Vec<String> = planned
        .iter()
        .map(|p| {
            p.as_ref()
                .map_or(String::new(), |(row, _, _)| (row.version + 1).to_string())
        })
        .collect();
    let writes: Vec<DesiredWrite> = planned
        .iter()
        .zip(&versions)
        .filter_map(|(p, version)| p.as_ref().ok().map(|plan| (plan, version)))
        .map(|((row, document, in_sync), version)| DesiredWrite {
            id: &row.id_physical_device,
            revision: row.revision,
            version: row.version,
            document: document.as_deref(),
            in_sync: *in_sync,
            event: desired_event(row, version, now),
        })
        .collect();
    let written = twins::write_desired_many(&ctx.db, &ctx.routes.routes, id_job, &writes, now).await?;
    let mut outcomes = Vec::with_capacity(devices.len());
    let mut changed: Vec<&str> = Vec::new();
    let mut written = writes.iter().zip(written);
    for plan in &planned {
        if let Err(e) = plan {
            outcomes.push(Err(match e {
                TwinError::Invalid(why) => TwinError::Invalid(why.clone()),
                _ => TwinError::NotFound,
            }));
            continue;
        }
        let Some((write, result)) = written.next() else {
            outcomes.push(Err(TwinError::Busy));
            continue;
        };
        outcomes.push(match result {
            Some((row, Some(id_event))) => {
                show(ctx, &write.event, id_event, &row);
                changed.push(write.id);
                Ok(())
            }
            // Unchanged: it waits for the version it is at.
            Some((_, None)) => Ok(()),
            // Another change came first: done alone.
            None => alone(ctx, id_job, write.id, patch).await,
        });
    }
    deliver::desired_many(ctx, &changed).await;
    Ok(outcomes)
}

/// One device's change as through the API, then the version its execution waits for.
async fn alone(ctx: &Context, id_job: &str, device: &str, patch: &Map<String, Value>) -> Result<(), TwinError> {
    let row = change_desired(ctx, device, patch, None).await?;
    runs::set_twin_version(&ctx.db, id_job, device, row.version).await?;
    Ok(())
}
