//! The job runner (docs/api.md, "Jobs"): on every node, one task claims the open jobs whose
//! lease is free or ran out (so the jobs of a node that died are taken over), and for each of
//! them, every tick:
//!
//! 1. expires it once `expires_at` passed (pending executions time out);
//! 2. every second, sweeps its executions in progress: those under another runner (before a
//!    restart, on a node that died) are taken over — a command, or an update its gateway had
//!    not accepted, is sent once more, at most, then times out; a twin execution, or an
//!    accepted update, goes on —, twin executions whose device reported the version the job set
//!    end (usually they already did, with the report itself), and those past their deadline time
//!    out (a firmware execution otherwise ends with its gateway's hello: `gateway::updates`);
//! 3. aborts it when failures passed `max_failures_percent` of `total` (a firmware job: also of
//!    those ended) after at least 10 ended;
//! 4. starts the next executions whose gateway is connected, as many as `rate_per_minute`
//!    allows since the first one started;
//! 5. ends it when every execution ended (events 217 and 218 on its groups).
//!
//! Execution outcomes are written by one writer in batches ([`runs::end`]), each only if the
//! execution is still in progress under the attempt that ends, so every execution ends once.

mod execute;
pub mod operation;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use devicecloud_store::Db;
use devicecloud_store::events::{self, NewEvent};
use devicecloud_store::jobs::runs::{self, Ended};
use devicecloud_store::jobs::{self, JobRow, status};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::event_types;
use crate::gateway::registry::GatewayRegistry;
use crate::peers;
use crate::stream::LiveFeed;
use crate::twins;
use crate::webhooks::WebhookHub;
use devicecloud_protocol::firmware::UpdateParams;
use operation::Operation;

/// How often the runner looks at its jobs when nothing wakes it.
const TICK: Duration = Duration::from_millis(100);
/// The least time between two looks, however often it is woken (every batch of outcomes wakes
/// it, so that a job ends as soon as its last execution does).
const LEAST_TICK: Duration = Duration::from_millis(50);
/// How often a job's executions in progress are swept (taken over, timed out, their twin
/// reports looked for): a scan of all of them, so not at every tick. A twin execution usually
/// ends at once with its device's report (`twins::write_reported_many`); the sweep is the safety net.
const SWEEP: Duration = Duration::from_secs(1);
/// Executions started per job per tick, at most.
const START_BATCH: i64 = 1000;
/// Executions waiting for their device on this node, at most (a command holds a task until the
/// answer).
const MAX_IN_FLIGHT: usize = 8192;
/// Outcomes written per transaction, at most.
const END_BATCH: usize = 1024;
/// Ended executions needed before a job may abort (docs/api.md, "Jobs").
const ABORT_AFTER: i64 = 10;

/// What the job runner works with, built once by the composition root.
pub struct Context {
    pub db: Db,
    /// This node's name: the holder of the leases it takes.
    pub node_id: String,
    /// How long a job's lease lasts without renewal (the node lease).
    pub lease: Duration,
    /// The live gateway connections of this node.
    pub gateways: Arc<GatewayRegistry>,
    /// Commands for gateways connected to other nodes go through them.
    pub peers: Arc<peers::Context>,
    /// Twin executions change desired documents as the API does.
    pub twins: Arc<twins::Context>,
    /// Events 217 and 218 are routed to webhooks and shown on the stream.
    pub webhooks: Arc<WebhookHub>,
    pub stream: Arc<LiveFeed>,
    /// Most executions this node starts a second, over all its jobs.
    pub starts_per_s: usize,
    /// Rung when a job is created or cancelled here: the runner looks at once.
    pub wake: Notify,
}

