//! What the abuse benchmark measures while the attacks run, from 127.0.0.1: `/healthz`, another
//! tenant's API (an account with a group of its own, reading its groups), and a gateway of that
//! tenant publishing one point at a time (the PUBACK latency a gateway sees).

use std::time::{Duration, Instant};

use super::super::publisher::{Message, Outcome, Pace, publish_paced};
use super::super::server::GatewayCredentials;

/// Latencies of the answers that came, and how many requests failed.
pub struct Probed {
    pub latencies: Vec<Duration>,
    pub failures: usize,
}

/// `GET url` every 10 ms on a kept-alive connection (with `token` when given) until the
/// deadline.
pub async fn every_10_ms(url: String, token: Option<String>, deadline: Instant) -> Probed {
    let http = reqwest::Client::new();
    let (mut latencies, mut failures) = (Vec::new(), 0);
    while Instant::now() < deadline {
        let sent = Instant::now();
        let mut request = http.get(&url).timeout(Duration::from_secs(5));
        if let Some(token) = &token {
            request = request.bearer_auth(token);
        }
        match request.send().await {
            Ok(r) if r.status().is_success() => {
                // The whole answer, as a client reads it.
                if r.bytes().await.is_ok() {
                    latencies.push(sent.elapsed());
                } else {
                    failures += 1;
                }
            }
            _ => failures += 1,
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Probed { latencies, failures }
}

/// The tenant's gateway: one single-point QoS 1 message every 10 ms until the deadline; its
/// outcome carries the PUBACK latencies.
pub async fn puback(
    mqtt: std::net::SocketAddr,
    gateway: GatewayCredentials,
    deadline: Instant,
) -> anyhow::Result<Outcome> {
    let messages = (0..100_000)
        .map(|i| Message {
            first_second: 1_763_000_000 + i,
            measurements: 1,
            datatypes: 1,
        })
        .collect();
    let pace = Pace::spread(Duration::from_millis(10), 0, 1);
    publish_paced(mqtt, &gateway, messages, 1, deadline, Some(pace)).await
}
