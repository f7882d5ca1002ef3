//! The server under test: a `devicecloud serve` child process on loopback, stopped (or killed)
//! by the benchmark, and the admin, token and provisioning calls every benchmark needs.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The `devicecloud` executable every server under test runs, set once by [`locate`].
static SERVER_BIN: OnceLock<PathBuf> = OnceLock::new();

/// Finds the `devicecloud` executable: `path` when given (`--server-bin`, or
/// `DEVICECLOUD_BENCH_SERVER_BIN`), otherwise the file `devicecloud` next to this executable,
/// which is where cargo puts it when both packages are built into the same target directory
/// (`cargo build --release -p devicecloud -p devicecloud-bench`). Fails at once, before any
/// benchmark starts, when there is no such file.
pub fn locate(path: Option<PathBuf>) -> Result<&'static Path> {
    let path = match path {
        Some(path) => path,
        None => std::env::current_exe()
            .context("cannot find this executable's directory")?
            .with_file_name(format!("devicecloud{}", std::env::consts::EXE_SUFFIX)),
    };
    let path = std::fs::canonicalize(&path).with_context(|| {
        format!(
            "no devicecloud executable at {}: build it beside this one (cargo build --release -p devicecloud \
             -p devicecloud-bench) or name it with --server-bin or DEVICECLOUD_BENCH_SERVER_BIN",
            path.display()
        )
    })?;
    Ok(SERVER_BIN.get_or_init(|| path))
}

/// The executable found by [`locate`].
fn server_bin() -> Result<&'static Path> {
    SERVER_BIN
        .get()
        .map(PathBuf::as_path)
        .context("the devicecloud executable was not located")
}

/// A running `devicecloud serve`; killed if dropped.
pub struct ServerUnderTest {
    child: Child,
    pub base: String,
    pub mqtt: std::net::SocketAddr,
    pub data_dir: PathBuf,
    pub database_url: Option<String>,
}

impl ServerUnderTest {
    /// A server on a fresh data dir (and `database_url`, which must name an empty database).
    pub async fn start(database_url: Option<String>) -> Result<ServerUnderTest> {
        ServerUnderTest::start_with(database_url, &[]).await
    }