/// Starts the runner on `tracker`, until `shutdown`.
pub fn spawn(ctx: Arc<Context>, tracker: &TaskTracker, shutdown: &CancellationToken) {
    let (ended, outcomes) = mpsc::unbounded_channel();
    let runner = Runner {
        name: format!("{}/{:08x}", ctx.node_id, rand::random::<u32>()),
        in_flight: Arc::new(AtomicUsize::new(0)),
        starts_left: i64::try_from(ctx.starts_per_s).unwrap_or(i64::MAX),
        second: Instant::now(),
        ended,
        plans: HashMap::new(),
        swept: HashMap::new(),
    };
    tracker.spawn(write_outcomes(ctx.clone(), outcomes, shutdown.clone()));
    tracker.spawn(run(ctx, runner, shutdown.clone()));
}

/// This process's runner: its name on the attempts it starts, and what it has in flight.
struct Runner {
    name: String,
    in_flight: Arc<AtomicUsize>,
    /// Starts left this second (`Context::starts_per_s`), and when the second began.
    starts_left: i64,
    second: Instant,
    ended: mpsc::UnboundedSender<Ended>,
    /// The plans of the jobs it runs, read once.
    plans: HashMap<String, Arc<Plan>>,
    /// When each job's executions in progress were last swept.
    swept: HashMap<String, Instant>,
}

async fn run(ctx: Arc<Context>, mut runner: Runner, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => {
                // Another node takes the jobs at once instead of after the lease; what is in
                // flight here is taken over as orphans.
                if let Err(e) = runs::release(&ctx.db, &ctx.node_id).await {
                    tracing::warn!(error = %e, "jobs: cannot give up the leases; another node waits for them to run out");
                }
                return;
            }
            _ = ctx.wake.notified() => {}
            _ = tokio::time::sleep(TICK) => {}
        }
        let looked = Instant::now();
        let now = devicecloud_store::unix_now();
        let until = now + i64::try_from(ctx.lease.as_secs()).unwrap_or(15).max(1);
        let open = match runs::claim(&ctx.db, &ctx.node_id, now, until).await {
            Ok(open) => open,
            Err(e) => {
                tracing::warn!(error = %e, "jobs: cannot claim the open jobs");
                continue;
            }
        };
        runner.plans.retain(|id, _| open.iter().any(|j| j.id_job == *id));
        runner.swept.retain(|id, _| open.iter().any(|j| j.id_job == *id));
        for job in open {
            if let Err(e) = work(&ctx, &mut runner, &job).await {
                tracing::warn!(job = %job.id_job, error = %e, "jobs: a step failed; tried again at the next tick");
            }
        }
        tokio::time::sleep(LEAST_TICK.saturating_sub(looked.elapsed())).await;
    }
}

/// Whether a job's failures passed `max_failures_percent` (after [`ABORT_AFTER`] ended): of its
/// `total`, and for a firmware job also of those ended — a campaign halts on a bad image's
/// first failures instead of trying it on a share of the fleet first (docs/api.md, "Firmware:
/// update").
fn fails_too_often(job: &JobRow, operation: &Plan) -> bool {
    let ended = job.succeeded + job.failed + job.timed_out;
    let failures = job.failed + job.timed_out;
    // A share of those ended passes the limit before the same share of `total` does.
    let base = match operation {
        Plan::Update(_) => ended,
        _ => job.total,
    };
    ended >= ABORT_AFTER && failures * 100 > job.max_failures_percent * base
}

/// The `update` command that installs `image` (docs/gateway-protocol.md, "Firmware update").
fn update_of(image: &devicecloud_store::firmware::FirmwareRow) -> UpdateParams {
    UpdateParams {
        id_firmware: image.id_firmware.clone(),
        component: image.component.clone(),
        version: image.version.clone(),
        size: u64::try_from(image.size).unwrap_or(0),
        sha256: image.sha256.clone(),
        signature: image.signature.clone(),
        manifest: image.manifest.clone(),
        url: devicecloud_protocol::firmware::download_path(&image.id_firmware),
    }
}

/// Whether a job may still start executions.
fn is_open(job: &JobRow) -> bool {
    job.status == status::QUEUED || job.status == status::IN_PROGRESS
}

