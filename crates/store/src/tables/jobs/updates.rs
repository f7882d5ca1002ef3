//! Firmware executions (docs/api.md, "Firmware: update"): an execution stays in progress after
//! its gateway accepted the `update` (its answer is kept as the execution's `result` meanwhile,
//! written with the runner's outcomes: `runs::end`) until the gateway's next `hello` says which
//! version it runs, or it reports the install failed (event 221), or the deadline passes.

use super::runs::{Ended, answered, count_in, tally};
use super::status;
use crate::database::Result;
use crate::database::db::{Db, Tx, values};
use crate::tables::events::NewEvent;
use crate::tables::webhooks::Routes;

/// A firmware execution in progress on a gateway, with what it installs.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Installing {
    pub id_job: String,
    pub device: String,
    /// The runner of its current attempt.
    pub runner: String,
    /// `platform` or `app`.
    pub component: String,
    pub version: String,
    /// 1 once the gateway accepted the `update`.
    pub accepted: i64,
    /// When its current attempt started (Unix seconds).
    pub started_at: Option<i64>,
}

impl Installing {
    /// The end of this execution with `status` and `result`.
    pub fn ended(&self, status: &'static str, result: String) -> Ended {
        Ended {
            id_job: self.id_job.clone(),
            device: self.device.clone(),
            runner: self.runner.clone(),
            status,
            result: Some(result),
        }
    }
}

/// The firmware executions in progress on `gateway` (one per job installing on it).
pub async fn installing(db: &Db, gateway: &str) -> Result<Vec<Installing>> {
    db.rows(
        concat!(
            "SELECT e.id_job, e.id_physical_device AS device, COALESCE(e.runner, '') AS runner, f.component, \
             f.version, ",
            answered!(),
            " AS accepted, e.started_at FROM job_executions e JOIN jobs j ON j.id_job = e.id_job \
             JOIN firmware f ON f.id_firmware = j.id_firmware \
             WHERE e.id_physical_device = $1 AND e.status = 'in_progress' AND j.kind = 'firmware'"
        ),
        values![gateway],
    )
    .await
}

/// One firmware job's execution on a device, as its history shows it.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Update {
    pub id_job: String,
    pub label: String,
    /// `platform` or `app`; null once the image was deleted.
    pub component: Option<String>,
    pub version: Option<String>,
    pub status: String,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// The gateway's answer, or how the update ended.
    pub result: Option<String>,
}

/// Ends firmware executions and records the events that tell of it (219, 220) in one
/// transaction, the events routed to their groups' webhooks; returns the events' ids.
pub async fn end(db: &Db, routes: &Routes, ended: &[Ended], events: &[NewEvent<'_>], now: i64) -> Result<Vec<i64>> {
    let table = routes.table(db).await?;
    let mut tx = Tx::begin_patient(db).await?;
    super::runs::end_in(&mut tx, ended, now).await?;
    let ids = if events.is_empty() {
        Vec::new()
    } else {
        crate::tables::events::write_in(&mut tx, &table, events, now).await?
    };
    tx.commit().await?;
    Ok(ids)
}

/// The firmware updates of `device`, newest job first, at most `limit`.
pub async fn history(db: &Db, device: &str, limit: i64) -> Result<Vec<Update>> {
    db.rows(
        "SELECT j.id_job, j.label, f.component, f.version, e.status, e.started_at, e.finished_at, e.result \
         FROM job_executions e JOIN jobs j ON j.id_job = e.id_job LEFT JOIN firmware f ON f.id_firmware = j.id_firmware \
         WHERE e.id_physical_device = $1 AND j.kind = 'firmware' ORDER BY j.created_at DESC, j.id_job DESC LIMIT $2",
        values![device, limit],
    )
    .await
}

/// The executions of `id_job` that did not succeed, counted by status and answer (for a
/// firmware job, the cause: a refusal, a rollback and the version, event 221's cause, no
/// hello in time), most frequent first.
pub async fn failures(db: &Db, id_job: &str) -> Result<Vec<(String, Option<String>, i64)>> {
    db.rows(
        "SELECT status, result, COUNT(*) AS n FROM job_executions WHERE id_job = $1 AND status IN ('failed', 'timed_out') \
         GROUP BY status, result ORDER BY n DESC, status, result LIMIT 50",
        values![id_job],
    )
    .await
}

/// Sends the `update` of `runs` again: firmware executions in progress whose gateway said hello
/// on the old version without having accepted the update (its command or its answer was lost,
/// as with a node that died while relaying it) become `pending`, so the runner sends it once
/// more at once; those sent twice already are left to their deadline. Returns how many.
pub async fn send_again(db: &Db, runs: &[Installing]) -> Result<usize> {
    if runs.is_empty() {
        return Ok(0);
    }
    let mut tx = Tx::begin_patient(db).await?;
    let mut moved: Vec<(String, [i64; 5])> = Vec::new();
    for run in runs {
        let n = tx
            .execute(
                "UPDATE job_executions SET status = 'pending', result = NULL WHERE id_job = $1 AND id_physical_device = $2 \
                 AND status = 'in_progress' AND COALESCE(runner, '') = $3 AND attempts < 2"
                    .to_string(),
                values![run.id_job.as_str(), run.device.as_str(), run.runner.as_str()],
            )
            .await?;
        if n == 1 {
            tally(&mut moved, &run.id_job, status::PENDING);
        }
    }
    let again = count_in(&mut tx, &moved).await?;
    tx.commit().await?;
    Ok(again)
}
