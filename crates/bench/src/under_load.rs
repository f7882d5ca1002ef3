//! What the benchmarks that measure the API "while gateways publish at full rate" share: the
//! publishing fleet's acknowledged rate over a window, and API clients that send one request
//! at a steady pace and keep each answer's latency.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::task::JoinHandle;

use super::publisher::{Outcome, flood};
use super::server::{GatewayCredentials, ServerUnderTest};

/// Every gateway of `fleet` publishing at full rate ([`flood`]) until `deadline`; resolves to the
/// acknowledged points a second. `round` keeps the timestamps of successive windows apart, so
/// that no window's points are resends of an earlier one's.
pub fn full_rate(
    server: &ServerUnderTest,
    fleet: &[GatewayCredentials],
    round: i64,
    deadline: Instant,
) -> JoinHandle<Result<f64>> {
    let started = Instant::now();
    let publishers = flood(server.mqtt, fleet, first_second(round), deadline);
    tokio::spawn(async move {
        let mut acked = 0i64;
        for task in publishers {
            acked += points(&task.await??);
        }
        Ok(acked as f64 / started.elapsed().as_secs_f64())
    })
}

/// The first timestamp a window of `round` publishes. Rounds are 2,000,000 s apart: a window
/// at full rate covers about 2,400 s of each gateway's timestamps a second, so windows of up to
/// 800 s stay apart, and rounds 0 to 15 all lie in the past (the server refuses a `ts` more
/// than a day ahead of its clock, docs/gateway-protocol.md).
pub fn first_second(round: i64) -> i64 {
    1_763_000_000 + round * 2_000_000
}

/// Points acknowledged to one publisher.
fn points(outcome: &Outcome) -> i64 {
    outcome
        .acked
        .iter()
        .map(|m| m.measurements * i64::from(m.datatypes))
        .sum()
}

/// The runtime the API clients of [`steady`] run on: a thread of their own. On the benchmark's
/// main runtime they waited behind the publishers' tasks, which keep its threads busy, and their
/// latencies counted that wait: in one run of `bench mixed`, reads measured 19.4 ms at the 99th
/// percentile at the client while the server's own log gave 6.3 ms for the same requests
/// (docs/benchmarks.md, "API during full ingest"). The API's users are other machines than the
/// gateways, whose publishing should not delay them.
fn clients() -> &'static tokio::runtime::Runtime {
    static CLIENTS: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    CLIENTS.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("api-clients")
            .enable_all()
            .build()
            .expect("the API clients' runtime: a thread and its timer")
    })
}

/// The server's `ingest_batch_points` setting, when a benchmark's `--batch-points` names one.
pub fn batch_points_env(batch_points: Option<usize>) -> Option<(&'static str, String)> {
    batch_points.map(|n| ("DEVICECLOUD_INGEST_BATCH_POINTS", n.to_string()))
}

/// What a [`steady`] client saw: the latencies of the answers that succeeded, sorted, and how
/// many did not.
#[derive(Debug, Default)]
pub struct Answers {
    pub latencies: Vec<Duration>,
    pub failed: usize,
}

/// A client that sends `request(n)` for n = 0, 1, 2… one at a time, starting one every `every`
/// (or as soon as the previous answer came, when that took longer), until `deadline`. An
/// answer counts once its body is read.
///
/// The client runs on [`clients`], and `request` should build on a `reqwest::Client` of its own
/// (not one that served the benchmark's set-up), whose connections are then made there too.
pub fn steady<F>(every: Duration, deadline: Instant, request: F) -> JoinHandle<Answers>
where
    F: Fn(u64) -> reqwest::RequestBuilder + Send + 'static,
{
    clients().spawn(async move {
        let mut answers = Answers::default();
        let mut next = Instant::now();
        let mut n = 0;
        while Instant::now() < deadline {
            tokio::time::sleep_until(next.into()).await;
            next += every;
            let started = Instant::now();
            let ok = match request(n).send().await {
                Ok(response) => {
                    let status = response.status();
                    response.bytes().await.is_ok() && status.is_success()
                }
                Err(_) => false,
            };
            if ok {
                answers.latencies.push(started.elapsed());
            } else {
                answers.failed += 1;
            }
            next = next.max(Instant::now());
            n += 1;
        }
        answers.latencies.sort_unstable();
        answers
    })
}
