//! Jobs (docs/api.md, "Jobs"): an operation over the devices a target resolved to at creation,
//! one execution per device, and the counts of the executions by status kept on the job row.
//!
//! This module holds the records clients create, read and cancel, and their collections; what
//! the job runner does to executions (start, end, take over) is in [`runs`]. A job is visible to
//! whoever sees every group it targets (`job_groups`).

pub mod runs;
pub mod updates;

use devicecloud_query::{AttrKind, Attribute, SortKey};
use sea_query::{Condition, Expr, ExprTrait, Query};

use crate::collection::{Column, ListArgs, Listing, Table, attributes, names, same_name};
use crate::database::Result;
use crate::database::db::{Db, Tx, values};
use crate::sql::scope::{GroupScope, visible_groups};

/// A stored job.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct JobRow {
    pub id_job: String,
    pub label: String,
    /// `command`, `twin` or `firmware`.
    pub kind: String,
    /// The operation as given, JSON text.
    pub operation: String,
    /// The target as given, JSON text.
    pub target: String,
    pub status: String,
    pub total: i64,
    pub pending: i64,
    pub in_progress: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub timed_out: i64,
    pub cancelled: i64,
    pub created_at: i64,
    pub created_by: Option<String>,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub rate_per_minute: i64,
    pub max_failures_percent: i64,
    pub timeout_s: i64,
    pub expires_at: i64,
    /// Executions started so far (the pacing).
    pub dispatched: i64,
    /// When the first execution started, in milliseconds (the pacing).
    pub started_ms: Option<i64>,
}

/// Job statuses (docs/api.md, "Jobs").
pub mod status {
    pub const QUEUED: &str = "queued";
    pub const IN_PROGRESS: &str = "in_progress";
    pub const SUCCEEDED: &str = "succeeded";
    pub const FAILED: &str = "failed";
    pub const ABORTED: &str = "aborted";
    pub const CANCELLED: &str = "cancelled";
    pub const EXPIRED: &str = "expired";
    /// Execution statuses beside `in_progress`, `succeeded`, `failed` and `cancelled`.
    pub const PENDING: &str = "pending";
    pub const TIMED_OUT: &str = "timed_out";
}

/// A stored execution, as the API shows it.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct ExecutionRow {
    pub id_physical_device: String,
    pub status: String,
    pub attempts: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// The device's `{status, payload}`, JSON text; null when it gave none.
    pub result: Option<String>,
}

/// A device a new job targets, with the gateway whose connection carries its execution.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub device: String,
    pub gateway: String,
    pub id_group: String,
}

/// Fields of a new job.
#[derive(Clone, Debug)]
pub struct NewJob<'a> {
    pub label: &'a str,
    pub kind: &'a str,
    pub operation: &'a str,
    pub target: &'a str,
    pub created_by: &'a str,
    pub rate_per_minute: i64,
    pub max_failures_percent: i64,
    pub timeout_s: i64,
    pub expires_at: i64,
    /// The devices, in the order their executions start.
    pub devices: &'a [Target],
    /// The image a firmware job installs.
    pub id_firmware: Option<&'a str>,
}

const TABLE: &str = "jobs";
const SELECT: &str = "SELECT id_job, label, kind, operation, target, status, total, pending, in_progress, succeeded, \
                      failed, timed_out, cancelled, created_at, created_by, started_at, finished_at, \
                      rate_per_minute, max_failures_percent, timeout_s, expires_at, dispatched, started_ms FROM jobs";

