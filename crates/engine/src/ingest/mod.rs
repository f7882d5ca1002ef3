//! The ingest queues and their writers: accept fast, write in groups (architecture: group
//! commit). Connections submit jobs into a bounded queue and wait for the commit before they
//! acknowledge; a full queue makes them wait, which stops them reading their sockets (TCP
//! back-pressure) instead of dropping or buffering without bound.
//!
//! There is one queue and writer per lane (`ingest_writers`). A gateway's jobs always go to the
//! same lane, so they commit in the order it sent them, and two lanes never write the same
//! series, rollup or device row (they belong to one gateway), so lanes never wait for each
//! other's row locks. One lane suits SQLite, which writes one transaction at a time anyway; on
//! PostgreSQL each lane is a backend process of its own, and one backend was the limit
//! (docs/benchmarks.md, "Ingest").

use std::time::Duration;

use devicecloud_store::Db;
use devicecloud_store::ingest::{self, Batch, Point, Routed};
use std::sync::Arc;

use crate::alarms::Alarms;
use crate::metrics::{Failed, Outcome};
use crate::stream::LiveFeed;
use crate::webhooks::WebhookHub;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Jobs the queue holds before submitters wait.
const QUEUE_JOBS: usize = 4096;
/// Points of one slice of a group commit, at most (a job is never split): the longest another
/// writer of SQLite waits for the ingest writer, which ends its transaction after the slice in
/// progress when someone waits (`ingest::write_slices`).
pub const SLICE_POINTS: usize = 10_000;
/// How long the writer waits for more jobs when a batch is small, trading a little latency
/// for fewer, larger transactions.
pub const LINGER: Duration = Duration::from_millis(10);

/// Why a job was not stored.
#[derive(Clone, Debug, thiserror::Error)]
pub enum IngestError {
    /// The service is stopping and the writer is gone.
    #[error("the ingest writer has stopped")]
    Stopped,
    /// The store refused the write (logged with details).
    #[error("the store could not take the data")]
    Store,
    /// The writer failed to handle the job (a task of it panicked; logged).
    #[error("the ingest writer failed")]
    Internal,
}

impl IngestError {
    /// Why a job that ended with this error failed (its outcome: [`Outcome::Failed`]).
    pub fn failure(&self) -> Failed {
        match self {
            IngestError::Stopped => Failed::Stopped,
            IngestError::Store => Failed::Store,
            IngestError::Internal => Failed::Internal,
        }
    }
}

/// One submitter's points (one measurements message), acknowledged after the commit that
/// contains them. A job ends exactly once, through [`Job::end`]: its message is counted then
/// (stored or failed, and the points of a failed one; the points of a stored one are counted
/// with their batch, stored or duplicate) and its submitter answered. A job dropped before
/// (with a task of the writer that failed) ends failed (`internal`) on drop.
struct Job {
    points: Vec<Point>,
    devices: Vec<(String, i64)>,
    /// How many points the job brought (`points` is moved out into a batch of its own when a
    /// group commit fails).
    count: usize,
    /// `None` once ended.
    done: Option<oneshot::Sender<Result<(), IngestError>>>,
}

impl Job {
    fn new(points: Vec<Point>, devices: Vec<(String, i64)>, done: oneshot::Sender<Result<(), IngestError>>) -> Job {
        Job {
            count: points.len(),
            points,
            devices,
            done: Some(done),
        }
    }

    /// Counts the job's outcome and answers its submitter; only the first call does anything.
    fn end(&mut self, result: Result<(), IngestError>) {
        let Some(done) = self.done.take() else {
            return;
        };
        match &result {
            Ok(()) => Outcome::Stored.message(),
            Err(e) => {
                Outcome::Failed(e.failure()).message();
                Outcome::Failed(e.failure()).points(self.count);
            }
        }
        let _ = done.send(result);
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if self.done.is_some() {
            tracing::error!(points = self.count, "ingest job dropped before its commit ended");
            self.end(Err(IngestError::Internal));
        }
    }
}

