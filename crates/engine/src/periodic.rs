//! The one loop of the service's periodic tasks: `while every.tick().await { … }` runs the body
//! now and then every period, until the service stops.

use std::time::Duration;

use tokio::time::{Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

/// The ticks of a periodic task, until `shutdown` is cancelled.
pub struct Every {
    interval: Interval,
    shutdown: CancellationToken,
}

impl Every {
    /// Ticks at once and then every `period`; a body late by more than a period delays the next
    /// tick rather than catching up with back-to-back runs.
    pub fn new(period: Duration, shutdown: &CancellationToken) -> Every {
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Every {
            interval,
            shutdown: shutdown.clone(),
        }
    }

    /// Waits for the next tick: true then, false once the service stops (a body in progress is
    /// not interrupted; a task that must stop mid-body selects on the shutdown itself).
    pub async fn tick(&mut self) -> bool {
        tokio::select! {
            _ = self.shutdown.cancelled() => false,
            _ = self.interval.tick() => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn ticks_at_once_then_every_period_until_cancelled() {
        let shutdown = CancellationToken::new();
        let mut every = Every::new(Duration::from_millis(20), &shutdown);
        let started = tokio::time::Instant::now();
        let mut runs = 0;
        while every.tick().await {
            runs += 1;
            if runs == 3 {
                shutdown.cancel();
            }
        }
        assert_eq!(runs, 3);
        // The first tick is at once; the third two periods later.
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_millis(40) && elapsed < Duration::from_secs(2),
            "{elapsed:?}"
        );
    }
}