    /// [`ServerUnderTest::start`] with more `DEVICECLOUD_*` settings for the server.
    pub async fn start_with(database_url: Option<String>, env: &[(&str, &str)]) -> Result<ServerUnderTest> {
        let data_dir = std::env::temp_dir().join(format!("devicecloud-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&data_dir);
        std::fs::create_dir_all(&data_dir)?;
        ServerUnderTest::launch(data_dir, database_url, env).await
    }

    /// A server on an existing data dir (a restart).
    pub async fn start_in(data_dir: PathBuf, database_url: Option<String>) -> Result<ServerUnderTest> {
        ServerUnderTest::launch(data_dir, database_url, &[]).await
    }

    async fn launch(data_dir: PathBuf, database_url: Option<String>, env: &[(&str, &str)]) -> Result<ServerUnderTest> {
        let mut command = Command::new(server_bin()?);
        command.envs(env.iter().copied());
        command
            .arg("serve")
            .env("DEVICECLOUD_DATA_DIR", &data_dir)
            .env("DEVICECLOUD_HTTP_ADDR", "127.0.0.1:0")
            .env("DEVICECLOUD_MQTT_ADDR", "127.0.0.1:0")
            .env("DEVICECLOUD_LOG", "warn")
            // Webhook benchmarks deliver to a receiver on loopback.
            .env("DEVICECLOUD_WEBHOOK_ALLOW_PRIVATE", "1");
        if let Some(url) = &database_url {
            command.env("DEVICECLOUD_DATABASE_URL", url);
        }
        // The benchmarks measure capacity: one account sends far more than the default rate
        // limit allows, so the limit is set out of reach. The limiter still counts every
        // request, so its cost is measured. `DEVICECLOUD_RATE_LIMIT` in the environment wins.
        if std::env::var_os("DEVICECLOUD_RATE_LIMIT").is_none() {
            command.env("DEVICECLOUD_RATE_LIMIT", "1000000000/60");
        }
        // Likewise every client of a benchmark connects from 127.0.0.1: thousands of gateways
        // from one address are past the limit per address, which the abuse benchmark keeps.
        let per_address = "DEVICECLOUD_CONNECTIONS_PER_ADDRESS";
        if std::env::var_os(per_address).is_none() && !env.iter().any(|(k, _)| *k == per_address) {
            command.env(per_address, "1000000");
        }
        let mut child = command.stdout(Stdio::piped()).kill_on_drop(true).spawn()?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .context("server did not start in 60 s")??
            .context("server exited")?;
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .map(str::to_string)
        };
        let http = field("http=").context("no http= in the start line")?;
        let mqtt = field("mqtt=").context("no mqtt= in the start line")?.parse()?;
        Ok(ServerUnderTest {
            child,
            base: format!("http://{http}"),
            mqtt,
            data_dir,
            database_url,
        })
    }

    /// The URL of the server's store: its PostgreSQL database, or its SQLite file.
    pub fn store_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.clone(),
            None => format!("sqlite://{}", self.data_dir.join("devicecloud.db").display()),
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Runs `devicecloud admin …` against the same store.
    pub async fn admin(&self, args: &[&str]) -> Result<Value> {
        let mut command = Command::new(server_bin()?);
        command
            .arg("admin")
            .args(args)
            .env("DEVICECLOUD_DATA_DIR", &self.data_dir)
            .env("DEVICECLOUD_LOG", "warn");
        if let Some(url) = &self.database_url {
            command.env("DEVICECLOUD_DATABASE_URL", url);
        }
        let out = command.output().await?;
        if !out.status.success() {
            bail!("admin {:?} failed: {}", args, String::from_utf8_lossy(&out.stderr));
        }
        Ok(serde_json::from_slice(&out.stdout)?)
    }

    /// An API client, an administrator, and the administrator's token.
    pub async fn administrator(&self, http: &reqwest::Client) -> Result<(Value, String)> {
        let client = self.admin(&["create-client", "--name", "bench"]).await?;
        self.admin(&[
            "create-user",
            "--username",
            "admin@bench.local",
            "--password",
            "bench-password",
            "--admin",
        ])
        .await?;
        let token = token(http, &self.base, &client, "admin@bench.local", "bench-password").await?;
        Ok((client, token))
    }

    /// Stops the server cleanly and starts it again on the same store with more `DEVICECLOUD_*`
    /// settings.
    pub async fn restart_with(self, env: &[(&str, &str)]) -> Result<ServerUnderTest> {
        let (data_dir, database_url) = (self.data_dir.clone(), self.database_url.clone());
        self.stop(true).await;
        ServerUnderTest::launch(data_dir, database_url, env).await
    }

    /// SIGTERM, then waits for the exit; the data dir is removed unless `keep`.
    pub async fn stop(mut self, keep: bool) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
        }
        let _ = tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await;
        if !keep {
            let _ = std::fs::remove_dir_all(&self.data_dir);
        }
    }

    /// SIGKILL: the process gets no chance to finish anything.
    pub async fn kill(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// The JSON answer to `request`, which must succeed (2xx): the benchmarks' set-up calls.
pub async fn json(request: reqwest::RequestBuilder) -> Result<Value> {
    Ok(request.send().await?.error_for_status()?.json().await?)
}

/// A password-grant access token.
pub async fn token(
    http: &reqwest::Client,
    base: &str,
    client: &Value,
    username: &str,
    password: &str,
) -> Result<String> {
    let form = [
        ("grant_type", "password"),
        ("client_id", client["client_id"].as_str().unwrap_or_default()),
        ("client_secret", client["client_secret"].as_str().unwrap_or_default()),
        ("username", username),
        ("password", password),
    ];
    let body: Value = json(http.post(format!("{base}/oauth2/token")).form(&form)).await?;
    body["access_token"]
        .as_str()
        .map(str::to_string)
        .context("no access_token")
}

/// A provisioned gateway: id, serial and device token.
#[derive(Clone, Debug)]
pub struct GatewayCredentials {
    pub id: String,
    pub serial: String,
    pub token: String,
}

/// Provisions `count` CORE gateways in a new group, `concurrency` requests at a time.
pub async fn provision(
    http: &reqwest::Client,
    base: &str,
    admin: &str,
    prefix: &str,
    count: usize,
) -> Result<Vec<GatewayCredentials>> {
    Ok(provision_group(http, base, admin, prefix, count).await?.1)
}

/// [`provision`], also returning the new group's id.
pub async fn provision_group(
    http: &reqwest::Client,
    base: &str,
    admin: &str,
    prefix: &str,
    count: usize,
) -> Result<(String, Vec<GatewayCredentials>)> {
    let group: Value = json(
        http.post(format!("{base}/api/v2/group"))
            .bearer_auth(admin)
            .json(&json!({"label": format!("{prefix} fleet")})),
    )
    .await?;
    let id_group = group["id_group"].as_str().context("no id_group")?.to_string();
    let mut out = Vec::with_capacity(count);
    for chunk in (0..count).collect::<Vec<_>>().chunks(16) {
        let mut tasks = Vec::new();
        for i in chunk {
            let (http, base, admin, id_group) = (http.clone(), base.to_string(), admin.to_string(), id_group.clone());
            let serial = format!("{prefix}-{i:05}");
            tasks.push(tokio::spawn(async move {
                let body = json!({"id_group": id_group, "serial_hardware": serial, "kind": "CORE"});
                let device: Value = json(
                    http.post(format!("{base}/api/v2/physical-device"))
                        .bearer_auth(&admin)
                        .json(&body),
                )
                .await?;
                anyhow::Ok(GatewayCredentials {
                    id: device["id_physical_device"].as_str().unwrap_or_default().to_string(),
                    serial,
                    token: device["device_token"].as_str().unwrap_or_default().to_string(),
                })
            }));
        }
        for task in tasks {
            out.push(task.await??);
        }
    }
    Ok((id_group, out))
}

/// CPU seconds (user and system) a process used so far, from `/proc/<pid>/stat` (in clock
/// ticks of 1/100 s, Linux's `USER_HZ`).
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("no command name")?
        .1
        .split_whitespace()
        .collect();
    let ticks = |i: usize| -> Result<f64> { Ok(fields.get(i).context("short stat")?.parse::<f64>()?) };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}

/// Resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS")
}

/// Percentile `p` (0 to 1) of sorted durations, in milliseconds; NaN without any.
pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// The sum of the lines of the server's `/metrics` that start with `prefix` (a metric's name,
/// with the start of its labels to pick one series), 0 when there is none.
pub async fn metric(http: &reqwest::Client, base: &str, prefix: &str) -> Result<f64> {
    let text = http.get(format!("{base}/metrics")).send().await?.text().await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}
