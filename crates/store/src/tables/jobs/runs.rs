//! What the job runner does to jobs and executions (docs/api.md, "Jobs"): claiming the jobs a
//! node runs (a lease, taken over once it ran out), starting executions, ending them, and the
//! job's own ends (expiry, abort, finish).
//!
//! Every execution ends exactly once: it ends only from `in_progress` and only under the
//! `runner` that started its current attempt, in the transaction that moves the job's counts.
//! A process that takes over an execution (a restart, another node) starts a new attempt under
//! its own runner name, so a late outcome of the old attempt changes nothing.

use sea_query::{Expr, ExprTrait, Query};

use super::{JobRow, SELECT, status};
use crate::database::Result;
use crate::database::db::{Db, Tx, values};
use crate::sql::lists::{ROWS_PER_STATEMENT, in_list};

/// The jobs `node` runs from now: those not finished whose lease is free, ran out, or is its
/// own; the leases of them all renewed until `until`. On SQLite one process serves the store, so
/// a lease of another node is that of a process that is gone (killed): taken at once.
pub async fn claim(db: &Db, node: &str, now: i64, until: i64) -> Result<Vec<JobRow>> {
    match db.backend() {
        crate::Backend::Sqlite => {
            let sql = "UPDATE jobs SET node_id = $1, lease_until = $2 WHERE finished_at IS NULL";
            db.execute(sql, values![node, until]).await?
        }
        crate::Backend::Postgres => {
            let sql = "UPDATE jobs SET node_id = $1, lease_until = $2 WHERE finished_at IS NULL \
                       AND (node_id IS NULL OR node_id = $1 OR lease_until < $3)";
            db.execute(sql, values![node, until, now]).await?
        }
    };
    let sql = format!("{SELECT} WHERE finished_at IS NULL AND node_id = $1 ORDER BY created_at, id_job");
    db.rows(sqlx::AssertSqlSafe(sql), values![node]).await
}

/// Gives up the leases of `node` (it stops): another node takes its jobs at once.
pub async fn release(db: &Db, node: &str) -> Result<()> {
    db.execute(
        "UPDATE jobs SET node_id = NULL, lease_until = NULL WHERE node_id = $1",
        values![node],
    )
    .await?;
    Ok(())
}

/// A pending execution whose gateway is connected: its turn may come.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Ready {
    pub device: String,
    pub gateway: String,
    /// The node holding the gateway's connection (PostgreSQL; on SQLite the one node).
    pub node: Option<String>,
    /// The gateway's module kind (`GO`, `CORE`, `PLUS`).
    pub kind: Option<String>,
    /// The group of the device (and its gateway).
    pub id_group: String,
    /// The gateway's versions as its last hello said (a firmware execution that finds the
    /// image's version installed succeeds at once).
    pub platform_software_version: Option<String>,
    pub app_software_version: Option<String>,
}

/// At most `limit` pending executions of `id_job` whose gateway is connected, in start order.
pub async fn ready(db: &Db, id_job: &str, limit: i64) -> Result<Vec<Ready>> {
    db.rows(
        "SELECT e.id_physical_device AS device, e.gateway, i.node_id AS node, d.kind, d.id_group, \
         d.platform_software_version, d.app_software_version FROM job_executions e \
         JOIN physical_devices d ON d.id_physical_device = e.gateway \
         LEFT JOIN iot_devices i ON i.id_physical_device = e.gateway \
         WHERE e.id_job = $1 AND e.status = 'pending' AND d.is_connected = 1 ORDER BY e.seq LIMIT $2",
        values![id_job, limit],
    )
    .await
}

