//! The front door (docs/operations.md, "Limits"): no request or connection can take the
//! service down. One test per limit, over real HTTP (raw sockets where a client library would
//! hide the abuse) and real MQTT, on SQLite or PostgreSQL as `TestApp` chooses.

mod common;

use std::time::{Duration, Instant};

use common::{TestApp, assert_error, send};
use devicecloud_engine::settings::Limits;
use devicecloud_server::Settings;
use devicecloud_store::{Db, StoreError};
use reqwest::Method;
use rumqttc::{AsyncClient, ConnectReturnCode, ConnectionError, Event, MqttOptions, Packet};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn settings(change: impl FnOnce(&mut Limits)) -> Settings {
    let mut settings = Settings::default();
    change(&mut settings.limits);
    settings
}

/// Everything the server sends on `stream` until it closes the connection (at most `within`).
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> String {
    let mut received = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the connection stayed open for {within:?}");
    String::from_utf8_lossy(&received).into_owned()
}

async fn connect(app: &TestApp) -> TcpStream {
    TcpStream::connect(app.base.trim_start_matches("http://"))
        .await
        .unwrap()
}

async fn healthy(app: &TestApp) {
    let reply = send(app.http.get(app.url("/healthz"))).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
}

#[tokio::test]
async fn an_expand_deeper_than_four_segments_is_a_400_before_any_store_work() {
    let app = TestApp::spawn().await;
    let (_, nobody) = app.user().await;
    let deep = vec!["parent"; 200].join(".");
    for path in [
        format!("/api/v2/physical-device?expand={deep}"),
        format!("/api/v2/physical-device/00000000-0000-0000-0000-000000000000?expand={deep}"),
        format!("/api/v2/data-session?expand=physicalDevices.{deep}"),
        "/api/v2/physical-device?expand=group,parent.parent.parent.parent.group".to_string(),
    ] {
        for token in [nobody.as_str(), "no-such-token"] {
            let reply = send(app.get(&path, token)).await;
            assert_eq!(reply.status, 400, "{path}: {}", reply.text);
            let body = reply.json();
            assert_error(&body, 400);
            assert!(body["message"].as_str().unwrap().contains("expand"), "{body}");
        }
    }
    healthy(&app).await;

    // Four segments are served, through a real parent chain.
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "depth").await;
    let gateway = common::gateway_client::TestGateway::connect(&app, &admin, &group, "GW-DEPTH", "CORE").await;
    let reply = send(app.get(
        &format!(
            "/api/v2/physical-device/{}?expand=parent.parent.parent.group",
            gateway.id
        ),
        &admin,
    ))
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(reply.json()["parent"].is_null());
}

#[tokio::test]
async fn in_and_nin_lists_hold_at_most_1000_values() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    app.create_group(&admin, "v7").await;
    for op in ["in", "nin"] {
        for (n, status) in [(1000, 200), (1001, 422), (40_000, 422)] {
            let values: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
            let reply = send(
                app.get("/api/v2/group/index", &admin)
                    .json(&json!({"filter": {"label": {op: values}}})),
            )
            .await;
            assert_eq!(reply.status, status, "{op} with {n} values: {}", reply.text);
            if status == 422 {
                let body = reply.json();
                assert_eq!(body[0]["field"], "filter", "{body}");
                // 40,000 values pass the size of a whole filter (64 KiB) before the list is read.
                let says = if n == 40_000 { "64 KiB" } else { "at most 1000" };
                assert!(body[0]["message"].as_str().unwrap().contains(says), "{body}");
            } else {
                assert_eq!(reply.json()["_meta"]["totalCount"], if op == "in" { 1 } else { 0 });
            }
        }
    }
}