/// The filterable and sortable attributes of the job collection.
pub const COLUMNS: [Column; 18] = [
    same_name(TABLE, "id_job", AttrKind::String),
    same_name(TABLE, "label", AttrKind::String),
    same_name(TABLE, "status", AttrKind::String),
    same_name(TABLE, "total", AttrKind::Integer),
    same_name(TABLE, "pending", AttrKind::Integer),
    same_name(TABLE, "in_progress", AttrKind::Integer),
    same_name(TABLE, "succeeded", AttrKind::Integer),
    same_name(TABLE, "failed", AttrKind::Integer),
    same_name(TABLE, "timed_out", AttrKind::Integer),
    same_name(TABLE, "cancelled", AttrKind::Integer),
    same_name(TABLE, "created_at", AttrKind::Integer),
    same_name(TABLE, "created_by", AttrKind::String),
    same_name(TABLE, "started_at", AttrKind::Integer),
    same_name(TABLE, "finished_at", AttrKind::Integer),
    same_name(TABLE, "rate_per_minute", AttrKind::Integer),
    same_name(TABLE, "max_failures_percent", AttrKind::Integer),
    same_name(TABLE, "timeout_s", AttrKind::Integer),
    same_name(TABLE, "expires_at", AttrKind::Integer),
];
/// The filter attributes of the job collection.
pub const ATTRIBUTES: [Attribute; 18] = attributes(&COLUMNS);
/// The sortable attributes of the job collection.
pub const SORTABLE: [&str; 18] = names(&COLUMNS);

/// The jobs, newest first.
static JOBS: Table<JobRow> = Table::new(TABLE, &COLUMNS, &[], SortKey::desc("created_at"), &[COLUMNS[0]]);

const EXECUTIONS: &str = "job_executions";

/// The filterable and sortable attributes of a job's executions.
pub const EXECUTION_COLUMNS: [Column; 5] = [
    same_name(EXECUTIONS, "id_physical_device", AttrKind::String),
    same_name(EXECUTIONS, "status", AttrKind::String),
    same_name(EXECUTIONS, "attempts", AttrKind::Integer),
    same_name(EXECUTIONS, "started_at", AttrKind::Integer),
    same_name(EXECUTIONS, "finished_at", AttrKind::Integer),
];
/// The filter attributes of a job's executions.
pub const EXECUTION_ATTRIBUTES: [Attribute; 5] = attributes(&EXECUTION_COLUMNS);
/// The sortable attributes of a job's executions.
pub const EXECUTION_SORTABLE: [&str; 5] = names(&EXECUTION_COLUMNS);

/// A job's executions, by device.
static JOB_EXECUTIONS: Table<ExecutionRow> = Table::new(
    EXECUTIONS,
    &EXECUTION_COLUMNS,
    &[],
    SortKey::asc("id_physical_device"),
    &[EXECUTION_COLUMNS[0]],
);

/// Executions written per statement when a job is created.
const INSERT_ROWS: usize = crate::sql::lists::ROWS_PER_STATEMENT;

/// Creates a job with one pending execution per device, all in one transaction; returns it, or
/// `None` when the firmware image it installs is gone. The image's row is held (PostgreSQL:
/// `FOR SHARE`) until the job is written, so that a deletion either comes first or sees the job.
pub async fn create(db: &Db, job: &NewJob<'_>, now: i64) -> Result<Option<JobRow>> {
    let id = crate::new_id();
    let total = job.devices.len() as i64;
    let mut tx = Tx::begin(db).await?;
    if let Some(id_firmware) = job.id_firmware {
        let lock = db.row_lock(" FOR SHARE");
        let image: Vec<(String,)> = tx
            .rows(
                format!("SELECT id_firmware FROM firmware WHERE id_firmware = $1{lock}"),
                values![id_firmware],
            )
            .await?;
        if image.is_empty() {
            tx.rollback().await?;
            return Ok(None);
        }
    }
    tx.execute(
        "INSERT INTO jobs (id_job, label, kind, operation, target, status, total, pending, created_at, created_by, \
         rate_per_minute, max_failures_percent, timeout_s, expires_at, id_firmware) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9, $10, $11, $12, $13, $14)"
            .to_string(),
        values![
            id.as_str(),
            job.label,
            job.kind,
            job.operation,
            job.target,
            status::QUEUED,
            total,
            now,
            job.created_by,
            job.rate_per_minute,
            job.max_failures_percent,
            job.timeout_s,
            job.expires_at,
            job.id_firmware
        ],
    )
    .await?;
    let mut groups: Vec<&str> = job.devices.iter().map(|d| d.id_group.as_str()).collect();
    groups.sort_unstable();
    groups.dedup();
    for group in groups {
        tx.execute(
            "INSERT INTO job_groups (id_job, id_group) VALUES ($1, $2)".to_string(),
            values![id.as_str(), group],
        )
        .await?;
    }
    for (chunk_at, chunk) in job.devices.chunks(INSERT_ROWS).enumerate() {
        let mut insert = Query::insert();
        insert
            .into_table(EXECUTIONS)
            .columns(["id_job", "id_physical_device", "seq", "gateway", "status"]);
        for (i, target) in chunk.iter().enumerate() {
            let seq = (chunk_at * INSERT_ROWS + i) as i64;
            insert.values_panic([
                id.as_str().into(),
                target.device.as_str().into(),
                seq.into(),
                target.gateway.as_str().into(),
                status::PENDING.into(),
            ]);
        }
        let (sql, values) = db.build(&insert);
        tx.execute(sql, values).await?;
    }
    let rows: Vec<JobRow> = tx
        .rows(format!("{SELECT} WHERE id_job = $1"), values![id.as_str()])
        .await?;
    tx.commit().await?;
    rows.into_iter()
        .next()
        .map(Some)
        .ok_or_else(|| crate::StoreError::Timeout("the new job was not read back".into()))
}