/// Starts executions of `id_job`: those of `devices` still pending become `in_progress` under
/// `runner` with one attempt more and `deadline`; the job's counts and its start move with them,
/// in one transaction. Returns the devices started with their attempt numbers.
pub async fn start(
    db: &Db,
    id_job: &str,
    devices: &[String],
    runner: &str,
    now_ms: i64,
    deadline: i64,
) -> Result<Vec<(String, i64)>> {
    if devices.is_empty() {
        return Ok(Vec::new());
    }
    let now = now_ms / 1000;
    let mut update = Query::update();
    update
        .table("job_executions")
        .value("status", status::IN_PROGRESS)
        .value("attempts", Expr::col("attempts").add(1))
        .value("started_at", now)
        .value("deadline", deadline)
        .value("runner", runner)
        .and_where(Expr::col("id_job").eq(id_job))
        .and_where(Expr::col("status").eq(status::PENDING))
        .and_where(Expr::col("id_physical_device").is_in(devices.iter().map(String::as_str)))
        .returning(Query::returning().columns(["id_physical_device", "attempts"]));
    let (sql, values) = db.build(&update);
    let mut tx = Tx::begin_patient(db).await?;
    let started: Vec<(String, i64)> = tx.rows(sql, values).await?;
    let n = started.len() as i64;
    if n > 0 {
        tx.execute(
            "UPDATE jobs SET pending = pending - $1, in_progress = in_progress + $1, dispatched = dispatched + $1, \
             status = CASE WHEN status = 'queued' THEN 'in_progress' ELSE status END, \
             started_at = COALESCE(started_at, $2), started_ms = COALESCE(started_ms, $3) WHERE id_job = $4"
                .to_string(),
            values![n, now, now_ms, id_job],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(started)
}

/// An execution in progress as the runner found it.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Running {
    pub device: String,
    pub gateway: String,
    pub attempts: i64,
    /// The runner of its current attempt.
    pub runner: String,
    pub kind: Option<String>,
    pub id_group: String,
    /// 1 when the device answered this attempt while it is still in progress (a gateway that
    /// accepted a firmware `update`).
    pub answered: i64,
    pub platform_software_version: Option<String>,
    pub app_software_version: Option<String>,
}

impl Running {
    /// The execution, to start again (its node is looked up when its command is sent).
    pub fn ready(&self) -> Ready {
        Ready {
            device: self.device.clone(),
            gateway: self.gateway.clone(),
            node: None,
            kind: self.kind.clone(),
            id_group: self.id_group.clone(),
            platform_software_version: self.platform_software_version.clone(),
            app_software_version: self.app_software_version.clone(),
        }
    }
}

/// 1 when the device answered the attempt in progress of execution `e` (its `result` is set
/// while it goes on: a gateway that accepted an update), else 0; an integer on both stores.
macro_rules! answered {
    () => {
        "CAST(CASE WHEN e.result IS NULL THEN 0 ELSE 1 END AS BIGINT)"
    };
}
pub(super) use answered;

const RUNNING: &str = concat!(
    "SELECT e.id_physical_device AS device, e.gateway, e.attempts, COALESCE(e.runner, '') AS runner, \
     d.kind, d.id_group, ",
    answered!(),
    " AS answered, d.platform_software_version, d.app_software_version FROM job_executions e \
     JOIN physical_devices d ON d.id_physical_device = e.gateway"
);

/// In-progress executions of `id_job` started by another runner than `runner` (before a restart,
/// or on a node whose lease ran out): their outcome was not recorded.
pub async fn orphans(db: &Db, id_job: &str, runner: &str) -> Result<Vec<Running>> {
    let sql = format!(
        "{RUNNING} WHERE e.id_job = $1 AND e.status = 'in_progress' AND COALESCE(e.runner, '') <> $2 ORDER BY e.seq"
    );
    db.rows(sqlx::AssertSqlSafe(sql), values![id_job, runner]).await
}

/// In-progress executions of `id_job` whose deadline passed.
pub async fn overdue(db: &Db, id_job: &str, now: i64) -> Result<Vec<Running>> {
    let sql = format!("{RUNNING} WHERE e.id_job = $1 AND e.status = 'in_progress' AND e.deadline < $2");
    db.rows(sqlx::AssertSqlSafe(sql), values![id_job, now]).await
}

/// In-progress twin executions of `id_job` whose device reported at least the desired version
/// the job set.
pub async fn twins_applied(db: &Db, id_job: &str) -> Result<Vec<Running>> {
    let sql = format!(
        "{RUNNING} JOIN twins t ON t.id_physical_device = e.id_physical_device \
         WHERE e.id_job = $1 AND e.status = 'in_progress' AND e.twin_version IS NOT NULL \
         AND t.reported_version >= e.twin_version"
    );
    db.rows(sqlx::AssertSqlSafe(sql), values![id_job]).await
}

/// The twins of `devices` now say which desired version they applied (`reported_version`, as
/// written in the caller's transaction): their twin executions in progress that set at most that
/// version succeed, with their jobs' counts, in that transaction (one statement for them all,
/// and one per job); returns how many.
pub(crate) async fn end_applied_in(tx: &mut Tx, devices: &[&str], now: i64) -> sqlx::Result<usize> {
    let mut moved: Vec<(String, [i64; 5])> = Vec::new();
    for chunk in devices.chunks(ROWS_PER_STATEMENT) {
        let (marks, mut values) = in_list(chunk);
        values.0.0.push(now.into());
        let now_mark = chunk.len() + 1;
        let ended: Vec<(String,)> = tx
            .rows(
                format!(
                    "UPDATE job_executions SET status = 'succeeded', finished_at = ${now_mark}, result = NULL \
                     WHERE id_physical_device IN ({marks}) AND status = 'in_progress' AND twin_version IS NOT NULL \
                     AND twin_version <= (SELECT t.reported_version FROM twins t \
                     WHERE t.id_physical_device = job_executions.id_physical_device) RETURNING id_job"
                ),
                values,
            )
            .await?;
        for (id_job,) in ended {
            tally(&mut moved, &id_job, status::SUCCEEDED);
        }
    }
    count_in(tx, &moved).await
}

/// Takes over an orphaned execution under `runner`: a new attempt, with `deadline`. `false` when
/// it is no longer in progress under `from`.
pub async fn adopt(db: &Db, id_job: &str, running: &Running, runner: &str, now: i64, deadline: i64) -> Result<bool> {
    let n = db
        .execute(
            "UPDATE job_executions SET attempts = attempts + 1, runner = $1, started_at = $2, deadline = $3 \
             WHERE id_job = $4 AND id_physical_device = $5 AND status = 'in_progress' AND COALESCE(runner, '') = $6",
            values![
                runner,
                now,
                deadline,
                id_job,
                running.device.as_str(),
                running.runner.as_str()
            ],
        )
        .await?;
    Ok(n == 1)
}

/// Records the desired version a twin execution set.
pub async fn set_twin_version(db: &Db, id_job: &str, device: &str, version: i64) -> Result<()> {
    db.execute(
        "UPDATE job_executions SET twin_version = $1 WHERE id_job = $2 AND id_physical_device = $3",
        values![version, id_job, device],
    )
    .await?;
    Ok(())
}

/// The end of one execution's attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct Ended {
    pub id_job: String,
    pub device: String,
    /// The runner of the attempt that ends.
    pub runner: String,
    /// `succeeded`, `failed` or `timed_out`; or `pending` for an attempt that never reached the
    /// device (its gateway went away before the request was published): its turn comes again;
    /// or `in_progress` for the device's answer to an attempt that goes on (a gateway that
    /// accepted a firmware update): only `result` is recorded.
    pub status: &'static str,
    /// The device's `{status, payload}` as JSON text.
    pub result: Option<String>,
}

