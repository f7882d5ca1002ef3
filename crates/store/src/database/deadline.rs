//! Statement deadlines on SQLite, the counterpart of PostgreSQL's `statement_timeout` for the
//! request pool (docs/operations.md, "Limits": the query timeout).
//!
//! SQLite has no statement timeout, but it calls a progress handler every N virtual-machine
//! steps, and a handler that answers "stop" interrupts the statement (`SQLITE_INTERRUPT`). The
//! handler needs to know when the running statement began: SQLite's trace hook reports each
//! statement as it starts (`SQLITE_TRACE_STMT`), and stores the time in a cell the handler
//! reads. Both are installed once per connection, when it is opened, so acquiring a connection
//! costs nothing more. The cell is shared with the trace hook through a raw pointer that the
//! hook frees when SQLite reports the connection closed (`SQLITE_TRACE_CLOSE`).
#![expect(
    unsafe_code,
    reason = "SQLite's trace and progress hooks are C callbacks over its handle"
)]

use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use libsqlite3_sys as ffi;
use sqlx::SqliteConnection;

/// Virtual-machine steps between two calls of the progress handler: a few microseconds of
/// work, so the check (one clock read) costs well under a percent.
const STEPS_BETWEEN_CHECKS: i32 = 1000;

/// Nanoseconds since a fixed point of this process.
fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Makes every statement of `conn` that runs longer than `timeout` fail with
/// `SQLITE_INTERRUPT` (read as `StoreError::Timeout`).
pub(crate) async fn install(conn: &mut SqliteConnection, timeout: Duration) -> sqlx::Result<()> {
    let started = Arc::new(AtomicU64::new(now_ns()));
    let mut handle = conn.lock_handle().await?;
    let context = Arc::into_raw(started.clone()).cast_mut().cast::<c_void>();
    // SAFETY: the handle is locked for us, so no statement runs meanwhile; `context` is a
    // strong reference to the cell that `on_trace` releases on SQLITE_TRACE_CLOSE, the last
    // event SQLite reports for this connection.
    let rc = unsafe {
        ffi::sqlite3_trace_v2(
            handle.as_raw_handle().as_ptr(),
            (ffi::SQLITE_TRACE_STMT | ffi::SQLITE_TRACE_CLOSE) as c_uint,
            Some(on_trace),
            context,
        )
    };
    if rc != ffi::SQLITE_OK {
        // SAFETY: the hook was not installed, so this is the only use of the reference.
        unsafe { drop(Arc::from_raw(context.cast::<AtomicU64>())) };
        return Err(sqlx::Error::Protocol(format!(
            "cannot install the statement timeout (SQLite code {rc})"
        )));
    }
    let limit = timeout.as_nanos().min(u128::from(u64::MAX)) as u64;
    handle.set_progress_handler(STEPS_BETWEEN_CHECKS, move || {
        now_ns().saturating_sub(started.load(Ordering::Relaxed)) < limit
    });
    Ok(())
}

/// The trace hook: a statement starts (stamp the time), or the connection closes (release the
/// cell).
unsafe extern "C" fn on_trace(event: c_uint, context: *mut c_void, _p: *mut c_void, _x: *mut c_void) -> c_int {
    let started = context.cast::<AtomicU64>().cast_const();
    if event == ffi::SQLITE_TRACE_STMT as c_uint {
        // SAFETY: the cell lives until SQLITE_TRACE_CLOSE, which comes after every statement.
        unsafe { (*started).store(now_ns(), Ordering::Relaxed) };
    } else if event == ffi::SQLITE_TRACE_CLOSE as c_uint {
        // SAFETY: the strong reference given to SQLite in `install`, released once.
        unsafe { drop(Arc::from_raw(started)) };
    }
    0
}