/// One job; visibility is the caller's business ([`groups_of`]).
pub async fn get(db: &Db, id_job: &str) -> Result<Option<JobRow>> {
    let sql = format!("{SELECT} WHERE id_job = $1");
    db.row(sqlx::AssertSqlSafe(sql), values![id_job]).await
}

/// The groups a job targets.
pub async fn groups_of(db: &Db, id_job: &str) -> Result<Vec<String>> {
    let rows: Vec<(String,)> = db
        .rows(
            "SELECT id_group FROM job_groups WHERE id_job = $1 ORDER BY id_group",
            values![id_job],
        )
        .await?;
    Ok(rows.into_iter().map(|(g,)| g).collect())
}

/// A page of the jobs `args` allows: for a normal user, those whose every group they see.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<JobRow>> {
    let mut select = JOBS.select();
    if let GroupScope::MemberOf(id_user) = args.scope {
        let hidden = Query::select()
            .expr(Expr::val(1))
            .from("job_groups")
            .and_where(Expr::col(("job_groups", "id_job")).equals((TABLE, "id_job")))
            .and_where(Expr::col(("job_groups", "id_group")).not_in_subquery(visible_groups(id_user)))
            .to_owned();
        select.cond_where(Condition::all().add(Expr::exists(hidden).not()));
    }
    JOBS.list(db, select, &args).await
}

/// A page of the executions of job `id_job` (whose visibility the caller checked).
pub async fn executions(db: &Db, id_job: &str, args: ListArgs<'_>) -> Result<Listing<ExecutionRow>> {
    let mut select = JOB_EXECUTIONS.select();
    select.cond_where(Condition::all().add(Expr::col((EXECUTIONS, "id_job")).eq(id_job)));
    JOB_EXECUTIONS.list(db, select, &args).await
}

/// Cancels a job that has not ended: its pending executions become `cancelled` (in-progress
/// ones end normally), in one transaction; returns the job as it is then, or `None` when it
/// does not exist. A job already ended is left as it is.
pub async fn cancel(db: &Db, id_job: &str, now: i64) -> Result<Option<JobRow>> {
    let mut tx = Tx::begin(db).await?;
    let open: Vec<(String,)> = tx
        .rows(
            "SELECT status FROM jobs WHERE id_job = $1 AND status IN ('queued', 'in_progress')".to_string(),
            values![id_job],
        )
        .await?;
    if !open.is_empty() {
        let cancelled = tx
            .execute(
                "UPDATE job_executions SET status = 'cancelled', finished_at = $1 \
                 WHERE id_job = $2 AND status = 'pending'"
                    .to_string(),
                values![now, id_job],
            )
            .await? as i64;
        tx.execute(
            "UPDATE jobs SET status = 'cancelled', pending = pending - $1, cancelled = cancelled + $1, \
             finished_at = CASE WHEN in_progress = 0 THEN $2 ELSE finished_at END WHERE id_job = $3"
                .to_string(),
            values![cancelled, now, id_job],
        )
        .await?;
    }
    let rows: Vec<JobRow> = tx.rows(format!("{SELECT} WHERE id_job = $1"), values![id_job]).await?;
    tx.commit().await?;
    Ok(rows.into_iter().next())
}