/// One tick of one job (see the module's steps).
async fn work(ctx: &Arc<Context>, runner: &mut Runner, job: &JobRow) -> Result<(), devicecloud_store::StoreError> {
    let now = devicecloud_store::unix_now();
    let id = job.id_job.as_str();
    if is_open(job) && now >= job.expires_at && job.pending > 0 {
        runs::expire(&ctx.db, id, now).await?;
    }
    let Some(operation) = runner.plan(&ctx.db, job).await? else {
        tracing::warn!(job = %id, "jobs: the stored operation does not read, or its firmware image is gone");
        return Ok(());
    };
    if runner.swept.get(id).is_none_or(|at| at.elapsed() >= SWEEP) {
        runner.swept.insert(id.to_string(), Instant::now());
        sweep(ctx, runner, job, &operation, now).await?;
    }
    if is_open(job) && fails_too_often(job, &operation) {
        runs::abort(&ctx.db, id, now).await?;
        return Ok(());
    }
    if is_open(job) && now < job.expires_at && job.pending > 0 {
        start_next(ctx, runner, job, &operation).await?;
    }
    if job.pending == 0
        && job.in_progress == 0
        && let Some(done) = runs::finish(&ctx.db, id, now).await?
    {
        record(ctx, &done, event_types::JOB_FINISHED).await;
        runner.plans.remove(id);
    }
    Ok(())
}

/// Sweeps a job's executions in progress: those of another runner (their outcome was not
/// recorded) are taken over, twin executions whose device reported are ended, and those past
/// their deadline time out.
async fn sweep(
    ctx: &Arc<Context>,
    runner: &mut Runner,
    job: &JobRow,
    operation: &Arc<Plan>,
    now: i64,
) -> Result<(), devicecloud_store::StoreError> {
    let id = job.id_job.as_str();
    for orphan in runs::orphans(&ctx.db, id, &runner.name).await? {
        let deadline = now + job.timeout_s;
        match &**operation {
            // A twin execution, or an update the gateway accepted: it goes on, watched by this
            // runner from now on.
            Plan::Twin(_) => {
                runs::adopt(&ctx.db, id, &orphan, &runner.name, now, deadline).await?;
            }
            Plan::Update(_) if orphan.answered == 1 => {
                runs::adopt(&ctx.db, id, &orphan, &runner.name, now, deadline).await?;
            }
            _ if orphan.attempts >= 2 => {
                runner.end(id, &orphan.device, &orphan.runner, status::TIMED_OUT, None);
            }
            _ => {
                if runs::adopt(&ctx.db, id, &orphan, &runner.name, now, deadline).await? {
                    runner.launch(ctx, job, operation, orphan.ready());
                }
            }
        }
    }
    if matches!(**operation, Plan::Twin(_)) {
        for applied in runs::twins_applied(&ctx.db, id).await? {
            runner.end(id, &applied.device, &applied.runner, status::SUCCEEDED, None);
        }
    }
    for late in runs::overdue(&ctx.db, id, now).await? {
        runner.end(id, &late.device, &late.runner, status::TIMED_OUT, None);
    }
    Ok(())
}

