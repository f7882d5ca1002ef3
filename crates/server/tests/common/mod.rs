//! `TestApp`: the real service on a real database, served over real HTTP on a loopback port.
//!
//! SQLite (a fresh file) by default; PostgreSQL when `DEVICECLOUD_TEST_DATABASE_URL` names a
//! server, each test then getting a fresh database of its own.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};

use devicecloud_engine::auth::secrets::{hash_password, random_token, token_hash};
use devicecloud_server::{AppState, Listeners, Running, Settings};
use devicecloud_store::{Db, accounts, clients, unix_now};
use reqwest::{Method, RequestBuilder, Response};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub mod browser;
pub mod gateway_client;
pub mod jobs;
pub mod sse;
pub mod webhook_receiver;

/// The keys of a physical-device record, in the specification's order.
pub const DEVICE_FIELDS: [&str; 24] = [
    "id_physical_device",
    "serial_hardware",
    "label",
    "id_parent",
    "id_group",
    "id_device_type",
    "id_iot_device",
    "is_connected",
    "expected_offline_interval",
    "expected_live_status",
    "device_status",
    "connection",
    "created_at",
    "last_data_at",
    "signal",
    "commissioned_at",
    "calibrated_at",
    "reconnected_at",
    "platform_software_version",
    "app_software_version",
    "archived_serial",
    "archived_at",
    "archived_by",
    "_links",
];

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A running service and an HTTP client for it.
pub struct TestApp {
    pub base: String,
    /// The MQTT endpoint (loopback, port chosen at start).
    pub mqtt_addr: std::net::SocketAddr,
    pub http: reqwest::Client,
    pub state: AppState,
    pub client_id: String,
    pub client_secret: String,
    shutdown: CancellationToken,
    pub running: Running,
    /// Where the store is, for a restart.
    db_url: String,
    _dir: TempDir,
}

/// A directory removed on drop.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    /// A fresh directory of this test process.
    pub fn new() -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "dc-test-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // An empty path: the directory was handed to a restarted service.
        if !self.0.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Opens a fresh store: SQLite in `dir`, or a new PostgreSQL database.
pub async fn fresh_db(dir: &std::path::Path) -> Db {
    Db::connect(&fresh_db_url(dir).await)
        .await
        .expect("open the test store")
}

