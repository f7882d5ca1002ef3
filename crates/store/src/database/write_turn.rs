//! One first-come-first-served queue in front of SQLite's one write lock.
//!
//! SQLite lets one connection write at a time. A connection that finds the lock taken sleeps
//! and tries again (the busy handler backs off up to 100 ms between tries), so a small write
//! that arrives while the ingest writer commits can lose the lock again and again to the
//! writer's next transaction: API writes waited over a second under full ingest. Every write of
//! this process to a SQLite file first takes its turn here instead. The queue is fair (tokio's
//! mutex serves waiters in order), so a write waits for the writers ahead of it, never for
//! ones that came later, and the ingest writer's bounded transactions keep each turn short
//! (docs/benchmarks.md, "API during full ingest").
//!
//! The queue belongs to the file, not to a pool: the request pool, the writers' pool and the
//! ingest writer's own connection all open the same file and must wait in one line. PostgreSQL
//! locks rows, not the database, and takes no turn.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;

use crate::database::Result;
use crate::database::StoreError;

/// The right to write, held until dropped (after the commit or rollback of the transaction it
/// was taken for). On PostgreSQL it holds nothing.
#[must_use = "the turn ends when it is dropped"]
pub(crate) struct Turn(Option<Held>);

/// A turn taken: the lock, its queue and, for a bulk writer, the [`Gate`] taken before it.
struct Held {
    _lock: OwnedMutexGuard<()>,
    queue: Arc<Queue>,
    _gate: Option<Gate>,
}

impl Turn {
    /// No turn: PostgreSQL writes do not queue.
    pub(crate) const NONE: Turn = Turn(None);

    /// Whether another writer waits for its turn: a long writer (the ingest writer) then ends
    /// its transaction at the next point it can and lets it in.
    pub(crate) fn others_waiting(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|held| held.queue.waiting.load(Ordering::Relaxed) > 0)
    }
}

/// The bulk gate of one file, held until dropped: the bulk writers (the ingest writer and the
/// retention's removal) take it before each turn, and a checkpoint that must find the log with
/// no bulk transaction committing into it (`wal`) takes it alone, keeping out those writers
/// only. Small writes take no gate and go on while such a checkpoint runs: waiting for its two
/// `fsync`s was most of their latency tail under full ingest (docs/benchmarks.md, "API during
/// full ingest").
#[must_use = "the gate opens when it is dropped"]
pub(crate) struct Gate {
    _guard: OwnedMutexGuard<()>,
}

/// The line of one file: the lock, how many wait for it, and the bulk [`Gate`].
#[derive(Default)]
struct Queue {
    lock: Arc<tokio::sync::Mutex<()>>,
    waiting: AtomicUsize,
    gate: Arc<tokio::sync::Mutex<()>>,
}

/// Counts a writer in the line while it waits, however its wait ends.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The queue of each SQLite file this process writes, by the file name its pools open.
static QUEUES: LazyLock<Mutex<HashMap<PathBuf, Arc<Queue>>>> = LazyLock::new(Default::default);

/// Who waits for a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Waiter {
    /// A write someone waits for (a request, a gateway's status): the ingest writer cuts its
    /// transaction short to let it in ([`Turn::others_waiting`]).
    Prompt,
    /// Background upkeep (retention, a `RESTART` checkpoint): waits for the ingest writer's
    /// transaction to end on its own, so that ingest does not pay for it in shorter
    /// transactions.
    Patient,
}

/// Seconds each turn was waited for, by [`Waiter`] (`prompt`, `patient`).
pub(crate) const WAIT_METRIC: &str = "devicecloud_store_write_wait_seconds";

/// Waits for the turn to write the file `pool` opens, as long as the pool waits for a
/// connection (waiting for the lock is waiting for the store); see [`take`].
pub(crate) async fn of_pool(pool: &sqlx::SqlitePool, waiter: Waiter) -> Result<Turn> {
    let patience = pool.options().get_acquire_timeout();
    take(pool.connect_options().get_filename(), patience, waiter).await
}

/// The bulk gate of the file `pool` opens, waited for as long as the pool waits for a
/// connection.
pub(crate) async fn gate_of_pool(pool: &sqlx::SqlitePool) -> Result<Gate> {
    let patience = pool.options().get_acquire_timeout();
    gate(&queue(pool.connect_options().get_filename()), patience).await
}

/// The turn of a bulk writer, one that writes much of the log (the ingest writer as a
/// [`Waiter::Prompt`], the retention's removal as a [`Waiter::Patient`]): the [`Gate`] of the
/// file first, then the turn, each waited for at most `patience`; the wait for both is the one
/// the metric counts.
pub(crate) async fn of_pool_in_bulk(pool: &sqlx::SqlitePool, waiter: Waiter) -> Result<Turn> {
    let patience = pool.options().get_acquire_timeout();
    let queue = queue(pool.connect_options().get_filename());
    let started = std::time::Instant::now();
    let gate = gate(&queue, patience).await?;
    wait_for_turn(queue, patience, waiter, started, Some(gate)).await
}