/// Starts the executions whose turn came and whose gateway is connected.
async fn start_next(
    ctx: &Arc<Context>,
    runner: &mut Runner,
    job: &JobRow,
    operation: &Arc<Plan>,
) -> Result<(), devicecloud_store::StoreError> {
    let now_ms = now_ms();
    // At most one start every 60 / rate_per_minute seconds since the first.
    let allowed = match job.started_ms {
        None => 1,
        Some(first) => (now_ms - first).max(0) * job.rate_per_minute / 60_000 + 1 - job.dispatched,
    };
    let room = MAX_IN_FLIGHT.saturating_sub(runner.in_flight.load(Ordering::SeqCst)) as i64;
    if runner.second.elapsed() >= Duration::from_secs(1) {
        runner.second = Instant::now();
        runner.starts_left = i64::try_from(ctx.starts_per_s).unwrap_or(i64::MAX);
    }
    let limit = allowed.min(START_BATCH).min(room).min(runner.starts_left);
    if limit <= 0 {
        return Ok(());
    }
    let ready = runs::ready(&ctx.db, &job.id_job, limit).await?;
    if ready.is_empty() {
        return Ok(());
    }
    let devices: Vec<String> = ready.iter().map(|r| r.device.clone()).collect();
    let deadline = now_ms / 1000 + job.timeout_s;
    let started = runs::start(&ctx.db, &job.id_job, &devices, &runner.name, now_ms, deadline).await?;
    runner.starts_left -= started.len() as i64;
    if job.status == status::QUEUED && !started.is_empty() {
        record(ctx, job, event_types::JOB_STARTED).await;
    }
    if let Plan::Twin(patch) = &**operation {
        // One transaction for the whole batch, not one per device.
        let devices: Vec<String> = started.into_iter().map(|(device, _)| device).collect();
        runner.launch_twins(ctx, &job.id_job, devices, patch.clone());
        return Ok(());
    }
    for item in ready {
        if started.iter().any(|(device, _)| *device == item.device) {
            runner.launch(ctx, job, operation, item);
        }
    }
    Ok(())
}

impl Runner {
    /// The plan of `job`, read once; `None` when its stored operation does not read or its
    /// firmware image is gone (deletion waits for its jobs, so only by hand).
    async fn plan(
        &mut self,
        db: &devicecloud_store::Db,
        job: &JobRow,
    ) -> Result<Option<Arc<Plan>>, devicecloud_store::StoreError> {
        if let Some(plan) = self.plans.get(&job.id_job) {
            return Ok(Some(plan.clone()));
        }
        let plan = match operation::stored(&job.operation) {
            None => return Ok(None),
            Some(Operation::Command(request)) => Plan::Command(request),
            Some(Operation::Twin(patch)) => Plan::Twin(patch),
            Some(Operation::Firmware(id)) => match devicecloud_store::firmware::get(db, &id).await? {
                Some(image) => Plan::Update(update_of(&image)),
                None => return Ok(None),
            },
        };
        let plan = Arc::new(plan);
        self.plans.insert(job.id_job.clone(), plan.clone());
        Ok(Some(plan))
    }

    /// Queues the end of an attempt for the writer.
    fn end(&self, id_job: &str, device: &str, runner: &str, status: &'static str, result: Option<String>) {
        let _ = self.ended.send(Ended {
            id_job: id_job.to_string(),
            device: device.to_string(),
            runner: runner.to_string(),
            status,
            result,
        });
    }

