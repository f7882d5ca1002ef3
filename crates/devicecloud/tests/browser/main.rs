//! The dashboard in a real browser. The server's HTTP tests check every page and form as HTML,
//! but only a browser runs `dashboard.js`, enforces the Content-Security-Policy, follows the
//! sign-in redirect with its cookies and lays out the charts. So this test runs `devicecloud
//! demo` (the real binary, a fresh store, a simulated fleet), drives a headless Chromium over
//! the DevTools protocol through sign-in, fleet, group and gateway pages, switches the chart
//! ranges by clicking them, pings the gateway through the command panel's script, opens the API
//! reference from the header and runs one of its operations with "Try it out", and fails on any
//! console error, uncaught exception, error log entry or failed request on the way.
//!
//! Screenshots of the pages land in `target/screenshots/` for a person to look at.
//!
//! Without Chromium on `PATH` the test prints a note and passes, so that `cargo test` works on
//! a machine without a browser; with `DEVICECLOUD_REQUIRE_BROWSER=1` (as CI sets it) a missing
//! browser fails it instead.

#![cfg(unix)]

mod cdp;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};

use cdp::{Cdp, Chromium, Page};

const BIN: &str = env!("CARGO_BIN_EXE_devicecloud");
/// The administrator `devicecloud demo` seeds.
const ADMIN: &str = "admin@devicecloud.demo";
const PASSWORD: &str = "demo-password";
/// A demo group holding simulated CORE gateways, and the pattern of their serials: the Modbus
/// devices behind them are `DEMO-CORE-<n>-MB1`, and the demo's own `DEMO-GW-1` is provisioned
/// but not simulated, so it never answers a ping.
const GROUP: &str = "Rotterdam water plant";
const GATEWAY_SERIAL: &str = r"^DEMO-CORE-\d+$";
/// How long the demo may take to print its dashboard line.
const DEMO_START: Duration = Duration::from_secs(60);
/// How long a page may take to load.
const PAGE_LOAD: Duration = Duration::from_secs(15);
/// How long the gateway may take to connect and send its first measurements.
const FIRST_DATA: Duration = Duration::from_secs(30);
/// How long a ping may take to come back through the page.
const PING: Duration = Duration::from_secs(15);
/// The viewport of the screenshots.
const VIEWPORT: (u32, u32) = (1280, 900);

/// `devicecloud demo` on loopback ports in a data dir of its own; dropping it kills the
/// process and removes the dir.
struct Demo {
    child: Child,
    dir: PathBuf,
    /// `http://127.0.0.1:<port>`, as the demo's dashboard line gives it.
    base: String,
    /// The API client the demo prints, as `(client_id, client_secret)`.
    client: (String, String),
}

impl Demo {
    fn start() -> Result<Demo> {
        let dir = std::env::temp_dir().join(format!("dc-browser-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let mut child = Command::new(BIN)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DEVICECLOUD_DATA_DIR", &dir)
            .env("DEVICECLOUD_LOG", "warn")
            .env("DEVICECLOUD_HTTP_ADDR", "127.0.0.1:0")
            .env("DEVICECLOUD_MQTT_ADDR", "127.0.0.1:0")
            .arg("demo")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start devicecloud demo")?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut demo = Demo {
            child,
            dir,
            base: String::new(),
            client: (String::new(), String::new()),
        };
        // Lines go through a channel so that waiting for them is bounded; the thread reads to
        // the end so that the pipe never fills.
        let (line_tx, line_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = line_tx.send(line);
            }
        });
        let deadline = Instant::now() + DEMO_START;
        let mut printed = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = line_rx.recv_timeout(left).with_context(|| {
                format!("devicecloud demo printed no dashboard line within {DEMO_START:?}: {printed:?}")
            })?;
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.first() == Some(&"dashboard") {
                let url = words.get(1).context("dashboard line without address")?;
                demo.base = url.trim_end_matches('/').to_string();
            }
            // The API client line comes after the dashboard's.
            if words.starts_with(&["API", "client"]) {
                let value = |key: &str| words.iter().find_map(|w| w.strip_prefix(key)).map(str::to_string);
                demo.client = value("client_id=")
                    .zip(value("client_secret="))
                    .context("API client line without client_id and client_secret")?;
                break;
            }
            printed.push(line);
        }
        let listening = printed.first().map_or("", String::as_str);
        ensure!(
            listening.starts_with(&format!("listening http={} ", demo.base.trim_start_matches("http://"))),
            "the dashboard address {} is not the one listening: {listening:?}",
            demo.base
        );
        ensure!(
            demo.base.starts_with("http://127.0.0.1:"),
            "the demo must listen on loopback only: {}",
            demo.base
        );
        Ok(demo)
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Turns the page's events into failures: console errors, uncaught exceptions, error log
/// entries (CSP refusals among them), requests that failed and answers of 400 or more.
#[derive(Default)]
struct Watch {
    seen: usize,
    /// Request URLs by request id, to name the URL of a failed request.
    urls: HashMap<String, String>,
}

