//! What the tests of the binary share: a data dir, a store (SQLite in the data dir, or a
//! PostgreSQL database), its `admin` commands, and `serve` processes on it with their addresses,
//! an administrator's token and a clean stop.

// Each test binary uses a part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub mod cluster;

pub const BIN: &str = env!("CARGO_BIN_EXE_devicecloud");
pub const ADMIN: &str = "ops@example.com";
pub const PASSWORD: &str = "long-password";

pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(name: &str) -> Dir {
        let path = std::env::temp_dir().join(format!("dc-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Dir(path)
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where a store is: a data dir, and a PostgreSQL database when one is named.
#[derive(Clone)]
pub struct Store {
    pub data_dir: PathBuf,
    pub database_url: Option<String>,
    /// More `DEVICECLOUD_*` settings of its processes.
    pub env: Vec<(&'static str, String)>,
}

impl Store {
    pub fn sqlite(dir: &Dir) -> Store {
        Store {
            data_dir: dir.0.clone(),
            database_url: None,
            env: Vec::new(),
        }
    }

    pub fn url(&self) -> String {
        self.database_url
            .clone()
            .unwrap_or_else(|| format!("sqlite://{}", self.data_dir.join("devicecloud.db").display()))
    }

    pub fn command(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DEVICECLOUD_DATA_DIR", &self.data_dir)
            .env("DEVICECLOUD_LOG", "warn")
            .env("DEVICECLOUD_HTTP_ADDR", "127.0.0.1:0")
            .env("DEVICECLOUD_MQTT_ADDR", "127.0.0.1:0")
            .kill_on_drop(true);
        if let Some(url) = &self.database_url {
            c.env("DEVICECLOUD_DATABASE_URL", url);
        }
        c.envs(self.env.iter().map(|(k, v)| (*k, v.as_str())));
        c
    }

    /// Runs `admin ARGS`: its JSON on success, its standard error on failure.
    pub async fn admin(&self, args: &[&str]) -> Result<Value, String> {
        let out = self.command().arg("admin").args(args).output().await.unwrap();
        if out.status.success() {
            Ok(serde_json::from_slice(&out.stdout).unwrap())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    pub async fn admin_ok(&self, args: &[&str]) -> Value {
        self.admin(args)
            .await
            .unwrap_or_else(|e| panic!("admin {args:?} failed: {e}"))
    }

    pub async fn admin_refused(&self, args: &[&str]) -> String {
        match self.admin(args).await {
            Ok(out) => panic!("admin {args:?} must fail, printed {out}"),
            Err(e) => e,
        }
    }

    /// An administrator and an API client, as an operator bootstraps a store.
    pub async fn bootstrap(&self) -> Credentials {
        let client = self.admin_ok(&["create-client", "--name", "backup-test"]).await;
        self.admin_ok(&["create-user", "--username", ADMIN, "--password", PASSWORD, "--admin"])
            .await;
        Credentials {
            client_id: client["client_id"].as_str().unwrap().to_string(),
            client_secret: client["client_secret"].as_str().unwrap().to_string(),
        }
    }

    /// Starts `serve` and waits for its `listening` line.
    pub async fn serve(&self) -> Serve {
        let mut child = self
            .command()
            .arg("serve")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .await
            .unwrap();
        let addr = |key: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .unwrap_or_else(|| panic!("no {key} in {line:?}"))
                .parse()
                .unwrap()
        };
        Serve {
            http: addr("http="),
            mqtt: addr("mqtt="),
            child,
        }
    }
}

pub struct Credentials {
    pub client_id: String,
    pub client_secret: String,
}

pub struct Serve {
    pub http: std::net::SocketAddr,
    pub mqtt: std::net::SocketAddr,
    pub child: Child,
}

impl Serve {
    pub fn base(&self) -> String {
        format!("http://{}", self.http)
    }

    /// A bearer token of the administrator.
    pub async fn token(&self, credentials: &Credentials) -> String {
        self.token_of(credentials, ADMIN).await
    }

    /// A bearer token of the account `username` (password [`PASSWORD`]).
    pub async fn token_of(&self, credentials: &Credentials, username: &str) -> String {
        let answer: Value = reqwest::Client::new()
            .post(format!("{}/oauth2/token", self.base()))
            .form(&[
                ("grant_type", "password"),
                ("client_id", &credentials.client_id),
                ("client_secret", &credentials.client_secret),
                ("username", username),
                ("password", PASSWORD),
            ])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token: {answer}"))
            .to_string()
    }

    /// The JSON answer of `method path` as `token`.
    pub async fn json(&self, method: reqwest::Method, token: &str, path: &str) -> Value {
        reqwest::Client::new()
            .request(method, format!("{}{path}", self.base()))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// `X-Pagination-Total-Count` of a collection.
    pub async fn total(&self, token: &str, path: &str) -> i64 {
        let answer = reqwest::Client::new()
            .get(format!("{}{path}", self.base()))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{path}");
        answer.headers()["x-pagination-total-count"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// SIGTERM, and the exit code 0 within 20 s.
    pub async fn stop(mut self) {
        let pid = self.child.id().unwrap().to_string();
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("serve did not stop within 20 s of SIGTERM")
            .unwrap();
        assert!(status.success(), "serve exited {status}");
    }
}

/// A new database on the test server; its URL.
pub async fn fresh_postgres(base: &str, tag: &str) -> String {
    let name = format!("dc_test_{tag}_{}", std::process::id());
    let admin = sqlx::PgPool::connect(base).await.unwrap();
    for sql in [
        format!("DROP DATABASE IF EXISTS {name}"),
        format!("CREATE DATABASE {name}"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&admin).await.unwrap();
    }
    admin.close().await;
    let (server, _) = base
        .rsplit_once('/')
        .expect("DEVICECLOUD_TEST_DATABASE_URL must end with /<database>");
    format!("{server}/{name}")
}
