//! A small Chrome DevTools Protocol client: starts a headless Chromium on a throwaway profile,
//! speaks CDP over its loopback WebSocket, and drives one page through a flattened session.
//!
//! Only what the dashboard test needs is here: commands with bounded answers, a log of every
//! event (the test decides which are failures), script evaluation, waits that poll a condition
//! until a deadline, real mouse clicks at an element's centre, and PNG screenshots. A browser
//! automation crate would bring a large dependency tree and its own browser download; Debian's
//! Chromium and a few hundred lines are enough.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long Chromium may take to print its DevTools address.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one CDP command may take to be answered.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(20);
/// How many of Chromium's last stderr lines a launch failure shows.
const STDERR_TAIL: usize = 40;

/// The Chromium binary on `PATH` (Debian names it `chromium`, some distributions
/// `chromium-browser`), if any.
pub fn find_chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// A running headless Chromium. Dropping it kills the browser's whole process group (the
/// renderer and GPU processes too) and removes the profile.
pub struct Chromium {
    child: Child,
    profile: PathBuf,
    /// Chromium's latest stderr lines, for failure messages.
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// The browser's DevTools WebSocket address.
    pub ws_url: String,
}

impl Chromium {
    /// Starts `binary` headless with a fresh profile in `profile` and waits (bounded) for the
    /// `DevTools listening on ws://…` line; port 0 lets Chromium pick a free loopback port.
    pub fn launch(binary: &Path, profile: PathBuf) -> Result<Chromium> {
        let _ = std::fs::remove_dir_all(&profile);
        std::fs::create_dir_all(&profile).with_context(|| format!("cannot create {}", profile.display()))?;
        let mut command = Command::new(binary);
        command
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // Its own process group, so that one signal ends the browser and its helpers.
            .process_group(0);
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let (address_tx, address_rx) = mpsc::channel();
        let pipe = child.stderr.take().expect("stderr is piped");
        let tail = Arc::clone(&stderr);
        // Reads stderr to its end: the address is sent once, and the pipe never fills up
        // (a full pipe would block the browser).
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = address_tx.send(url.trim().to_string());
                }
                let mut tail = tail.lock().unwrap();
                if tail.len() == STDERR_TAIL {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        });
        let mut chromium = Chromium {
            child,
            profile,
            stderr,
            ws_url: String::new(),
        };
        match address_rx.recv_timeout(LAUNCH_TIMEOUT) {
            Ok(url) => chromium.ws_url = url,
            Err(mpsc::RecvTimeoutError::Timeout) => bail!(
                "Chromium printed no DevTools address within {LAUNCH_TIMEOUT:?}; stderr:\n{}",
                chromium.stderr_tail()
            ),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = chromium.child.wait().ok();
                bail!(
                    "Chromium exited ({status:?}) before printing its DevTools address; stderr:\n{}",
                    chromium.stderr_tail()
                )
            }
        }
        Ok(chromium)
    }

    /// The last lines Chromium wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        Vec::from(self.stderr.lock().unwrap().clone()).join("\n")
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Helpers may still be closing files in the profile for a moment.
        for _ in 0..20 {
            if std::fs::remove_dir_all(&self.profile).is_ok() || !self.profile.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// What the reader task shares with the callers.
#[derive(Default)]
struct Shared {
    /// Callers waiting for the answer to a command, by id.
    pending: Mutex<HashMap<u64, oneshot::Sender<Value>>>,
    /// Every event received, in order.
    events: Mutex<Vec<Value>>,
}

/// A CDP connection to the browser endpoint.
pub struct Cdp {
    sink: tokio::sync::Mutex<SplitSink<Socket, Message>>,
    next_id: AtomicU64,
    shared: Arc<Shared>,
    reader: tokio::task::JoinHandle<()>,
}

impl Cdp {
    /// Connects to a browser's `ws://127.0.0.1:…/devtools/browser/…` address.
    pub async fn connect(ws_url: &str) -> Result<Cdp> {
        if !ws_url.starts_with("ws://127.0.0.1:") {
            bail!("refusing a DevTools address off the loopback interface: {ws_url}");
        }
        let (socket, _) = tokio::time::timeout(COMMAND_TIMEOUT, tokio_tungstenite::connect_async(ws_url))
            .await
            .with_context(|| format!("no WebSocket handshake with {ws_url} within {COMMAND_TIMEOUT:?}"))?
            .with_context(|| format!("cannot connect to {ws_url}"))?;
        let (sink, mut stream) = socket.split();
        let shared = Arc::new(Shared::default());
        let reading = Arc::clone(&shared);
        let reader = tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                let Message::Text(text) = message else { continue };
                let Ok(value) = serde_json::from_str::<Value>(text.as_str()) else {
                    continue;
                };
                match value.get("id").and_then(Value::as_u64) {
                    Some(id) => {
                        if let Some(waiter) = reading.pending.lock().unwrap().remove(&id) {
                            let _ = waiter.send(value);
                        }
                    }
                    None => reading.events.lock().unwrap().push(value),
                }
            }
            // The connection is gone: every caller still waiting gets an error at once.
            reading.pending.lock().unwrap().clear();
        });
        Ok(Cdp {
            sink: tokio::sync::Mutex::new(sink),
            next_id: AtomicU64::new(1),
            shared,
            reader,
        })
    }

    /// Sends a command (to a page's session when `session` is given) and returns its `result`;
    /// a CDP error, a closed connection or no answer within [`COMMAND_TIMEOUT`] is an error.
    pub async fn call(&self, session: Option<&str>, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let (answer_tx, answer_rx) = oneshot::channel();
        self.shared.pending.lock().unwrap().insert(id, answer_tx);
        self.sink
            .lock()
            .await
            .send(Message::text(message.to_string()))
            .await
            .with_context(|| format!("cannot send {method}"))?;
        let answer = match tokio::time::timeout(COMMAND_TIMEOUT, answer_rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => bail!("{method}: the DevTools connection closed"),
            Err(_) => {
                self.shared.pending.lock().unwrap().remove(&id);
                bail!("{method}: no answer within {COMMAND_TIMEOUT:?}")
            }
        };
        if let Some(error) = answer.get("error") {
            bail!("{method}: {error}");
        }
        Ok(answer.get("result").cloned().unwrap_or(Value::Null))
    }

    /// The events received since the first `from`, and the count to pass next time.
    pub fn events_since(&self, from: usize) -> (Vec<Value>, usize) {
        let events = self.shared.events.lock().unwrap();
        let from = from.min(events.len());
        (events[from..].to_vec(), events.len())
    }

    /// Opens a new tab and attaches to it with a flattened session (its commands and events
    /// travel on this connection, tagged with the session id).
    pub async fn open_page(self: &Arc<Self>) -> Result<Page> {
        let target = self
            .call(None, "Target.createTarget", json!({"url": "about:blank"}))
            .await?;
        let target_id = target["targetId"]
            .as_str()
            .context("Target.createTarget: no targetId")?;
        let attached = self
            .call(
                None,
                "Target.attachToTarget",
                json!({"targetId": target_id, "flatten": true}),
            )
            .await?;
        let session = attached["sessionId"]
            .as_str()
            .context("Target.attachToTarget: no sessionId")?
            .to_string();
        Ok(Page {
            cdp: Arc::clone(self),
            session,
        })
    }
}