/// The address of a fresh store: an SQLite file in `dir`, or a new PostgreSQL database.
pub async fn fresh_db_url(dir: &std::path::Path) -> String {
    match std::env::var("DEVICECLOUD_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
    {
        Some(base) => {
            let name = format!(
                "dc_test_{}_{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            );
            let admin = sqlx::PgPool::connect(&base)
                .await
                .expect("connect to DEVICECLOUD_TEST_DATABASE_URL");
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&admin)
                .await
                .expect("create test database");
            admin.close().await;
            match base.rsplit_once('/') {
                Some((server, _)) => format!("{server}/{name}"),
                None => panic!("DEVICECLOUD_TEST_DATABASE_URL must end with /<database>"),
            }
        }
        None => format!("sqlite://{}", dir.join("test.db").display()),
    }
}

impl TestApp {
    pub async fn spawn() -> TestApp {
        TestApp::spawn_with(Settings::default()).await
    }

    pub async fn spawn_with(settings: Settings) -> TestApp {
        let dir = TempDir::new();
        let db_url = fresh_db_url(&dir.0).await;
        TestApp::start(dir, db_url, settings, None).await
    }

    /// The service as `serve` starts it on the store at `db_url`: the same listeners and
    /// background tasks. Registers an API client unless `client` names one already stored.
    pub async fn start(dir: TempDir, db_url: String, settings: Settings, client: Option<(String, String)>) -> TestApp {
        let db = Db::connect(&db_url).await.expect("open the test store");
        let listeners = Listeners {
            http: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
            mqtt: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
            mqtts: None,
        };
        let running = Running::start(db.clone(), settings, listeners).unwrap();
        let (state, shutdown) = (running.state.clone(), running.shutdown_token());
        let base = format!("http://{}", running.addresses.http);
        let mqtt_addr = running.addresses.mqtt;
        let (client_id, client_secret) = match client {
            Some(client) => client,
            None => {
                let (id, secret) = (devicecloud_store::new_id(), random_token());
                clients::create(&db, &id, "tests", &token_hash(&secret), unix_now())
                    .await
                    .unwrap();
                (id, secret)
            }
        };
        TestApp {
            base,
            mqtt_addr,
            http: reqwest::Client::new(),
            state,
            client_id,
            client_secret,
            shutdown,
            running,
            db_url,
            _dir: dir,
        }
    }

    /// Stops this service and starts a new one on the same store (and data directory) with
    /// `settings`, as a restart of `serve` does; tokens and the API client stay valid.
    pub async fn restart(mut self, settings: Settings) -> TestApp {
        self.stop();
        // The lanes and listeners end on the cancellation; give them a moment.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let dir = std::mem::replace(&mut self._dir, TempDir(std::path::PathBuf::new()));
        let client = (self.client_id.clone(), self.client_secret.clone());
        TestApp::start(dir, self.db_url.clone(), settings, Some(client)).await
    }

    /// The data directory of this service (a fresh one per test).
    pub fn dir(&self) -> &std::path::Path {
        &self._dir.0
    }

    /// Starts the TLS listener of the gateway endpoint beside the plain one (loopback, port
    /// chosen here), stopped with the app.
    pub async fn start_mqtts(&self, acceptor: devicecloud_mqtt::tls::TlsAcceptor) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        self.running.serve_mqtts(listener, acceptor);
        addr
    }

    /// Stops the service as SIGTERM does (listeners close, requests in flight finish).
    pub fn stop(&self) {
        self.shutdown.cancel();
    }

    /// Creates an account directly in the store (as `devicecloud admin create-user` does).
    pub async fn create_user(&self, username: &str, password: &str, is_admin: bool) -> String {
        let hash = hash_password(password).unwrap();
        accounts::create(&self.state.db, username, &hash, is_admin, unix_now())
            .await
            .unwrap()
            .id_user
    }

    /// A password-grant access token.
    pub async fn token(&self, username: &str, password: &str) -> String {
        let response = self
            .token_request(&[
                ("grant_type", "password"),
                ("client_id", &self.client_id),
                ("client_secret", &self.client_secret),
                ("username", username),
                ("password", password),
            ])
            .await;
        assert_eq!(response.status(), 200, "token request failed");
        let body: Value = response.json().await.unwrap();
        body["access_token"].as_str().unwrap().to_string()
    }

    /// An administrator and their token.
    pub async fn admin(&self) -> (String, String) {
        let name = format!("admin{}@example.com", COUNTER.fetch_add(1, Ordering::Relaxed));
        let id = self.create_user(&name, "admin-password", true).await;
        (id, self.token(&name, "admin-password").await)
    }

    /// A normal user and their token.
    pub async fn user(&self) -> (String, String) {
        let name = format!("user{}@example.com", COUNTER.fetch_add(1, Ordering::Relaxed));
        let id = self.create_user(&name, "user-password", false).await;
        (id, self.token(&name, "user-password").await)
    }

    pub async fn token_request(&self, form: &[(&str, &str)]) -> Response {
        self.http
            .post(self.url("/oauth2/token"))
            .form(form)
            .send()
            .await
            .unwrap()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A request with a bearer token.
    pub fn request(&self, method: Method, path: &str, token: &str) -> RequestBuilder {
        self.http.request(method, self.url(path)).bearer_auth(token)
    }

    pub fn get(&self, path: &str, token: &str) -> RequestBuilder {
        self.request(Method::GET, path, token)
    }

    /// Creates a group as `admin_token` and returns its id.
    pub async fn create_group(&self, admin_token: &str, label: &str) -> String {
        let response = self
            .request(Method::POST, "/api/v2/group", admin_token)
            .json(&serde_json::json!({"label": label}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
        let body: Value = response.json().await.unwrap();
        body["id_group"].as_str().unwrap().to_string()
    }

    /// Gives `id_user` a role in a group.
    pub async fn grant(&self, admin_token: &str, id_group: &str, id_user: &str, role: &str) {
        let response = self
            .request(
                Method::PUT,
                &format!("/api/v2/group/{id_group}/member/{id_user}"),
                admin_token,
            )
            .json(&serde_json::json!({"role": role}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
}

/// Status and JSON body of a response.
pub async fn json(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
    };
    (status, body)
}

/// Asserts the specification's error body.
pub fn assert_error(body: &Value, status: u16) {
    let keys: Vec<&str> = body
        .as_object()
        .expect("error body is an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        &keys[..4],
        ["name", "message", "code", "status"],
        "error body keys in order: {body}"
    );
    assert_eq!(body["code"], 0);
    assert_eq!(body["status"], status);
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A finished response: status, headers and the body text, read once.
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Reply {
    /// The body as JSON; panics with the text when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    /// A header as text, `None` when absent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("header value is text"))
    }

    /// Panics unless the status is `status`, showing the body.
    pub fn expect(self, status: u16) -> Reply {
        assert_eq!(self.status, status, "unexpected status, body: {}", self.text);
        self
    }
}

/// The one integer `sql` selects (a count), read straight from the store.
pub async fn count(db: &Db, sql: &str) -> i64 {
    let sql = sqlx::AssertSqlSafe(sql.to_string());
    match db {
        Db::Sqlite(p, ..) => sqlx::query_scalar(sql).fetch_one(p).await.unwrap(),
        Db::Postgres(p) => sqlx::query_scalar(sql).fetch_one(p).await.unwrap(),
    }
}

/// Sends a request and reads the whole answer.
pub async fn send(request: RequestBuilder) -> Reply {
    let response = request.send().await.expect("request sent");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body read");
    Reply { status, headers, text }
}

/// Keys of a JSON object, in order.
pub fn keys(value: &Value) -> Vec<String> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .cloned()
        .collect()
}

/// Percent-encodes every byte outside `A-Z a-z 0-9 - _ . ~` (RFC 3986 unreserved).
pub fn enc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Asserts the specification's error body with its `name` and `message`.
pub fn assert_error_exact(body: &Value, status: u16, name: &str, message: &str) {
    assert_error(body, status);
    assert_eq!(body["name"], name, "name of {body}");
    assert_eq!(body["message"], message, "message of {body}");
}

/// Asserts a 401 answer: the invalid-credentials body and `WWW-Authenticate: Bearer realm="api"`.
pub fn assert_invalid_credentials(reply: &Reply) {
    assert_eq!(reply.status, 401, "body: {}", reply.text);
    assert_eq!(
        reply.json(),
        serde_json::json!({"name": "Unauthorized", "message": "Your request was made with invalid credentials.", "code": 0, "status": 401})
    );
    assert_eq!(reply.header("www-authenticate"), Some("Bearer realm=\"api\""));
}

impl TestApp {
    /// Inserts a group straight into the store with a chosen creation time (and country).
    pub async fn seed_group(&self, label: &str, created_at: i64, id_country: Option<&str>) -> String {
        let new = devicecloud_store::groups::NewGroup {
            label,
            r#type: "0",
            subtype: "",
            id_country,
        };
        devicecloud_store::groups::create(&self.state.db, &new, created_at)
            .await
            .unwrap()
            .id_group
    }

    /// Number of rows of the `groups` table, read straight from the store.
    pub async fn group_rows(&self) -> i64 {
        match &self.state.db {
            Db::Sqlite(pool, ..) => sqlx::query_scalar("SELECT COUNT(*) FROM groups")
                .fetch_one(pool)
                .await
                .unwrap(),
            Db::Postgres(pool) => sqlx::query_scalar("SELECT COUNT(*) FROM groups")
                .fetch_one(pool)
                .await
                .unwrap(),
        }
    }

    /// Sets the expiry of an access token in the store.
    pub async fn set_token_expiry(&self, token: &str, expires_at: i64) {
        self.set_token_time(token, "expires_at", expires_at).await;
    }

    /// Sets when a token pair was granted (its creation time) in the store.
    pub async fn set_token_created(&self, token: &str, created_at: i64) {
        self.set_token_time(token, "created_at", created_at).await;
    }

    /// Sets one time column of an access token's row.
    async fn set_token_time(&self, token: &str, column: &str, value: i64) {
        let hash = token_hash(token);
        let sql = format!("UPDATE access_tokens SET {column} = $1 WHERE token_hash = $2");
        let done = match &self.state.db {
            Db::Sqlite(pool, ..) => sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(value)
                .bind(&hash)
                .execute(pool)
                .await
                .unwrap()
                .rows_affected(),
            Db::Postgres(pool) => sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(value)
                .bind(&hash)
                .execute(pool)
                .await
                .unwrap()
                .rows_affected(),
        };
        assert_eq!(done, 1, "token not found in the store");
        // The bearer cache may hold the old row.
        self.state.auth.forget_token(&hash);
    }

    /// A password-grant token response (status and body) for `form`.
    pub async fn token_reply(&self, form: &[(&str, &str)]) -> Reply {
        send(self.http.post(self.url("/oauth2/token")).form(form)).await
    }

    /// Creates a user with a known password and returns (id_user, username, access token, refresh token).
    pub async fn user_with_tokens(&self, is_admin: bool) -> (String, String, String, String) {
        let name = format!("person{}@example.com", COUNTER.fetch_add(1, Ordering::Relaxed));
        let id = self.create_user(&name, "secret-password", is_admin).await;
        let reply = self
            .token_reply(&[
                ("grant_type", "password"),
                ("client_id", &self.client_id),
                ("client_secret", &self.client_secret),
                ("username", &name),
                ("password", "secret-password"),
            ])
            .await
            .expect(200);
        let body = reply.json();
        (
            id,
            name,
            body["access_token"].as_str().unwrap().to_string(),
            body["refresh_token"].as_str().unwrap().to_string(),
        )
    }
}
