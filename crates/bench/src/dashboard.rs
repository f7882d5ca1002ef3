//! `bench dashboard`: how long each dashboard page takes, signed in through the sign-in form
//! like a browser, with a group of 1,000 gateways and a year of data behind one device's
//! charts (made in the store through its ingest path, so rollups are what MQTT ingest makes).

use std::time::Instant;

use anyhow::{Context, Result, bail};
use devicecloud_store::events::{self, NewEvent};
use devicecloud_store::ingest::{self, Point};
use devicecloud_store::{Db, unix_now};
use serde_json::Value;

use super::read::{latency, point, series_key};
use super::server::{ServerUnderTest, json, provision};

const DAY: i64 = 86_400;
/// Datatypes behind the charted device.
const DATATYPES: i64 = 3;
const LOAD_BATCH: usize = 100_000;

/// Options of the dashboard benchmark.
#[derive(Clone, Debug, clap::Args)]
pub struct DashboardOptions {
    /// Gateways in the group.
    #[arg(long, default_value_t = 1000)]
    pub devices: usize,
    /// Days of data behind the charted device (one point a minute, the last hour 1 Hz).
    #[arg(long, default_value_t = 366)]
    pub days: i64,
    /// Measured requests per page.
    #[arg(long, default_value_t = 100)]
    pub requests: usize,
    /// Database of the server under test (default: a fresh SQLite file); must be empty.
    #[arg(long)]
    pub database_url: Option<String>,
}

/// A signed-in browser session: the cookie to send.
async fn sign_in(http: &reqwest::Client, base: &str) -> Result<String> {
    let form = http.get(format!("{base}/login")).send().await?;
    let login_cookie = cookie_pair(&form, "dc_login").context("no sign-in cookie")?;
    let page = form.text().await?;
    let marker = "name=\"_csrf\" value=\"";
    let start = page.find(marker).context("no CSRF field")? + marker.len();
    let csrf = page[start..].split('"').next().unwrap_or_default().to_string();
    let answer = http
        .post(format!("{base}/login"))
        .header("Cookie", login_cookie)
        .form(&[
            ("_csrf", csrf.as_str()),
            ("username", "admin@bench.local"),
            ("password", "bench-password"),
        ])
        .send()
        .await?;
    if answer.status() != reqwest::StatusCode::SEE_OTHER {
        bail!("sign-in answered {}", answer.status());
    }
    cookie_pair(&answer, "dc_session").context("no session cookie")
}

/// `name=value` of a cookie the response sets.
fn cookie_pair(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .find(|pair| pair.starts_with(&format!("{name}=")))
        .map(str::to_string)
}

/// Loads the charted device's year (one point a minute, the last hour every second) and gives
/// every gateway a latest value and some events.
async fn load(db: &Db, id_group: &str, charted: &str, gateways: &[String], days: i64) -> Result<()> {
    let end = unix_now();
    let mut keys = Vec::new();
    for datatype in 1..=DATATYPES {
        keys.push(series_key(db, id_group, charted, datatype).await?);
    }
    let mut batch: Vec<Point> = Vec::with_capacity(LOAD_BATCH);
    let flush = |batch: &mut Vec<Point>| {
        let points = std::mem::take(batch);
        async move { ingest::write(db, &points, &[]).await }
    };
    for second in (end - days * DAY..end - 3600).step_by(60) {
        batch.extend(keys.iter().map(|k| point(*k, second, None)));
        if batch.len() >= LOAD_BATCH {
            flush(&mut batch).await?;
        }
    }
    for second in end - 3600..end {
        batch.extend(keys.iter().map(|k| point(*k, second, None)));
    }
    flush(&mut batch).await?;
    for gateway in gateways {
        let key = series_key(db, id_group, gateway, 1).await?;
        ingest::write(db, &[point(key, end, None)], &[(gateway.clone(), end)]).await?;
    }
    let values: Vec<String> = (0..1000).map(|i| (i % 4).to_string()).collect();
    let list: Vec<NewEvent> = (0..1000)
        .map(|i| NewEvent {
            id_group,
            source_device: if i % 2 == 0 {
                charted
            } else {
                &gateways[i % gateways.len()]
            },
            from_device: Some(0),
            event_type: 208,
            occurred_at: end - (1000 - i as i64) * 60,
            value: &values[i],
            datatype: None,
            value_description: None,
        })
        .collect();
    events::insert(db, &list, end).await?;
    Ok(())
}

pub async fn dashboard(o: DashboardOptions) -> Result<()> {
    let server = ServerUnderTest::start(o.database_url.clone()).await?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let (_, admin) = server.administrator(&http).await?;
    let db = Db::connect(&server.store_url()).await?;
    eprintln!("provisioning {} gateways…", o.devices);
    let gateways = provision(&http, &server.base, &admin, "DASH", o.devices).await?;
    let charted = gateways.first().context("no gateway")?.id.clone();
    let device: Value = json(
        http.get(format!("{}/api/v2/physical-device/{charted}", server.base))
            .bearer_auth(&admin),
    )
    .await?;
    let id_group = device["id_group"].as_str().context("no id_group")?.to_string();
    eprintln!("loading {} days of data behind one device…", o.days);
    let loaded = Instant::now();
    let ids: Vec<String> = gateways.iter().map(|g| g.id.clone()).collect();
    load(&db, &id_group, &charted, &ids, o.days).await?;
    eprintln!("  {:.0} s", loaded.elapsed().as_secs_f64());

    let session = sign_in(&http, &server.base).await?;
    let first_page = format!("group, first page of 50 of {}", o.devices);
    let pages = [
        ("overview", "/".to_string()),
        (first_page.as_str(), format!("/groups/{id_group}")),
        (
            "group sorted by last data, page 10",
            format!("/groups/{id_group}?sort=-last_data_at&page=10"),
        ),
        ("device, 1 hour (raw, 1 Hz)", format!("/devices/{charted}?range=1h")),
        ("device, 1 day (minutes)", format!("/devices/{charted}?range=1d")),
        ("device, 1 week (hours)", format!("/devices/{charted}?range=1w")),
        ("device, 3 weeks (hours)", format!("/devices/{charted}?range=3w")),
        ("device, 1 year (days)", format!("/devices/{charted}?range=1y")),
        ("latest values fragment", format!("/devices/{charted}/latest")),
        ("events", "/events".to_string()),
        ("events of the device", format!("/events?device={charted}")),
        ("data sessions", "/sessions".to_string()),
        ("webhooks", "/webhooks".to_string()),
        ("administration", "/admin".to_string()),
    ];
    let backend = if o.database_url.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    println!(
        "bench dashboard ({backend}): {} gateways in the group, {} days behind the charted device, {} requests per page",
        o.devices, o.days, o.requests
    );
    println!("{:<40} {:>9} {:>9} {:>9}", "page", "p50 ms", "p99 ms", "KiB");
    let mut worst: f64 = 0.0;
    for (name, path) in pages {
        let url = format!("{}{path}", server.base);
        let size = http
            .get(&url)
            .header("Cookie", &session)
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?
            .len();
        let (p50, p99) = latency(|_| http.get(&url).header("Cookie", &session), o.requests).await?;
        worst = worst.max(p50);
        println!("{name:<40} {p50:>9.2} {p99:>9.2} {:>9.1}", size as f64 / 1024.0);
    }
    println!("slowest page p50: {worst:.2} ms (target ≤ 20 ms)");
    db.close().await;
    server.stop(false).await;
    Ok(())
}