/// Ends executions, each only if still in progress under its attempt's runner, with the counts
/// of their jobs, in one transaction; returns how many ended.
pub async fn end(db: &Db, ended: &[Ended], now: i64) -> Result<usize> {
    if ended.is_empty() {
        return Ok(0);
    }
    let mut tx = Tx::begin_patient(db).await?;
    let total = end_in(&mut tx, ended, now).await?;
    tx.commit().await?;
    Ok(total)
}

/// [`end`] in a transaction of the caller's.
pub(crate) async fn end_in(tx: &mut Tx, ended: &[Ended], now: i64) -> sqlx::Result<usize> {
    // Per job: (in progress, succeeded, failed, timed out, pending again) moved.
    let mut moved: Vec<(String, [i64; 5])> = Vec::new();
    for e in ended {
        if e.status == status::IN_PROGRESS {
            // The device's answer while the execution goes on (an accepted update).
            tx.execute(
                "UPDATE job_executions SET result = $1 WHERE id_job = $2 AND id_physical_device = $3 \
                 AND status = 'in_progress' AND COALESCE(runner, '') = $4"
                    .to_string(),
                values![
                    e.result.as_deref(),
                    e.id_job.as_str(),
                    e.device.as_str(),
                    e.runner.as_str()
                ],
            )
            .await?;
            continue;
        }
        // An attempt that never reached the device is not counted as one.
        let (finished_at, unsent) = match e.status {
            status::PENDING => (None, 1),
            _ => (Some(now), 0),
        };
        let n = tx
            .execute(
                "UPDATE job_executions SET status = $1, finished_at = $2, result = $3, attempts = attempts - $7 \
                 WHERE id_job = $4 AND id_physical_device = $5 AND status = 'in_progress' AND COALESCE(runner, '') = $6"
                    .to_string(),
                values![
                    e.status,
                    finished_at,
                    e.result.as_deref(),
                    e.id_job.as_str(),
                    e.device.as_str(),
                    e.runner.as_str(),
                    unsent
                ],
            )
            .await?;
        if n == 0 {
            continue;
        }
        tally(&mut moved, &e.id_job, e.status);
    }
    count_in(tx, &moved).await
}

/// Counts one execution of `id_job` that left `in_progress` for `to` in `moved`: per job,
/// (in progress, succeeded, failed, timed out, pending again).
pub(super) fn tally(moved: &mut Vec<(String, [i64; 5])>, id_job: &str, to: &str) {
    let at = match moved.iter().position(|(job, _)| job == id_job) {
        Some(at) => at,
        None => {
            moved.push((id_job.to_string(), [0; 5]));
            moved.len() - 1
        }
    };
    let counts = &mut moved[at].1;
    counts[0] += 1;
    match to {
        status::SUCCEEDED => counts[1] += 1,
        status::TIMED_OUT => counts[3] += 1,
        status::PENDING => counts[4] += 1,
        _ => counts[2] += 1,
    }
}