impl Watch {
    /// Fails naming `step` and every problem seen since the last check.
    fn check(&mut self, page: &Page, step: &str) -> Result<()> {
        let (events, next) = page.events_since(self.seen);
        self.seen = next;
        let mut problems = Vec::new();
        for event in events {
            let p = &event["params"];
            match event["method"].as_str().unwrap_or_default() {
                "Network.requestWillBeSent" => {
                    if let (Some(id), Some(url)) = (p["requestId"].as_str(), p["request"]["url"].as_str()) {
                        self.urls.insert(id.to_string(), url.to_string());
                    }
                }
                "Network.responseReceived" => {
                    let status = p["response"]["status"].as_f64().unwrap_or(0.0);
                    if status >= 400.0 {
                        problems.push(format!("HTTP {status} for {}", p["response"]["url"]));
                    }
                }
                "Network.loadingFailed" => {
                    let url = p["requestId"].as_str().and_then(|id| self.urls.get(id));
                    problems.push(format!(
                        "request failed: {} ({}{})",
                        url.map_or("unknown URL", String::as_str),
                        p["errorText"],
                        p.get("blockedReason")
                            .map_or(String::new(), |r| format!(", blocked: {r}"))
                    ));
                }
                "Runtime.consoleAPICalled" if matches!(p["type"].as_str(), Some("error" | "assert")) => {
                    let text: Vec<String> = p["args"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|a| a.get("value").or(a.get("description")).unwrap_or(a).to_string())
                        .collect();
                    problems.push(format!("console.{}: {}", p["type"], text.join(" ")));
                }
                "Runtime.exceptionThrown" => {
                    let d = &p["exceptionDetails"];
                    let text = d["exception"]["description"].as_str().or(d["text"].as_str());
                    problems.push(format!("uncaught exception: {} at {}", text.unwrap_or("?"), d["url"]));
                }
                "Log.entryAdded" if p["entry"]["level"] == "error" => {
                    let e = &p["entry"];
                    problems.push(format!("log error ({}): {} at {}", e["source"], e["text"], e["url"]));
                }
                _ => {}
            }
        }
        if !problems.is_empty() {
            bail!("{step}:\n  {}", problems.join("\n  "));
        }
        Ok(())
    }
}

/// Where the screenshots go: `target/screenshots/` of the workspace.
fn screenshot_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/screenshots"))
}

async fn screenshot(page: &Page, name: &str) -> Result<()> {
    let path = screenshot_dir().join(format!("{name}.png"));
    let png = page.screenshot().await?;
    std::fs::write(&path, png).with_context(|| format!("cannot write {}", path.display()))
}

/// A string as a script literal.
fn js(text: &str) -> String {
    json!(text).to_string()
}