async fn gate(queue: &Queue, patience: Duration) -> Result<Gate> {
    match tokio::time::timeout(patience, Arc::clone(&queue.gate).lock_owned()).await {
        Ok(guard) => Ok(Gate { _guard: guard }),
        Err(_) => Err(no_turn(patience)),
    }
}

/// The queue of `file`.
fn queue(file: &Path) -> Arc<Queue> {
    let mut queues = QUEUES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    match queues.get(file) {
        Some(queue) => Arc::clone(queue),
        // The file's name is copied once, on its first write.
        None => Arc::clone(queues.entry(file.to_path_buf()).or_default()),
    }
}

/// Waits for the turn to write `file`, at most `patience`, then fails with
/// [`StoreError::Timeout`].
pub(crate) async fn take(file: &Path, patience: Duration, waiter: Waiter) -> Result<Turn> {
    wait_for_turn(queue(file), patience, waiter, std::time::Instant::now(), None).await
}

/// Waits in `queue` for the turn, holding `gate` with it; the metric counts from `started`.
async fn wait_for_turn(
    queue: Arc<Queue>,
    patience: Duration,
    waiter: Waiter,
    started: std::time::Instant,
    gate: Option<Gate>,
) -> Result<Turn> {
    let guard = {
        let _waiting = (waiter == Waiter::Prompt).then(|| {
            queue.waiting.fetch_add(1, Ordering::Relaxed);
            Waiting(&queue.waiting)
        });
        tokio::time::timeout(patience, Arc::clone(&queue.lock).lock_owned()).await
    };
    let label = match waiter {
        Waiter::Prompt => "prompt",
        Waiter::Patient => "patient",
    };
    metrics::histogram!(WAIT_METRIC, "waiter" => label).record(started.elapsed().as_secs_f64());
    match guard {
        Ok(guard) => Ok(Turn(Some(Held {
            _lock: guard,
            queue,
            _gate: gate,
        }))),
        Err(_) => Err(no_turn(patience)),
    }
}

fn no_turn(patience: Duration) -> StoreError {
    StoreError::Timeout(format!("no turn to write the store within {} ms", patience.as_millis()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn file() -> PathBuf {
        std::env::temp_dir().join(format!("dc-turn-{}.db", crate::database::new_id()))
    }

    #[tokio::test]
    async fn writers_of_one_file_take_turns_in_arrival_order_and_other_files_do_not_wait() {
        let file = file();
        let first = take(&file, Duration::from_secs(5), Waiter::Prompt).await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for n in 0..3 {
            let (file, order) = (file.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let _turn = take(&file, Duration::from_secs(5), Waiter::Prompt).await.unwrap();
                order.lock().unwrap().push(n);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }));
            // Queued before the next one comes.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(first.others_waiting(), "three wait behind the first turn");
        let other = take(
            &file.with_extension("other"),
            Duration::from_millis(100),
            Waiter::Prompt,
        )
        .await;
        assert!(
            !other.as_ref().unwrap().others_waiting(),
            "nobody waits for the other file"
        );
        assert!(other.is_ok(), "another file has a queue of its own");
        assert!(order.lock().unwrap().is_empty(), "nobody wrote during the first turn");
        drop(first);
        for w in waiting {
            w.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2]);
    }

    #[tokio::test]
    async fn background_upkeep_waits_without_cutting_a_transaction_short() {
        let file = file();
        let first = take(&file, Duration::from_secs(5), Waiter::Prompt).await.unwrap();
        let patient = {
            let file = file.clone();
            tokio::spawn(async move { take(&file, Duration::from_secs(5), Waiter::Patient).await.map(drop) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!first.others_waiting(), "upkeep waits unannounced");
        drop(first);
        patient.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_closed_gate_keeps_out_the_bulk_writer_only() {
        let file = file();
        let queue = queue(&file);
        let gate = gate(&queue, Duration::from_secs(1)).await.unwrap();
        let small = take(&file, Duration::from_millis(200), Waiter::Prompt).await;
        assert!(small.is_ok(), "a small write goes on while the gate is closed");
        drop(small);
        let bulk = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move { super::gate(&queue, Duration::from_secs(5)).await.map(drop) })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!bulk.is_finished(), "the bulk writer waits for the gate");
        drop(gate);
        bulk.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_turn_not_given_within_the_patience_is_a_timeout() {
        let file = file();
        let held = take(&file, Duration::from_secs(1), Waiter::Prompt).await.unwrap();
        match take(&file, Duration::from_millis(50), Waiter::Prompt).await {
            Err(StoreError::Timeout(message)) => assert!(message.contains("50 ms"), "{message}"),
            Err(e) => panic!("another error: {e}"),
            Ok(_) => panic!("a second turn while the first is held"),
        }
        assert!(
            !held.others_waiting(),
            "a writer that gave up no longer counts as waiting"
        );
    }
}
