//! Finding the writable primary again after a failover, without the proxy's help.
//!
//! When a PostgreSQL primary is replaced (Patroni promotes a standby), pooled connections that
//! still lead to the old one fail: cut, or, once it runs again as a standby, refusing every
//! write (SQLSTATE 25006). A proxy that closes the sessions of a server it marks down hides
//! that; without one, the pool would hand out such connections until each was closed. So a
//! failure of that kind opens a window ([`SUSPECT_FOR`]) in which every connection is asked,
//! before it is handed out, whether it is a writable primary, and dropped if not; outside the
//! window nothing is asked, so steady work pays no round trip (docs/scaling.md, "High
//! availability").

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long connections are checked after a failure that suggests a failover: Patroni's
/// promotion of a standby and the proxy's health checks take seconds, not minutes.
pub const SUSPECT_FOR: Duration = Duration::from_secs(60);

/// Until when (Unix milliseconds) connections are checked; 0 when they are not.
static SUSPECT_UNTIL: AtomicU64 = AtomicU64::new(0);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Opens (or extends) the window in which connections are checked.
pub fn suspect() {
    let until = now_ms() + SUSPECT_FOR.as_millis() as u64;
    SUSPECT_UNTIL.fetch_max(until, Ordering::Relaxed);
    metrics::counter!("devicecloud_store_unavailable_total").increment(1);
}

/// Whether connections are to be checked now.
pub fn suspected() -> bool {
    SUSPECT_UNTIL.load(Ordering::Relaxed) > now_ms()
}

/// Whether `conn` leads to a writable primary: not in recovery, and not read-only by default
/// (`default_transaction_read_only`, which some setups use to fence a demoted primary).
pub async fn is_writable(conn: &mut sqlx::PgConnection) -> Result<bool, sqlx::Error> {
    let (recovering, read_only): (bool, String) =
        sqlx::query_as("SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only')")
            .fetch_one(conn)
            .await?;
    Ok(!recovering && read_only == "off")
}