/// Checks that the device page shows the range `key` as the one active link and draws at
/// least one chart.
async fn check_range(page: &Page, key: &str) -> Result<()> {
    let state = page
        .eval(
            "({active: [...document.querySelectorAll('nav.ranges a.active')].map(a => a.getAttribute('href')),
               charts: document.querySelectorAll('svg.chart').length,
               search: location.search})",
        )
        .await?;
    let active: Vec<&str> = state["active"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    ensure!(
        active.len() == 1 && active[0].ends_with(&format!("?range={key}")),
        "range {key}: the active range links are {active:?}"
    );
    ensure!(
        state["charts"].as_u64().unwrap_or(0) > 0,
        "range {key}: no svg.chart on the page ({state})"
    );
    Ok(())
}

#[tokio::test]
async fn sign_in_browse_to_a_gateway_switch_chart_ranges_and_ping_it() -> Result<()> {
    let Some(binary) = cdp::find_chromium() else {
        if std::env::var("DEVICECLOUD_REQUIRE_BROWSER").as_deref() == Ok("1") {
            panic!("DEVICECLOUD_REQUIRE_BROWSER=1 but no chromium on PATH (Debian: apt-get install chromium)");
        }
        eprintln!(
            "note: no chromium on PATH, the dashboard browser test is skipped (DEVICECLOUD_REQUIRE_BROWSER=1 makes this a failure)"
        );
        return Ok(());
    };
    let started = Instant::now();
    let step = |what: &str| eprintln!("[{:6.2} s] {what}", started.elapsed().as_secs_f64());
    std::fs::create_dir_all(screenshot_dir())?;

    let demo = Demo::start()?;
    step(&format!("demo listening at {}", demo.base));
    let profile = std::env::temp_dir().join(format!("dc-browser-profile-{}", std::process::id()));
    let browser = Chromium::launch(&binary, profile)?;
    let cdp = Arc::new(Cdp::connect(&browser.ws_url).await?);
    let page = cdp.open_page().await?;
    for domain in ["Page", "Runtime", "Log", "Network"] {
        page.call(&format!("{domain}.enable"), json!({})).await?;
    }
    page.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": VIEWPORT.0, "height": VIEWPORT.1, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await?;
    step(&format!("chromium ready at {}", browser.ws_url));
    let mut watch = Watch::default();

    // Sign in through the form; the answer redirects to the fleet overview.
    let base = &demo.base;
    page.goto(
        &format!("{base}/login"),
        "document.querySelector('form[method=post][action=\"/login\"]') !== null",
        PAGE_LOAD,
    )
    .await?;
    watch.check(&page, "the sign-in page")?;
    page.eval(&format!(
        "(() => {{
            const form = document.querySelector('form[action=\"/login\"]');
            form.querySelector('input[name=username]').value = {};
            form.querySelector('input[name=password]').value = {};
        }})()",
        js(ADMIN),
        js(PASSWORD)
    ))
    .await?;
    page.mark_stale().await?;
    page.click(
        "document.querySelector('form[action=\"/login\"] button[type=submit]')",
        "the Sign in button",
    )
    .await?;
    page.wait_for_document(
        "location.pathname === '/' && document.querySelector('a[href^=\"/groups/\"]') !== null",
        PAGE_LOAD,
        "the fleet overview after signing in",
    )
    .await?;
    watch.check(&page, "signing in")?;
    screenshot(&page, "overview").await?;
    step("signed in, fleet overview shown");

    // Fleet → group → a simulated CORE gateway.
    page.mark_stale().await?;
    page.click(
        &format!(
            "[...document.querySelectorAll('a[href^=\"/groups/\"]')].find(a => a.textContent.trim() === {})",
            js(GROUP)
        ),
        &format!("the link of group {GROUP}"),
    )
    .await?;
    page.wait_for_document(
        "location.pathname.startsWith('/groups/') && document.querySelector('a[href^=\"/devices/\"]') !== null",
        PAGE_LOAD,
        "the group page",
    )
    .await?;
    watch.check(&page, "the group page")?;
    screenshot(&page, "group").await?;
    let gateway_row = format!(
        "[...document.querySelectorAll('tbody tr')].find(tr => new RegExp({}).test(tr.querySelector('code')?.textContent ?? ''))",
        js(GATEWAY_SERIAL)
    );
    let serial = page
        .eval(&format!("{gateway_row}?.querySelector('code').textContent"))
        .await?
        .as_str()
        .with_context(|| format!("no gateway matching {GATEWAY_SERIAL} in group {GROUP}"))?
        .to_string();
    page.mark_stale().await?;
    page.click(
        &format!("{gateway_row}?.querySelector('a[href^=\"/devices/\"]')"),
        "the link of a CORE gateway",
    )
    .await?;
    page.wait_for_document(
        "location.pathname.startsWith('/devices/')
            && document.querySelector('form[data-async] input[name=command][value=ping]') !== null
            && document.querySelector('form[data-async] input[name=command][value=status]') !== null",
        PAGE_LOAD,
        "the gateway's page with its command panel (Self-test is offered to gateways only)",
    )
    .await?;
    watch.check(&page, "the gateway page")?;
    step(&format!("gateway {serial} page shown"));

    // The gateway connects and measures right after the demo starts; until then the page says
    // offline and has no chart, so it is reloaded (as a person would) until both are there.
    let ready = "document.querySelector('main > p .status')?.classList.contains('on') === true
        && document.querySelector('svg.chart') !== null";
    let deadline = Instant::now() + FIRST_DATA;
    while page.eval(ready).await? != json!(true) {
        ensure!(
            Instant::now() < deadline,
            "gateway {serial}: not online with a chart within {FIRST_DATA:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        page.reload(PAGE_LOAD).await?;
    }
    watch.check(&page, "waiting for the gateway's data")?;
    check_range(&page, "1d").await.context("the default range")?;
    screenshot(&page, "device-1d").await?;
    step("gateway online, charts drawn at the default range (1 day)");

    // Every range link, clicked, loads its range with that link active and draws charts.
    for key in ["1h", "1w", "3w", "1y", "1d"] {
        page.mark_stale().await?;
        page.click(
            &format!("document.querySelector('nav.ranges a[href$=\"?range={key}\"]')"),
            &format!("the {key} range link"),
        )
        .await?;
        page.wait_for_document(
            &format!("location.search === '?range={key}'"),
            PAGE_LOAD,
            &format!("the device page at range {key}"),
        )
        .await?;
        watch.check(&page, &format!("range {key}"))?;
        check_range(&page, key).await?;
        if key != "1d" {
            screenshot(&page, &format!("device-{key}")).await?;
        }
        step(&format!("range {key}: active link and charts"));
    }

    // Ping: the script posts the form and writes the answer in place, without a new page.
    let result = "document.getElementById('command-result')";
    ensure!(
        page.eval(&format!("{result}.textContent.trim()")).await? == json!(""),
        "#command-result is not empty before the ping"
    );
    page.mark_stale().await?;
    page.click(
        "document.querySelector('form[data-async]:has(input[name=command][value=ping]) button[type=submit]')",
        "the Ping button",
    )
    .await?;
    page.wait_until(
        &format!("{result}.textContent.includes('pong')"),
        PING,
        "the ping answer in #command-result",
    )
    .await?;
    let answer = page.eval(&format!("{result}.innerHTML")).await?;
    let answer = answer.as_str().unwrap_or_default();
    ensure!(answer.contains("ping</strong>: done"), "ping answer: {answer}");
    ensure!(
        page.eval("window.__devicecloudStale === true").await? == json!(true),
        "the ping left the page instead of answering in place"
    );
    watch.check(&page, "the ping")?;
    page.eval(&format!("{result}.scrollIntoView({{block: 'center'}})"))
        .await?;
    screenshot(&page, "device-ping").await?;
    step("ping answered with pong in place");

    // The live stream: open on the page, it brought the ping's outcome, and the gateway's next
    // values replace the latest ones in place (the highlight is the stream's doing only; the
    // page was not reloaded).
    page.wait_until(
        "document.querySelector('[data-live]')?.dataset.liveState === 'open'",
        PAGE_LOAD,
        "the device page's live stream open",
    )
    .await?;
    page.wait_until(
        "[...document.querySelectorAll('[data-live-commands]:not([hidden]) li')].some(li => li.textContent.includes('ping'))",
        PING,
        "the ping's outcome in the live command outcomes",
    )
    .await?;
    let measured =
        "JSON.stringify([...document.querySelectorAll('#latest tr[data-datatype] .measured')].map(td => td.title))";
    let before = page.eval(measured).await?;
    page.wait_until(
        &format!("document.querySelector('#latest tr.fresh') !== null && {measured} !== {before}"),
        FIRST_DATA,
        "a value published meanwhile in the latest values, without a reload",
    )
    .await?;
    ensure!(
        page.eval("window.__devicecloudStale === true").await? == json!(true),
        "the page was reloaded while waiting for live values"
    );
    watch.check(&page, "the live stream")?;
    screenshot(&page, "device-live").await?;
    step("live stream: the ping's outcome and new values shown in place");

    // The API reference, from the header: Swagger UI under its own policy, every operation of
    // the document listed, and "Try it out" answered with a token from /oauth2/token.
    page.mark_stale().await?;
    page.click(
        "document.querySelector('header.top a[href=\"/api/docs\"]')",
        "the header's API link",
    )
    .await?;
    page.wait_for_document(
        "location.pathname === '/api/docs' && document.querySelectorAll('.opblock').length > 20",
        PAGE_LOAD,
        "the API reference with its operations",
    )
    .await?;
    watch.check(&page, "the API reference")?;
    screenshot(&page, "api-docs").await?;
    let token = page
        .eval(&format!(
            "fetch('/oauth2/token', {{method: 'POST', body: new URLSearchParams({{grant_type: 'password',
                client_id: {}, client_secret: {}, username: {}, password: {}}})}})
                .then(r => r.json()).then(j => j.access_token)",
            js(&demo.client.0),
            js(&demo.client.1),
            js(ADMIN),
            js(PASSWORD)
        ))
        .await?;
    let token = token.as_str().context("no access_token from /oauth2/token")?;
    // What the Authorize dialog does with a pasted token.
    page.eval(&format!("window.ui.preauthorizeApiKey('bearer', {})", js(token)))
        .await?;
    let operation = "document.getElementById('operations-groups-groups_index')";
    page.click(
        &format!("{operation}.querySelector('.opblock-summary-control')"),
        "the summary of GET /api/v2/group/index",
    )
    .await?;
    page.wait_until(
        &format!("{operation}.querySelector('.try-out__btn') !== null"),
        PAGE_LOAD,
        "the operation's Try it out button",
    )
    .await?;
    page.click(&format!("{operation}.querySelector('.try-out__btn')"), "Try it out")
        .await?;
    page.wait_until(
        &format!("{operation}.querySelector('button.execute') !== null"),
        PAGE_LOAD,
        "the Execute button",
    )
    .await?;
    page.click(&format!("{operation}.querySelector('button.execute')"), "Execute")
        .await?;
    page.wait_until(
        &format!(
            "[...{operation}.querySelectorAll('.live-responses-table tbody .response-col_status')].some(c => c.textContent.trim() === '200')
                && {operation}.querySelector('.live-responses-table').innerText.includes({})",
            js(GROUP)
        ),
        PAGE_LOAD,
        "a 200 answer listing the demo's groups under Try it out",
    )
    .await?;
    watch.check(&page, "Try it out")?;
    screenshot(&page, "api-docs-try-it-out").await?;
    step("API reference shown, Try it out answered 200 with the bearer token");

    watch.check(&page, "the end")?;
    let shots = std::fs::canonicalize(screenshot_dir()).unwrap_or_else(|_| screenshot_dir());
    step(&format!("screenshots in {}", shots.display()));
    Ok(())
}