    /// Applies a twin job's patch to a batch of devices in one task (and one transaction); the
    /// executions that could not start go to the writer (the others end with their reports).
    fn launch_twins(
        &self,
        ctx: &Arc<Context>,
        id_job: &str,
        devices: Vec<String>,
        patch: serde_json::Map<String, serde_json::Value>,
    ) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let (ctx, id_job, runner) = (ctx.clone(), id_job.to_string(), self.name.clone());
        let (ended, in_flight) = (self.ended.clone(), self.in_flight.clone());
        tokio::spawn(async move {
            let outcomes = twins::batch::change_desired_for_job(&ctx.twins, &id_job, &devices, &patch).await;
            let end = |device: &String, status: &'static str| Ended {
                id_job: id_job.clone(),
                device: device.clone(),
                runner: runner.clone(),
                status,
                result: None,
            };
            match outcomes {
                Ok(outcomes) => {
                    for (device, outcome) in devices.iter().zip(outcomes) {
                        let status = match outcome {
                            Ok(()) => continue,
                            // Not written: its turn comes again.
                            Err(twins::TwinError::Store(_) | twins::TwinError::Busy) => status::PENDING,
                            Err(_) => status::FAILED,
                        };
                        let _ = ended.send(end(device, status));
                    }
                }
                Err(e) => {
                    tracing::warn!(job = %id_job, error = %e, "jobs: a batch of twin changes was not written; their turn comes again");
                    for device in &devices {
                        let _ = ended.send(end(device, status::PENDING));
                    }
                }
            }
            in_flight.fetch_sub(1, Ordering::SeqCst);
        });
    }

    /// Runs one command or firmware execution's attempt in its own task; its outcome goes to the
    /// writer (an accepted update has none yet: its hello ends it). Twin executions start in
    /// batches ([`Runner::launch_twins`]).
    fn launch(&self, ctx: &Arc<Context>, job: &JobRow, operation: &Arc<Plan>, ready: runs::Ready) {
        if matches!(**operation, Plan::Twin(_)) {
            return;
        }
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let attempt = execute::Attempt {
            ctx: ctx.clone(),
            id_job: job.id_job.clone(),
            timeout: Duration::from_secs(u64::try_from(job.timeout_s).unwrap_or(60)),
            runner: self.name.clone(),
            ready,
        };
        let (plan, ended, in_flight) = (operation.clone(), self.ended.clone(), self.in_flight.clone());
        tokio::spawn(async move {
            let outcome = match &*plan {
                Plan::Command(command) => Some(attempt.run(command).await),
                Plan::Update(update) => attempt.update(update).await,
                Plan::Twin(_) => None,
            };
            if let Some(outcome) = outcome {
                let _ = ended.send(outcome);
            }
            in_flight.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// What a job does to each device, ready to send: its stored operation, with a firmware job's
/// image read once into the `update` it sends.
enum Plan {
    Command(devicecloud_protocol::CommandRequest),
    Twin(serde_json::Map<String, serde_json::Value>),
    Update(UpdateParams),
}

/// Writes outcomes in batches until shutdown; a batch that cannot be written is tried again.
async fn write_outcomes(ctx: Arc<Context>, mut outcomes: mpsc::UnboundedReceiver<Ended>, shutdown: CancellationToken) {
    let mut batch: Vec<Ended> = Vec::new();
    loop {
        if batch.is_empty() {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                first = outcomes.recv() => match first {
                    Some(first) => batch.push(first),
                    None => return,
                },
            }
        }
        while batch.len() < END_BATCH {
            match outcomes.try_recv() {
                Ok(more) => batch.push(more),
                Err(_) => break,
            }
        }
        match runs::end(&ctx.db, &batch, devicecloud_store::unix_now()).await {
            Ok(_) => {
                batch.clear();
                ctx.wake.notify_one();
            }
            Err(e) => {
                tracing::warn!(error = %e, count = batch.len(), "jobs: cannot record outcomes; trying again");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            }
        }
    }
}

/// Records event 217 or 218 on every group of `job` (value: its id).
async fn record(ctx: &Context, job: &JobRow, event_type: i64) {
    let groups = match jobs::groups_of(&ctx.db, &job.id_job).await {
        Ok(groups) => groups,
        Err(e) => {
            tracing::warn!(job = %job.id_job, error = %e, "jobs: cannot read the groups of a job");
            return;
        }
    };
    let now = devicecloud_store::unix_now();
    let events: Vec<NewEvent> = groups
        .iter()
        .map(|group| NewEvent {
            id_group: group,
            source_device: group,
            from_device: Some(0),
            event_type,
            occurred_at: now,
            value: &job.id_job,
            datatype: None,
            value_description: Some(&job.label),
        })
        .collect();
    match events::insert_routed(&ctx.db, &ctx.webhooks.routes, &events, now).await {
        Ok(ids) => ctx.stream.events(&events, &ids),
        Err(e) => tracing::warn!(job = %job.id_job, error = %e, "jobs: cannot record a job event"),
    }
}

/// Unix time now in milliseconds.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