impl Drop for Cdp {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// One tab, driven through its session.
pub struct Page {
    cdp: Arc<Cdp>,
    pub session: String,
}

/// Set on a document before an action that should replace it; a new document lacks it.
const STALE_MARK: &str = "window.__devicecloudStale";

impl Page {
    pub async fn call(&self, method: &str, params: Value) -> Result<Value> {
        self.cdp.call(Some(&self.session), method, params).await
    }

    /// Evaluates `expression` in the page (awaiting a promise) and returns its value; a
    /// thrown exception is an error carrying the page's description of it.
    pub async fn eval(&self, expression: &str) -> Result<Value> {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await?;
        if let Some(details) = result.get("exceptionDetails") {
            let text = details["exception"]["description"]
                .as_str()
                .or_else(|| details["text"].as_str())
                .unwrap_or("exception");
            bail!("{expression}: {text}");
        }
        Ok(result["result"].get("value").cloned().unwrap_or(Value::Null))
    }

    /// Polls `condition` (a script expression) every 100 ms until it is `true`; fails after
    /// `timeout` naming `what` and the last value or error seen. Evaluation errors count as
    /// "not yet": during a navigation the old document's context goes away mid-call.
    pub async fn wait_until(&self, condition: &str, timeout: Duration, what: &str) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.eval(condition).await {
                Ok(Value::Bool(true)) => return Ok(()),
                Ok(other) => format!("value {other}"),
                Err(e) => format!("error {e:#}"),
            };
            if Instant::now() >= deadline {
                bail!("{what}: not within {timeout:?} (last: {last})");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Marks the current document so that [`Page::wait_for_document`] can tell a new one.
    pub async fn mark_stale(&self) -> Result<()> {
        self.eval(&format!("{STALE_MARK} = true")).await.map(drop)
    }

    /// Waits for a document loaded after [`Page::mark_stale`] that is complete and satisfies
    /// `condition`.
    pub async fn wait_for_document(&self, condition: &str, timeout: Duration, what: &str) -> Result<()> {
        let check = format!("!{STALE_MARK} && document.readyState === 'complete' && ({condition})");
        self.wait_until(&check, timeout, what).await
    }

    /// Loads `url` and waits for the document to be complete and satisfy `condition`.
    pub async fn goto(&self, url: &str, condition: &str, timeout: Duration) -> Result<()> {
        self.mark_stale().await?;
        let answer = self.call("Page.navigate", json!({"url": url})).await?;
        if let Some(error) = answer.get("errorText").and_then(Value::as_str) {
            bail!("navigating to {url}: {error}");
        }
        self.wait_for_document(condition, timeout, &format!("loading {url}"))
            .await
    }

    /// Reloads the page and waits for the new document to be complete.
    pub async fn reload(&self, timeout: Duration) -> Result<()> {
        self.mark_stale().await?;
        self.call("Page.reload", json!({})).await?;
        self.wait_for_document("true", timeout, "reloading").await
    }

    /// Clicks the element that `element` (a script expression) yields, as a person would: it
    /// is scrolled into view and the mouse is pressed and released at its centre. Fails when
    /// the element is absent or something else covers that point.
    pub async fn click(&self, element: &str, what: &str) -> Result<()> {
        let locate = format!(
            "(() => {{
                const e = {element};
                if (!e) return null;
                e.scrollIntoView({{block: 'center', inline: 'center'}});
                const r = e.getBoundingClientRect();
                const x = r.left + r.width / 2, y = r.top + r.height / 2;
                const hit = document.elementFromPoint(x, y);
                return {{x, y, hit: hit !== null && (e === hit || e.contains(hit)), at: hit ? hit.outerHTML.slice(0, 120) : null}};
            }})()"
        );
        let spot = self.eval(&locate).await?;
        if spot.is_null() {
            bail!("{what}: no such element on the page");
        }
        if spot["hit"] != json!(true) {
            bail!("{what}: covered by {}", spot["at"]);
        }
        let (x, y) = (spot["x"].clone(), spot["y"].clone());
        // `buttons` is the state after each event: only while pressed is the left one down.
        let steps = [
            ("mouseMoved", "none", 0),
            ("mousePressed", "left", 1),
            ("mouseReleased", "left", 0),
        ];
        for (kind, button, buttons) in steps {
            self.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": button, "buttons": buttons, "clickCount": 1}),
            )
            .await
            .with_context(|| what.to_string())?;
        }
        Ok(())
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Result<Vec<u8>> {
        let shot = self.call("Page.captureScreenshot", json!({"format": "png"})).await?;
        let data = shot["data"]
            .as_str()
            .ok_or_else(|| anyhow!("Page.captureScreenshot: no data"))?;
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .context("Page.captureScreenshot: bad base64")
    }

    /// The events received since `from` (see [`Cdp::events_since`]), for this page's session.
    pub fn events_since(&self, from: usize) -> (Vec<Value>, usize) {
        let (events, next) = self.cdp.events_since(from);
        let mine = events
            .into_iter()
            .filter(|e| e["sessionId"].as_str() == Some(self.session.as_str()))
            .collect();
        (mine, next)
    }
}
