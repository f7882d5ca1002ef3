//! The attacks on the service's resources (docs/operations.md, "Limits"): a flood of sign-in
//! attempts from many addresses, huge `like` filters, `group.latestData` expands over a large
//! group, one address holding as many connections as it can, and one account opening streams.
//! Each runs until the deadline and counts how every attempt ended.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::sources;
use super::{Shared, silent};

/// Attacker address blocks (127.<block>.x.y), one per attack.
const SIGN_IN_BLOCK: u8 = 2;
const HOLDING_BLOCK: u8 = 3;
const LIKE_BLOCK: u8 = 4;
const STREAM_BLOCK: u8 = 5;

/// Clients of the sign-in flood, each from an address of its own.
pub const SIGN_IN_CLIENTS: usize = 150;
/// Connections one address tries to hold, on each listener.
const HOLDING: usize = 1000;
/// Streams one account tries to hold.
const STREAMS: usize = 200;

/// The API client that password grants name.
#[derive(Clone)]
pub struct OAuthClient {
    pub id: String,
    pub secret: String,
}

/// Client `index` of the sign-in flood: password grants and dashboard sign-ins with made-up
/// usernames (and a double-submit token of its own choosing), moving to a fresh address each
/// time its address is refused (429), as a botnet would.
pub async fn sign_in_flood(index: usize, base: String, client: OAuthClient, tally: Shared, deadline: Instant) {
    let mut moves = 0;
    let mut http = sources::http_client(sources::address(SIGN_IN_BLOCK, index));
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        let username = format!("guess-{index}-{n}@example.com");
        let request = if n.is_multiple_of(2) {
            http.post(format!("{base}/oauth2/token")).form(&[
                ("grant_type", "password"),
                ("client_id", client.id.as_str()),
                ("client_secret", client.secret.as_str()),
                ("username", username.as_str()),
                ("password", "Summer2026!"),
            ])
        } else {
            let token = format!("chosen-{index}-{n}");
            http.post(format!("{base}/login"))
                .header("cookie", format!("dc_login={token}"))
                .form(&[
                    ("_csrf", token.as_str()),
                    ("username", username.as_str()),
                    ("password", "Summer2026!"),
                    ("next", "/"),
                ])
        };
        let status = match request.timeout(Duration::from_secs(30)).send().await {
            Ok(response) => response.status().as_u16(),
            Err(_) => 0,
        };
        tally.lock().await.count(if status == 0 {
            "error".to_string()
        } else {
            status.to_string()
        });
        if status == 429 {
            moves += 1;
            http = sources::http_client(sources::address(SIGN_IN_BLOCK, index + moves * SIGN_IN_CLIENTS));
        }
    }
}

/// `like` filters of 100 KB in a JSON body (within the body limit, so that the filter is read),
/// back to back.
pub async fn huge_likes(index: usize, base: String, token: String, tally: Shared, deadline: Instant) {
    let body = json!({"filter": {"serial_hardware": {"like": "%a_".repeat(34_000)}}}).to_string();
    let url = format!("{base}/api/v2/physical-device");
    let request = |http: &reqwest::Client| {
        http.get(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(body.clone())
    };
    back_to_back(sources::address(LIKE_BLOCK, index), request, tally, deadline).await;
}

/// Pages of 22 devices with `expand=group.latestData` over the publishing fleet's group: each
/// device would carry every series of the group.
pub async fn latest_data(index: usize, base: String, token: String, tally: Shared, deadline: Instant) {
    let url = format!("{base}/api/v2/physical-device?per-page=22&expand=group.latestData");
    let request = |http: &reqwest::Client| http.get(&url).bearer_auth(&token);
    back_to_back(sources::address(LIKE_BLOCK, 100 + index), request, tally, deadline).await;
}

/// Sends what `request` builds from `from`, one after the other until the deadline, reading
/// each answer whole and counting its status.
async fn back_to_back(
    from: IpAddr,
    request: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    tally: Shared,
    deadline: Instant,
) {
    let http = sources::http_client(from);
    while Instant::now() < deadline {
        let outcome = match request(&http).timeout(Duration::from_secs(30)).send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let _ = response.bytes().await;
                status.to_string()
            }
            Err(_) => "error".to_string(),
        };
        tally.lock().await.count(outcome);
    }
}

/// One address opening [`HOLDING`] silent connections to `to`, each reopened when the server
/// closes it (after a pause of a second when that was at once: a refused connection is tried
/// again, not spun on).
pub fn hold_connections(to: SocketAddr, tally: &Shared, deadline: Instant) -> Vec<tokio::task::JoinHandle<()>> {
    let from = sources::address(HOLDING_BLOCK, 0);
    (0..HOLDING)
        .map(|_| tokio::spawn(hold_one(from, to, tally.clone(), deadline)))
        .collect()
}

async fn hold_one(from: IpAddr, to: SocketAddr, tally: Shared, deadline: Instant) {
    while Instant::now() < deadline {
        let opened = Instant::now();
        let Ok(mut stream) = sources::connect(from, to).await else {
            tally.lock().await.count("connect failed");
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let outcome = silent(&mut stream, deadline).await;
        tally.lock().await.count(outcome);
        if opened.elapsed() < Duration::from_secs(1) {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// One account opening [`STREAMS`] live streams on `group`, each held to the deadline once
/// open, or tried again a second after a refusal.
pub fn open_streams(
    base: &str,
    token: &str,
    group: &str,
    tally: &Shared,
    deadline: Instant,
) -> Vec<tokio::task::JoinHandle<()>> {
    let url: Arc<str> = format!("{base}/api/v2/stream?filter[id_group]={group}&types=events").into();
    (0..STREAMS)
        .map(|i| {
            let (url, token, tally) = (url.clone(), token.to_string(), tally.clone());
            tokio::spawn(async move {
                let http = sources::http_client(sources::address(STREAM_BLOCK, i));
                while Instant::now() < deadline {
                    let response = http
                        .get(url.as_ref())
                        .bearer_auth(&token)
                        .header("accept", "text/event-stream")
                        .send()
                        .await;
                    match response {
                        Ok(r) if r.status().is_success() => {
                            tally.lock().await.count("200 (held)");
                            let mut body = r;
                            while Instant::now() < deadline {
                                let wait = deadline.saturating_duration_since(Instant::now());
                                match tokio::time::timeout(wait, body.chunk()).await {
                                    Ok(Ok(Some(_))) => {}
                                    _ => break,
                                }
                            }
                        }
                        Ok(r) => {
                            tally.lock().await.count(r.status().as_u16().to_string());
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                        Err(_) => {
                            tally.lock().await.count("error");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                }
            })
        })
        .collect()
}