/// Ingest writers unless set (`ingest_writers`): one on SQLite, whose one write lock serves one
/// transaction at a time; on PostgreSQL, where each writer's backend process takes a core of
/// its own, as many as measured best on two cores (docs/benchmarks.md, "Ingest").
pub fn default_lanes(backend: devicecloud_store::Backend) -> usize {
    match backend {
        devicecloud_store::Backend::Sqlite => 1,
        devicecloud_store::Backend::Postgres => 2,
    }
}

/// How the writers are set up: how many lanes and how large a group commit may grow.
#[derive(Clone, Copy, Debug)]
pub struct Writers {
    /// Queues and writers, each on a connection of its own (at least one).
    pub lanes: usize,
    /// Points one group commit takes at most (`ingest_batch_points`).
    pub batch_points: usize,
}

/// The submitting side of the queues; cheap to clone.
#[derive(Clone, Debug)]
pub struct IngestQueue {
    lanes: Arc<[mpsc::Sender<Job>]>,
}

impl IngestQueue {
    /// Starts the writers on `tracker`. On shutdown each stops taking jobs only once its queue is
    /// empty, so every job accepted before is committed and answered. What each commit stored
    /// is handed to the live stream and the alarm rules after the commit.
    pub fn start(
        db: Db,
        writers: Writers,
        sinks: Sinks,
        tracker: &TaskTracker,
        shutdown: CancellationToken,
    ) -> IngestQueue {
        let count = writers.lanes.max(1);
        let sinks = Arc::new(sinks);
        let lanes = (0..count)
            .map(|_| {
                let (tx, rx) = mpsc::channel(QUEUE_JOBS.div_ceil(count));
                let db = if count > 1 { db.dedicated() } else { db.clone() };
                let batch_points = writers.batch_points.max(1);
                tracker.spawn(writer(db, batch_points, Arc::clone(&sinks), rx, shutdown.clone()));
                tx
            })
            .collect();
        IngestQueue { lanes }
    }

    /// Queues points (and the devices whose `last_data_at` moves) of `submitter` (a gateway's
    /// id) without waiting for their commit; waits only while its lane's queue is full. The
    /// receipt resolves once they are durably committed (resent points count as committed:
    /// they were stored before). A submitter's jobs all go to one lane and are committed in
    /// the order they were queued, so its receipts resolve in that order too.
    pub async fn enqueue(
        &self,
        submitter: &str,
        points: Vec<Point>,
        devices: Vec<(String, i64)>,
    ) -> Result<Receipt, IngestError> {
        let (done, answer) = oneshot::channel();
        let lane = &self.lanes[lane_of(submitter, self.lanes.len())];
        if let Err(mpsc::error::SendError(mut job)) = lane.send(Job::new(points, devices, done)).await {
            job.end(Err(IngestError::Stopped));
            return Err(IngestError::Stopped);
        }
        Ok(Receipt(answer))
    }
}

/// The lane of a submitter: the same one for as long as the process runs.
fn lane_of(submitter: &str, lanes: usize) -> usize {
    use std::hash::{Hash, Hasher};
    if lanes <= 1 {
        return 0;
    }
    let mut hasher = std::hash::DefaultHasher::new();
    submitter.hash(&mut hasher);
    (hasher.finish() % lanes as u64) as usize
}

/// A queued job, as a future that resolves once its points are committed (or failed to be).
#[derive(Debug)]
pub struct Receipt(oneshot::Receiver<Result<(), IngestError>>);

impl std::future::Future for Receipt {
    type Output = Result<(), IngestError>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0)
            .poll(cx)
            .map(|answer| answer.map_err(|_| IngestError::Stopped)?)
    }
}