#[tokio::test]
async fn headers_that_never_finish_are_closed_and_idle_keep_alive_connections_are_not() {
    let app = TestApp::spawn_with(settings(|l| l.http_header_timeout = Duration::from_secs(1))).await;
    // Headers started and never finished.
    let mut stalled = connect(&app).await;
    stalled
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // A fresh connection that never sends anything.
    let mut silent = connect(&app).await;
    // A keep-alive connection that has had its answer and stays silent.
    let mut idle = connect(&app).await;
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // Meanwhile the service answers others.
    healthy(&app).await;
    let rest = read_until_closed(&mut stalled, Duration::from_secs(5)).await;
    assert!(rest.is_empty() || rest.starts_with("HTTP/1.1 408"), "{rest}");
    assert!(started.elapsed() >= Duration::from_millis(900), "closed too early");
    read_until_closed(&mut silent, Duration::from_secs(5)).await;
    // Well past the header timeout, the idle keep-alive connection still serves a request.
    tokio::time::sleep(Duration::from_millis(2500).saturating_sub(started.elapsed())).await;
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until_closed(&mut idle, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_a_408() {
    let app = TestApp::spawn_with(settings(|l| l.http_body_timeout = Duration::from_secs(1))).await;
    let mut stream = connect(&app).await;
    stream
        .write_all(
            b"POST /oauth2/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\nConnection: close\r\n\r\ngrant_type",
        )
        .await
        .unwrap();
    let started = Instant::now();
    let answer = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_error(&body, 408);
    assert!(started.elapsed() >= Duration::from_millis(900));
    healthy(&app).await;
}

#[tokio::test]
async fn a_stalled_body_does_not_hold_the_shutdown() {
    let app = TestApp::spawn().await;
    let mut stream = connect(&app).await;
    stream
        .write_all(b"POST /api/v2/group HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"label\":")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    app.stop();
    let answer = read_until_closed(&mut stream, Duration::from_secs(3)).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("retry-after"), "{answer}");
}

#[tokio::test]
async fn connections_over_the_cap_are_closed_on_accept_while_the_others_go_on() {
    let app = TestApp::spawn_with(settings(|l| l.http_max_connections = 4)).await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(connect(&app).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut extra = connect(&app).await;
    let _ = extra.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let answer = read_until_closed(&mut extra, Duration::from_secs(2)).await;
    assert!(answer.is_empty(), "over the cap, yet answered: {answer}");
    // The held connections are still served.
    let mut first = held.remove(0);
    first
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until_closed(&mut first, Duration::from_secs(2)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    healthy(&app).await;
}

/// A provisioned gateway's serial and token.
async fn provision(app: &TestApp, admin: &str, group: &str, serial: &str) -> String {
    let body = json!({"id_group": group, "serial_hardware": serial, "kind": "GO"});
    let reply = send(app.request(Method::POST, "/api/v2/physical-device", admin).json(&body)).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.json()["device_token"].as_str().unwrap().to_string()
}

/// The CONNACK a gateway gets: `Ok(())` when accepted.
async fn connack(app: &TestApp, serial: &str, token: &str) -> Result<AsyncClient, ConnectReturnCode> {
    let mut options = MqttOptions::new(serial, app.mqtt_addr.ip().to_string(), app.mqtt_addr.port());
    options.set_credentials(serial, token);
    let (client, mut events) = AsyncClient::new(options, 8);
    match tokio::time::timeout(Duration::from_secs(10), events.poll()).await {
        Ok(Ok(Event::Incoming(Packet::ConnAck(_)))) => {
            // Keep the connection served while the caller holds the client.
            tokio::spawn(async move { while events.poll().await.is_ok() {} });
            Ok(client)
        }
        Ok(Err(ConnectionError::ConnectionRefused(code))) => Err(code),
        other => panic!("expected a CONNACK, got {other:?}"),
    }
}

#[tokio::test]
async fn mqtt_connections_over_the_cap_get_connack_3() {
    let app = TestApp::spawn_with(settings(|l| l.mqtt_max_connections = 1)).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "cap").await;
    let first_token = provision(&app, &admin, &group, "GW-CAP-1").await;
    let second_token = provision(&app, &admin, &group, "GW-CAP-2").await;
    let first = connack(&app, "GW-CAP-1", &first_token).await.expect("first accepted");
    assert_eq!(
        connack(&app, "GW-CAP-2", &second_token).await.err(),
        Some(ConnectReturnCode::ServiceUnavailable)
    );
    // Once the first leaves, its place is free again.
    first.disconnect().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match connack(&app, "GW-CAP-2", &second_token).await {
            Ok(_) => break,
            Err(code) if Instant::now() < deadline => {
                assert_eq!(code, ConnectReturnCode::ServiceUnavailable);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(code) => panic!("still refused: {code:?}"),
        }
    }
}

/// Holds the lock every write to `groups` needs, until dropped: SQLite's write lock, or a
/// PostgreSQL table lock.
enum Lock {
    Sqlite(sqlx::pool::PoolConnection<sqlx::Sqlite>),
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
}

async fn lock_groups(db: &Db) -> Lock {
    match db {
        Db::Sqlite(pool, ..) => {
            let mut conn = pool.acquire().await.unwrap();
            sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await.unwrap();
            Lock::Sqlite(conn)
        }
        Db::Postgres(pool) => {
            let mut tx = pool.begin().await.unwrap();
            sqlx::query("LOCK TABLE groups IN ACCESS EXCLUSIVE MODE")
                .execute(&mut *tx)
                .await
                .unwrap();
            Lock::Postgres(tx)
        }
    }
}

impl Lock {
    async fn release(self) {
        match self {
            Lock::Sqlite(mut conn) => {
                sqlx::query("ROLLBACK").execute(&mut *conn).await.unwrap();
            }
            Lock::Postgres(tx) => tx.rollback().await.unwrap(),
        }
    }
}

#[tokio::test]
async fn store_work_past_the_query_timeout_is_a_503_and_writes_nothing() {
    let app = TestApp::spawn_with(settings(|l| l.query_timeout = Duration::from_millis(500))).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "before").await;
    let lock = lock_groups(&app.running.pools.writer).await;
    let started = Instant::now();
    let reply = send(
        app.request(Method::PATCH, &format!("/api/v2/group/{group}"), &admin)
            .json(&json!({"label": "after"})),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(reply.status, 503, "{}", reply.text);
    assert_error(&reply.json(), 503);
    assert!(reply.header("retry-after").is_some());
    assert!(took < Duration::from_secs(3), "answered after {took:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    lock.release().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reply = send(app.get(&format!("/api/v2/group/{group}"), &admin)).await;
    assert_eq!(
        reply.json()["label"],
        "before",
        "the cancelled write happened after all"
    );
    healthy(&app).await;
}

/// An SQLite statement that counts to `n`, taking time in proportion.
fn count_to(n: u64) -> String {
    format!("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {n}) SELECT count(*) FROM c")
}

/// Runs `sqlite` or `postgres` on the pool of `db`'s backend.
async fn run(db: &Db, sqlite: &str, postgres: &str) -> sqlx::Result<()> {
    match db {
        Db::Sqlite(pool, ..) => sqlx::query(sqlx::AssertSqlSafe(sqlite.to_string()))
            .execute(pool)
            .await
            .map(|_| ()),
        Db::Postgres(pool) => sqlx::query(sqlx::AssertSqlSafe(postgres.to_string()))
            .execute(pool)
            .await
            .map(|_| ()),
    }
}

#[tokio::test]
async fn a_long_statement_on_the_request_pool_is_cancelled_by_the_database() {
    let app = TestApp::spawn().await;
    let requests = app.running.pools.writer.for_requests(Duration::from_millis(300), 1);
    let started = Instant::now();
    // About a second of work per ten million rows on SQLite; never finished here.
    let result = run(&requests, &count_to(1_000_000_000), "SELECT pg_sleep(30)").await;
    let error = StoreError::from(result.expect_err("the statement ran to its end"));
    assert!(matches!(error, StoreError::Timeout(_)), "{error:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "cancelled after {:?}",
        started.elapsed()
    );
    // The connection is usable again at once, and the timeout is per statement: statements
    // that each take a little time, on the same connection for longer than the timeout in
    // all, all succeed.
    for _ in 0..8 {
        run(&requests, &count_to(100_000), "SELECT pg_sleep(0.01)")
            .await
            .expect("a short statement was cancelled");
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
}

#[tokio::test]
async fn metric_labels_stay_bounded_whatever_the_method_or_path() {
    let app = TestApp::spawn().await;
    for i in 0..30 {
        let method = Method::from_bytes(format!("JUNK{i}{}", "X".repeat(1000)).as_bytes()).unwrap();
        let reply = send(
            app.http
                .request(method, app.url(&format!("/api/v2/group/index?junk{i}"))),
        )
        .await;
        assert!(reply.status < 500, "{}", reply.text);
        send(app.http.get(app.url(&format!("/no/such/path/{i}")))).await;
    }
    let metrics = send(app.http.get(app.url("/metrics"))).await.text;
    assert!(!metrics.contains("JUNK"), "a made-up method became a label");
    assert!(!metrics.contains("/no/such/path"), "an unmatched path became a label");
    assert!(metrics.contains("method=\"other\""), "{metrics}");
    assert!(metrics.contains("route=\"unmatched\""), "{metrics}");
}

#[tokio::test]
async fn the_page_cache_holds_no_more_than_its_capacity() {
    let capacity = 256 * 1024;
    let app = TestApp::spawn_with(settings(|l| l.page_cache_bytes = capacity)).await;
    let (_, admin) = app.admin().await;
    for i in 0..20 {
        app.create_group(&admin, &format!("{i}{}", "g".repeat(200))).await;
    }
    for i in 0..300 {
        let reply = send(app.get(&format!("/api/v2/group/index?per-page=20&n={i}"), &admin)).await;
        assert_eq!(reply.status, 200);
        assert!(
            app.state.pages.weight() <= capacity as u64,
            "{} bytes",
            app.state.pages.weight()
        );
    }
    assert!(app.state.pages.weight() > 0, "nothing remembered at all");
    // Requests carrying bodies over 4 KiB (small enough to fit the cache) are answered but
    // not remembered.
    let before = app.state.pages.weight();
    for i in 0..20 {
        let junk = format!("{i}{}", "j".repeat(20_000));
        let reply = send(app.get("/api/v2/group/index", &admin).json(&json!({"junk": junk}))).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    assert_eq!(
        app.state.pages.weight(),
        before,
        "a request with a large body was remembered"
    );
}

#[tokio::test]
async fn a_request_head_that_grows_past_64_kib_is_refused() {
    let app = TestApp::spawn().await;
    let mut stream = connect(&app).await;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Junk: ")
        .await
        .unwrap();
    // Sent the way a slow client sends it, so that the server holds it partly read.
    for _ in 0..10 {
        if stream.write_all(&[b'j'; 10 * 1024]).await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let answer = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    healthy(&app).await;
}

/// A TCP connection to `port` on 127.0.0.1 from the loopback address `from`.
async fn connect_from(from: &str, port: u16) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket
        .connect(format!("127.0.0.1:{port}").parse().unwrap())
        .await
        .unwrap()
}

/// Whether the service closes `stream` within `within` without sending anything.
async fn closed_unanswered(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(within, stream.read(&mut buf)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

#[tokio::test]
async fn one_address_holds_at_most_its_http_connections() {
    let app = TestApp::spawn_with(settings(|l| l.connections_per_address = 3)).await;
    let port: u16 = app.base.rsplit(':').next().unwrap().parse().unwrap();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(connect_from("127.0.0.1", port).await);
    }
    let mut extra = connect_from("127.0.0.1", port).await;
    assert!(closed_unanswered(&mut extra, Duration::from_secs(2)).await);
    // Another address is served meanwhile, and the held ones still are.
    let mut other = connect_from("127.0.0.2", port).await;
    other
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until_closed(&mut other, Duration::from_secs(2)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let first = &mut held[0];
    first
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until_closed(first, Duration::from_secs(2)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    healthy(&app).await;
}

#[tokio::test]
async fn silent_mqtt_connections_take_no_gateway_slot_and_leave_after_5_s() {
    let app = TestApp::spawn_with(settings(|l| {
        l.mqtt_max_connections = 1;
        l.mqtt_unauthenticated_max = 2;
    }))
    .await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "quiet").await;
    let token = provision(&app, &admin, &group, "GW-QUIET").await;
    let port = app.mqtt_addr.port();
    let mut silent = vec![
        connect_from("127.0.0.1", port).await,
        connect_from("127.0.0.2", port).await,
    ];
    // The unauthenticated places are taken: one more connection is closed at once.
    let mut third = connect_from("127.0.0.3", port).await;
    assert!(closed_unanswered(&mut third, Duration::from_secs(2)).await);
    // The silent connections are closed 5 s after they opened, unanswered.
    let started = Instant::now();
    for stream in &mut silent {
        assert!(closed_unanswered(stream, Duration::from_secs(7)).await);
    }
    assert!(started.elapsed() < Duration::from_secs(6), "{:?}", started.elapsed());
    // The one gateway slot was never theirs.
    let held = connect_from("127.0.0.1", port).await;
    let gateway = connack(&app, "GW-QUIET", &token)
        .await
        .expect("the gateway is accepted");
    drop((held, gateway));
}

#[tokio::test]
async fn one_address_holds_at_most_its_mqtt_connections() {
    let app = TestApp::spawn_with(settings(|l| l.connections_per_address = 2)).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "crowd").await;
    let token = provision(&app, &admin, &group, "GW-CROWD").await;
    let port = app.mqtt_addr.port();
    let mut held = vec![
        connect_from("127.0.0.1", port).await,
        connect_from("127.0.0.1", port).await,
    ];
    // A gateway from the same address is closed before its CONNECT is read.
    let mut options = MqttOptions::new("GW-CROWD", app.mqtt_addr.ip().to_string(), port);
    options.set_credentials("GW-CROWD", &token);
    let (_client, mut events) = AsyncClient::new(options, 8);
    let outcome = tokio::time::timeout(Duration::from_secs(5), events.poll()).await;
    assert!(
        matches!(outcome, Ok(Err(ref e)) if !matches!(e, ConnectionError::ConnectionRefused(_))),
        "{outcome:?}"
    );
    // Once one leaves, the gateway gets in.
    held.pop();
    tokio::time::sleep(Duration::from_millis(200)).await;
    connack(&app, "GW-CROWD", &token).await.expect("accepted");
    drop(held);
}