/// Moves the counts of jobs whose executions ended: per job, (in progress, succeeded, failed,
/// timed out, pending again) by how many moved; returns how many ended in all.
pub(super) async fn count_in(tx: &mut Tx, moved: &[(String, [i64; 5])]) -> sqlx::Result<usize> {
    let mut total = 0;
    for (job, [done, succeeded, failed, timed_out, again]) in moved {
        tx.execute(
            "UPDATE jobs SET in_progress = in_progress - $1, succeeded = succeeded + $2, failed = failed + $3, \
             timed_out = timed_out + $4, pending = pending + $5, dispatched = dispatched - $5 WHERE id_job = $6"
                .to_string(),
            values![*done, *succeeded, *failed, *timed_out, *again, job.as_str()],
        )
        .await?;
        total += *done as usize;
    }
    Ok(total)
}

/// Ends a job's pending executions as `to` (`timed_out` when the job expired, `cancelled` when
/// it aborted) and sets the job's status to `job_status`, in one transaction; returns how many.
async fn close_pending(db: &Db, id_job: &str, to: &str, job_status: &str, now: i64) -> Result<i64> {
    let counter = if to == status::TIMED_OUT {
        "timed_out"
    } else {
        "cancelled"
    };
    let mut tx = Tx::begin(db).await?;
    let n = tx
        .execute(
            "UPDATE job_executions SET status = $1, finished_at = $2 WHERE id_job = $3 AND status = 'pending'"
                .to_string(),
            values![to, now, id_job],
        )
        .await? as i64;
    tx.execute(
        format!(
            "UPDATE jobs SET pending = pending - $1, {counter} = {counter} + $1, status = $2 \
             WHERE id_job = $3 AND status IN ('queued', 'in_progress')"
        ),
        values![n, job_status, id_job],
    )
    .await?;
    tx.commit().await?;
    Ok(n)
}

/// A group was deleted: the pending executions of its devices, in every job, are cancelled
/// (with their jobs' counts), in one transaction; returns how many.
pub async fn cancel_group(db: &Db, id_group: &str, now: i64) -> Result<i64> {
    let mut tx = Tx::begin(db).await?;
    let per_job: Vec<(String, i64)> = tx
        .rows(
            "SELECT e.id_job, COUNT(*) FROM job_executions e \
             JOIN physical_devices d ON d.id_physical_device = e.id_physical_device \
             WHERE d.id_group = $1 AND e.status = 'pending' GROUP BY e.id_job"
                .to_string(),
            values![id_group],
        )
        .await?;
    let mut total = 0;
    for (id_job, n) in &per_job {
        tx.execute(
            "UPDATE job_executions SET status = 'cancelled', finished_at = $1 WHERE id_job = $2 \
             AND status = 'pending' AND id_physical_device IN \
             (SELECT id_physical_device FROM physical_devices WHERE id_group = $3)"
                .to_string(),
            values![now, id_job.as_str(), id_group],
        )
        .await?;
        tx.execute(
            "UPDATE jobs SET pending = pending - $1, cancelled = cancelled + $1 WHERE id_job = $2".to_string(),
            values![*n, id_job.as_str()],
        )
        .await?;
        total += n;
    }
    tx.commit().await?;
    Ok(total)
}

/// The job expired: its pending executions time out and it is `expired`.
pub async fn expire(db: &Db, id_job: &str, now: i64) -> Result<i64> {
    close_pending(db, id_job, status::TIMED_OUT, status::EXPIRED, now).await
}

/// Too many executions failed: the pending ones are cancelled and the job is `aborted`.
pub async fn abort(db: &Db, id_job: &str, now: i64) -> Result<i64> {
    close_pending(db, id_job, status::CANCELLED, status::ABORTED, now).await
}

/// Ends a job whose every execution ended: `succeeded` when all succeeded, `failed` otherwise (a
/// job aborted, cancelled or expired keeps that status); returns it when it ended now.
pub async fn finish(db: &Db, id_job: &str, now: i64) -> Result<Option<JobRow>> {
    let n = db
        .execute(
            "UPDATE jobs SET finished_at = $1, status = CASE WHEN status IN ('queued', 'in_progress') \
             THEN CASE WHEN succeeded = total THEN 'succeeded' ELSE 'failed' END ELSE status END \
             WHERE id_job = $2 AND pending = 0 AND in_progress = 0 AND finished_at IS NULL",
            values![now, id_job],
        )
        .await?;
    if n == 0 {
        return Ok(None);
    }
    super::get(db, id_job).await
}