/// Takes jobs in groups and commits each group in one transaction. The next group is gathered
/// while the previous one commits and, when it fills up before that commit ends (under load),
/// also prepared meanwhile (sorted, its statements built: [`Batch`]), so the database is not
/// left waiting for that work; commits still run one after another, in queue order.
async fn writer(
    db: Db,
    batch_points: usize,
    sinks: Arc<Sinks>,
    mut rx: mpsc::Receiver<Job>,
    shutdown: CancellationToken,
) {
    let mut committing: Option<JoinHandle<()>> = None;
    while let Some(jobs) = gather(&mut rx, batch_points, &mut committing, &shutdown).await {
        let backend = db.backend();
        let prepared = tokio::task::spawn_blocking(move || (slices(&jobs, backend), jobs)).await;
        // A failed preparation (a panic) drops its jobs with the task: each ends failed
        // (`internal`) as it is dropped, and its submitter does not acknowledge.
        let (slices, jobs) = match prepared {
            Ok(prepared) => prepared,
            Err(e) => {
                tracing::error!(error = %e, "ingest batch preparation failed");
                continue;
            }
        };
        if let Some(previous) = committing.take() {
            finished(previous.await);
        }
        let (db, sinks) = (db.clone(), Arc::clone(&sinks));
        committing = Some(tokio::spawn(async move { commit(&db, &sinks, slices, jobs).await }));
    }
    if let Some(last) = committing {
        finished(last.await);
    }
    tracing::debug!("ingest writer stopped");
}

/// The jobs' points in slices of about [`SLICE_POINTS`], each prepared for one write (sorted,
/// its statements built: [`Batch`]); a job is never split.
fn slices(jobs: &[Job], backend: devicecloud_store::Backend) -> Vec<Batch> {
    let mut slices = Vec::new();
    let mut start = 0;
    while start < jobs.len() {
        let mut end = start;
        let mut points = 0;
        while end < jobs.len() && (end == start || points + jobs[end].points.len() <= SLICE_POINTS) {
            points += jobs[end].points.len();
            end += 1;
        }
        let part = &jobs[start..end];
        let points = part.iter().flat_map(|j| j.points.iter().copied()).collect();
        let devices = part.iter().flat_map(|j| j.devices.iter().cloned()).collect();
        slices.push(Batch::new(points, devices, backend));
        start = end;
    }
    slices
}

/// Logs a commit task that did not end normally (its jobs, dropped with it, ended failed:
/// `internal`).
fn finished(commit: Result<(), tokio::task::JoinError>) {
    if let Err(e) = commit {
        tracing::error!(error = %e, "ingest commit task failed");
    }
}

/// The next group of jobs: jobs are taken until they bring `batch_points` points, taken until the queue is empty,
/// waiting up to [`LINGER`] for more once it is, and never less than while the previous group
/// is still committing (nothing could be written sooner). `None` once the queue is closed and
/// empty (after shutdown, the queue is drained first).
async fn gather(
    rx: &mut mpsc::Receiver<Job>,
    batch_points: usize,
    committing: &mut Option<JoinHandle<()>>,
    shutdown: &CancellationToken,
) -> Option<Vec<Job>> {
    let first = tokio::select! {
        job = rx.recv() => job,
        _ = shutdown.cancelled() => {
            // Stop accepting, then drain what is queued.
            rx.close();
            rx.recv().await
        }
    }?;
    let mut points = first.points.len();
    let mut jobs = vec![first];
    let deadline = tokio::time::Instant::now() + LINGER;
    while points < batch_points {
        let job = match rx.try_recv() {
            Ok(job) => job,
            Err(mpsc::error::TryRecvError::Disconnected) => break,
            Err(mpsc::error::TryRecvError::Empty) => match committing {
                Some(previous) if !previous.is_finished() => {
                    tokio::select! {
                        job = rx.recv() => match job {
                            Some(job) => job,
                            None => break,
                        },
                        outcome = previous => {
                            finished(outcome);
                            *committing = None;
                            continue;
                        }
                    }
                }
                _ if shutdown.is_cancelled() => break,
                _ => match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(job)) => job,
                    _ => break,
                },
            },
        };
        points += job.points.len();
        jobs.push(job);
    }
    Some(jobs)
}

