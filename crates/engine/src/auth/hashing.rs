//! Password checks and hashes in a lane of their own (docs/operations.md, "Limits"). Argon2
//! takes tens of milliseconds of CPU and 19 MiB of memory per call, and a stranger can ask for
//! one with every sign-in attempt. They run on a pool of their own, one thread per core but one
//! (at least one), started once: at most that many run at once, the runtime's blocking pool
//! never grows for them, and the memory each thread's allocator keeps for its 19 MiB is reused by the next check on
//! that thread rather than left behind on whichever thread ran it. A caller that waits longer
//! than [`WAIT`] for a thread is told to come back later instead of queueing without bound; a
//! caller that gives up does not free the thread early (the check runs to its end).

use std::sync::LazyLock;
use std::time::Duration;

use tokio::sync::{Semaphore, oneshot};

use super::secrets;

/// How long a caller waits for its turn before it is answered 503.
pub const WAIT: Duration = Duration::from_secs(2);

/// A check or a hash, run on a lane thread.
type Job = Box<dyn FnOnce() + Send>;

/// The lane: its threads, and the turns that say how many callers may hand them work.
struct Lane {
    turns: Semaphore,
    jobs: flume::Sender<Job>,
}

/// Checks that run at once: one core fewer than the machine has (at least one), so that a
/// flood of sign-ins leaves a core to ingest and to every other request.
fn width() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    cores.saturating_sub(1).max(1)
}

/// One lane for the whole process (the cores are the process's, not a service's).
static LANE: LazyLock<Lane> = LazyLock::new(|| {
    let cores = width();
    let (jobs, queue) = flume::unbounded::<Job>();
    for n in 0..cores {
        let queue = queue.clone();
        let started = std::thread::Builder::new()
            .name(format!("password-{n}"))
            .spawn(move || {
                while let Ok(job) = queue.recv() {
                    // A job that panics ends alone; the thread takes the next one.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            });
        if let Err(e) = started {
            tracing::error!(error = %e, "cannot start a password thread");
        }
    }
    Lane {
        turns: Semaphore::new(cores),
        jobs,
    }
});

/// Gives a turn back when a job ends, however it ends.
struct GiveBack;

impl Drop for GiveBack {
    fn drop(&mut self) {
        LANE.turns.add_permits(1);
    }
}

/// Every turn was taken for longer than [`WAIT`].
#[derive(Debug, thiserror::Error)]
#[error("Too many password checks are running; try again in a few seconds.")]
pub struct LaneBusy;

/// Whether `password` matches the stored argon2 `hash`, checked in the lane.
pub async fn verify(password: String, hash: String) -> Result<bool, LaneBusy> {
    run(move || secrets::verify_password(&password, &hash)).await
}

/// The argon2 hash of `password`, made in the lane.
pub async fn hash(password: String) -> Result<Result<String, String>, LaneBusy> {
    run(move || secrets::hash_password(&password)).await
}

async fn run<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, LaneBusy> {
    let lane = &*LANE;
    let turn = tokio::time::timeout(WAIT, lane.turns.acquire())
        .await
        .map_err(|_| LaneBusy)?
        .map_err(|_| LaneBusy)?;
    // The turn goes with the job and is given back when the job ends, not when the caller
    // stops waiting: a caller cut short cannot let more checks run than there are threads.
    turn.forget();
    let (done, answer) = oneshot::channel();
    let job: Job = Box::new(move || {
        let _turn = GiveBack;
        let _ = done.send(work());
    });
    if lane.jobs.send(job).is_err() {
        lane.turns.add_permits(1);
        return Err(LaneBusy);
    }
    // A job that panicked dropped its sender: a busy lane to the caller rather than a crash.
    answer.await.map_err(|_| LaneBusy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_caller_past_the_wait_is_refused_and_the_turns_come_back() {
        // Hold every turn for longer than the wait.
        let holders: Vec<_> = (0..width())
            .map(|_| tokio::spawn(run(|| std::thread::sleep(WAIT + Duration::from_millis(500)))))
            .collect();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(matches!(verify("x".into(), "y".into()).await, Err(LaneBusy)));
        for holder in holders {
            holder.await.unwrap().unwrap();
        }
        assert!(matches!(verify("x".into(), "not a hash".into()).await, Ok(false)));
    }
}
