//! A twin job's batch (docs/api.md, "Jobs"): one merge patch applied to many devices' desired
//! documents in one transaction, with each execution's awaited version recorded in it, instead
//! of a transaction (and a turn at SQLite's one writer) per device. A twin another change came
//! first to is done alone, as through the API.

use devicecloud_protocol::twin;
use devicecloud_store::events::NewEvent;
use devicecloud_store::jobs::runs;
use devicecloud_store::twins::{self, DesiredWrite};
use serde_json::{Map, Value};

use super::{Context, TwinError, change_desired, deliver, now, record};
use crate::event_types;

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
        let mut desired = Value::Object(twin::document(&row.desired));
        let before = desired.clone();
        twin::merge_patch(&mut desired, &patch_value);
        if desired == before {
            planned.push(Ok((row, None, true)));
            continue;
        }
        if let Some(why) = twin::document_error(&desired) {
            planned.push(Err(TwinError::Invalid(why)));
            continue;
        }
        let reported = twin::document(&row.reported);
        let in_sync = desired
            .as_object()
            .is_some_and(|d| twin::delta(d, &reported).is_empty());
        planned.push(Ok((row, Some(desired.to_string()), in_sync)));
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
            event: NewEvent {
                id_group: &row.id_group,
                source_device: &row.id_physical_device,
                from_device: Some(0),
                event_type: event_types::DESIRED_CHANGED,
                occurred_at: now,
                value: version,
                datatype: None,
                value_description: None,
            },
        })
        .collect();
    let written = twins::write_desired_many(&ctx.db, &ctx.routes.routes, id_job, &writes, now).await?;
    let mut outcomes = Vec::with_capacity(devices.len());
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
                ctx.stream.events(std::slice::from_ref(&write.event), &[id_event]);
                ctx.stream.twin(&row.id_group, write.id, &record(&row));
                deliver::desired(ctx, write.id).await;
                Ok(())
            }
            // Unchanged: it waits for the version it is at.
            Some((_, None)) => Ok(()),
            // Another change came first: done alone.
            None => alone(ctx, id_job, write.id, patch).await,
        });
    }
    Ok(outcomes)
}

/// One device's change as through the API, then the version its execution waits for.
async fn alone(ctx: &Context, id_job: &str, device: &str, patch: &Map<String, Value>) -> Result<(), TwinError> {
    let row = change_desired(ctx, device, patch, None).await?;
    runs::set_twin_version(&ctx.db, id_job, device, row.version).await?;
    Ok(())
}