/// Writes a group of jobs, in one transaction unless another writer waits (slices committed in
/// order); if that fails, each job alone, so that one bad job (a device archived meanwhile,
/// say) cannot hold back the others. Slices committed before the failure are then found stored
/// and counted as duplicates: nothing is stored twice. New points are queued
/// for webhooks in the same transaction, and idle delivery lanes woken after the commit. Every
/// job ends here, with its points counted.
async fn commit(db: &Db, sinks: &Sinks, slices: Vec<Batch>, mut jobs: Vec<Job>) {
    let started = std::time::Instant::now();
    match write(db, sinks, slices).await {
        Ok(()) => {
            metrics::histogram!("devicecloud_ingest_commit_seconds").record(started.elapsed().as_secs_f64());
            for job in &mut jobs {
                job.end(Ok(()));
            }
        }
        Err(e) if jobs.len() > 1 => {
            tracing::warn!(error = %e, jobs = jobs.len(), "group commit failed; writing jobs one by one");
            for job in &mut jobs {
                let batch = Batch::new(
                    std::mem::take(&mut job.points),
                    std::mem::take(&mut job.devices),
                    db.backend(),
                );
                let result = write(db, sinks, vec![batch]).await.map_err(|e| {
                    tracing::error!(error = %e, "ingest write failed");
                    IngestError::Store
                });
                job.end(result);
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "ingest write failed");
            for job in &mut jobs {
                job.end(Err(IngestError::Store));
            }
        }
    }
}

/// Where committed points go besides the store: the webhook lanes, the live stream and the
/// alarm rules.
pub struct Sinks {
    pub webhooks: Arc<WebhookHub>,
    pub stream: Arc<LiveFeed>,
    pub alarms: Alarms,
}

/// Writes slices with their webhook rows, counts their points (stored or duplicate) once they
/// are committed, wakes the delivery lanes if they queued any, and hands the new points to the
/// alarm rules and the live stream (a lane's commits run one after another, so both get each
/// gateway's points in commit order).
async fn write(db: &Db, sinks: &Sinks, slices: Vec<Batch>) -> Result<(), devicecloud_store::StoreError> {
    let Routed { written, queued, fresh } = ingest::write_slices(db, slices, &sinks.webhooks.routes).await?;
    if queued > 0 {
        sinks.webhooks.queued.notify_waiters();
    }
    if sinks.alarms.watching() {
        sinks.alarms.points(fresh.clone()).await;
    }
    sinks.stream.points(fresh);
    Outcome::Stored.points(written.inserted);
    Outcome::Duplicate.points(written.duplicates);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{self, MESSAGES, POINTS};

    fn counted(family: &str, outcome: Outcome) -> u64 {
        metrics::read(&metrics::handle().render(), family, outcome)
    }

    fn job(points: usize) -> (Job, Receipt) {
        let point = Point {
            container_key: 1,
            seconds: 0,
            microseconds: 0,
            value: 1.0,
            session_key: None,
        };
        let (done, answer) = oneshot::channel();
        (Job::new(vec![point; points], Vec::new(), done), Receipt(answer))
    }

    /// A submitter keeps its lane, and submitters spread over every lane.
    #[test]
    fn a_submitter_keeps_its_lane() {
        let lanes = 3;
        let ids: Vec<String> = (0..60).map(|g| format!("gateway-{g}")).collect();
        let first: Vec<usize> = ids.iter().map(|id| lane_of(id, lanes)).collect();
        let again: Vec<usize> = ids.iter().map(|id| lane_of(id, lanes)).collect();
        assert_eq!(first, again);
        for lane in 0..lanes {
            assert!(first.contains(&lane), "no submitter on lane {lane}");
        }
        assert_eq!(lane_of("gateway-0", 1), 0);
    }

    /// A job dropped unanswered (with a writer task that panicked: a failed batch preparation,
    /// a failed commit task) ends failed, counted once with its points; an ended job counts
    /// nothing more when dropped.
    #[tokio::test]
    async fn a_job_ends_once_and_a_dropped_one_fails_internal() {
        let internal = Outcome::Failed(Failed::Internal);
        let before = (counted(MESSAGES, internal), counted(POINTS, internal));
        let (dropped, receipt) = job(3);
        drop(dropped);
        assert!(matches!(receipt.await, Err(IngestError::Internal)));
        assert_eq!(
            (counted(MESSAGES, internal), counted(POINTS, internal)),
            (before.0 + 1, before.1 + 3)
        );

        let (mut ended, receipt) = job(2);
        ended.end(Err(IngestError::Stopped));
        ended.end(Ok(()));
        drop(ended);
        assert!(matches!(receipt.await, Err(IngestError::Stopped)));
        assert_eq!(
            (counted(MESSAGES, internal), counted(POINTS, internal)),
            (before.0 + 1, before.1 + 3)
        );
    }
}
