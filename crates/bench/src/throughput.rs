//! What a closed-loop run measured, and the quantiles every benchmark quotes.

/// What a closed-loop run measured: answers per second, and the median and 99th percentile
/// latency.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Throughput {
    pub per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl Throughput {
    /// A line of a results table: `label` in a column of `width`, then answers per second in
    /// one of `rate_width` and the two latencies.
    pub(crate) fn line(&self, label: &str, width: usize, rate_width: usize) -> String {
        let (rate, p50, p99) = (self.per_second, self.p50_ms, self.p99_ms);
        format!("{label:<width$} {rate:>rate_width$.0} {p50:>10.3} {p99:>10.3}")
    }
}

/// The latencies (microseconds) every worker measured since `started`, as one [`Throughput`];
/// the first worker that failed fails the run.
pub(crate) async fn throughput(
    workers: Vec<tokio::task::JoinHandle<anyhow::Result<Vec<u32>>>>,
    started: std::time::Instant,
) -> anyhow::Result<Throughput> {
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    Ok(Throughput {
        per_second: all.len() as f64 / elapsed,
        p50_ms: percentile_ms(&all, 0.50),
        p99_ms: percentile_ms(&all, 0.99),
    })
}

/// The `p` quantile (0 to 1) of latencies in microseconds, sorted ascending, in milliseconds; 0
/// without latencies.
pub(crate) fn percentile_ms(sorted_micros: &[u32], p: f64) -> f64 {
    let index = ((sorted_micros.len() as f64 * p) as usize).min(sorted_micros.len().saturating_sub(1));
    f64::from(sorted_micros.get(index).copied().unwrap_or(0)) / 1000.0
}
