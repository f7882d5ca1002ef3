//! Password checks and hashes in a lane of their own (docs/operations.md, "Limits"). Argon2
//! takes tens of milliseconds of CPU and 19 MiB of memory per call, and a stranger can ask for
//! one with every sign-in attempt: at most as many run at once as the machine has cores, each
//! on a blocking thread that holds its turn until the work is done (a caller that gives up does
//! not free the turn early), and a caller that waits longer than [`WAIT`] for its turn is told
//! to come back later instead of queueing without bound.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use tokio::sync::Semaphore;

use super::secrets;

/// How long a caller waits for its turn before it is answered 503.
pub const WAIT: Duration = Duration::from_secs(2);

/// The turns: one per core, for the whole process (the cores are the process's, not a
/// service's).
static LANE: LazyLock<Arc<Semaphore>> = LazyLock::new(|| {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    Arc::new(Semaphore::new(cores))
});

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
    let turn = tokio::time::timeout(WAIT, Arc::clone(&LANE).acquire_owned())
        .await
        .map_err(|_| LaneBusy)?
        .map_err(|_| LaneBusy)?;
    let done = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        work()
    });
    // The blocking task only ends by finishing its work; a panic in argon2 is a busy lane to
    // the caller rather than a crash.
    done.await.map_err(|_| LaneBusy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_caller_past_the_wait_is_refused_and_the_turns_come_back() {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        // Hold every turn for longer than the wait.
        let holders: Vec<_> = (0..cores)
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
