//! What the tests of several nodes share (`tests/cluster.rs`): nodes on one PostgreSQL database,
//! gateways over MQTT, a live stream reader, a webhook receiver and HAProxy in front of the
//! nodes.

use std::time::Duration;

use devicecloud_protocol::{Measurement, Timestamp, measurements_payload};
use devicecloud_simulator::Provisioner;
use reqwest::StatusCode;
use rumqttc::{AsyncClient, ConnectReturnCode, Event, EventLoop, MqttOptions, Packet, QoS};
use serde_json::{Value, json};

use super::{Credentials, Dir, Serve, Store, fresh_postgres};

/// Messages published once the stream is known to receive, and datatypes per message.
pub const MESSAGES: i64 = 20;

pub const DATATYPES: u32 = 3;

pub const FIRST_SECOND: i64 = 1_763_726_400;

/// Server-Sent Events read from a real HTTP answer, as an `EventSource` cuts them: `(event,
/// data)` of each event, comments skipped.
pub struct Events {
    pub response: reqwest::Response,
    pub buffer: String,
}

impl Events {
    pub async fn open(serve: &Serve, token: &str, group: &str) -> Events {
        let response = reqwest::Client::new()
            .get(format!("{}/api/v2/stream", serve.base()))
            .query(&[("filter[id_group]", group)])
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        Events {
            response,
            buffer: String::new(),
        }
    }

    /// The next event within `wait`, `None` if none came.
    pub async fn next(&mut self, wait: Duration) -> Option<(String, Value)> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let field = |name: &str| block.lines().find_map(|l| l.strip_prefix(name)).map(str::to_string);
                if let (Some(event), Some(data)) = (field("event: "), field("data: ")) {
                    return Some((event, serde_json::from_str(&data).unwrap()));
                }
            }
            match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                Ok(Ok(Some(bytes))) => self.buffer.push_str(std::str::from_utf8(&bytes).unwrap()),
                Ok(other) => panic!("the stream ended: {other:?}"),
                Err(_) => return None,
            }
        }
    }
}

/// A gateway publishing over MQTT, one QoS 1 message at a time.
pub struct Gateway {
    pub client: AsyncClient,
    pub events: EventLoop,
}

impl Gateway {
    pub async fn connect(mqtt: std::net::SocketAddr, serial: &str, token: &str) -> Gateway {
        let mut options = MqttOptions::new(serial, mqtt.ip().to_string(), mqtt.port());
        options.set_credentials(serial, token);
        options.set_keep_alive(Duration::from_secs(30));
        let (client, mut events) = AsyncClient::new(options, 8);
        match tokio::time::timeout(Duration::from_secs(10), events.poll()).await {
            Ok(Ok(Event::Incoming(Packet::ConnAck(ack)))) => assert_eq!(ack.code, ConnectReturnCode::Success),
            other => panic!("expected CONNACK, got {other:?}"),
        }
        Gateway { client, events }
    }

    /// The birth message, which marks the gateway connected through this node.
    pub async fn hello(&mut self) {
        let hello = json!({"kind": "PLUS", "connection": "cellular", "signal": 20});
        self.publish("v1/gateway/hello", serde_json::to_vec(&hello).unwrap())
            .await;
    }

    /// Whether the node closes the connection within `wait`.
    pub async fn closed_within(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, self.events.poll()).await {
                Err(_) => return false,
                Ok(Err(_)) | Ok(Ok(Event::Incoming(Packet::Disconnect))) => return true,
                Ok(Ok(_)) => {}
            }
        }
    }

    /// Publishes and waits for the PUBACK, which the node sends once the message is committed.
    pub async fn publish(&mut self, topic: &str, payload: Vec<u8>) {
        self.client
            .publish(topic, QoS::AtLeastOnce, false, payload)
            .await
            .unwrap();
        loop {
            let event = tokio::time::timeout(Duration::from_secs(10), self.events.poll())
                .await
                .expect("no PUBACK within 10 s")
                .unwrap();
            if matches!(event, Event::Incoming(Packet::PubAck(_))) {
                return;
            }
        }
    }

    /// One second of every datatype ([`one_second`]).
    pub async fn measure(&mut self, second: i64) {
        self.publish("v1/gateway/measurements", one_second(second)).await;
    }
}

/// `count` nodes on one fresh PostgreSQL database, with an administrator and an API client;
/// `None` (with a note) without PostgreSQL.
pub struct Nodes {
    pub nodes: Vec<Serve>,
    pub credentials: Credentials,
    pub store: Store,
    pub _dirs: Vec<Dir>,
}

pub async fn nodes(count: usize, tag: &str) -> Option<Nodes> {
    nodes_with(count, tag, &[]).await
}

/// [`nodes`] with more settings.
pub async fn nodes_with(count: usize, tag: &str, settings: &[(&'static str, &str)]) -> Option<Nodes> {
    let Some(base) = std::env::var("DEVICECLOUD_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("note: several nodes need PostgreSQL (DEVICECLOUD_TEST_DATABASE_URL); skipped");
        return None;
    };
    let url = fresh_postgres(&base, tag).await;
    Some(nodes_on(&url, count, tag, settings).await)
}

/// `count` nodes on the database `url`, with an administrator and an API client.
pub async fn nodes_on(url: &str, count: usize, tag: &str, settings: &[(&'static str, &str)]) -> Nodes {
    let url = url.to_string();
    let dirs: Vec<Dir> = (0..count).map(|i| Dir::new(&format!("{tag}-{i}"))).collect();
    // Short leases, so that a killed node is found out within the test.
    let store = |dir: &Dir| Store {
        data_dir: dir.0.clone(),
        database_url: Some(url.clone()),
        env: [
            ("DEVICECLOUD_NODE_LEASE_S", "3"),
            ("DEVICECLOUD_WEBHOOK_ALLOW_PRIVATE", "1"),
        ]
        .iter()
        .chain(settings)
        .map(|(k, v)| (*k, v.to_string()))
        .collect(),
    };
    let credentials = store(&dirs[0]).bootstrap().await;
    let mut nodes = Vec::new();
    for dir in &dirs {
        nodes.push(store(dir).serve().await);
    }
    Nodes {
        nodes,
        credentials,
        store: store(&dirs[0]),
        _dirs: dirs,
    }
}

impl Nodes {
    pub async fn stop(self) {
        for node in self.nodes {
            node.stop().await;
        }
    }
}

/// The status of `GET path` as `token` through `node`.
pub async fn status(node: &Serve, token: &str, path: &str) -> StatusCode {
    reqwest::Client::new()
        .get(format!("{}{path}", node.base()))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
}

/// Waits up to 1 s for `GET path` through every node of `on` to answer `want`; how long it took.
pub async fn within_a_second(on: &[&Serve], token: &str, path: &str, want: StatusCode) -> Duration {
    let started = tokio::time::Instant::now();
    for node in on {
        loop {
            let got = status(node, token, path).await;
            if got == want {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "{path} through {} still answers {got} after 1 s (want {want})",
                node.base()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    started.elapsed()
}

/// A measurement message of one second of every datatype: datatype d is `second + d / 10`.
pub fn one_second(second: i64) -> Vec<u8> {
    let measurement = Measurement {
        device: None,
        ts: Some(Timestamp {
            seconds: second,
            microseconds: 0,
        }),
        values: (1..=DATATYPES).map(|d| (d, value(second, d))).collect(),
    };
    measurements_payload(&[measurement])
}

pub fn value(second: i64, datatype: u32) -> f64 {
    (second % 1000) as f64 + f64::from(datatype) / 10.0
}

/// Waits until every gateway of `ids` is shown disconnected through `node`: within the lease
/// (3 s in these tests) and a third, plus one pass, of `killed`.
pub async fn shown_disconnected(node: &Serve, admin: &str, ids: &[String], killed: tokio::time::Instant) {
    for id in ids {
        let path = format!("/api/v2/physical-device/{id}");
        while node.json(reqwest::Method::GET, admin, &path).await["is_connected"] != json!(0) {
            assert!(
                killed.elapsed() < Duration::from_secs(6),
                "a gateway of the killed node still shown connected after {:?}",
                killed.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    eprintln!(
        "gateways of the killed node shown disconnected after {:?}",
        killed.elapsed()
    );
}

/// A webhook receiver on loopback: every request's delivery id and body, answered 200 after
/// 100 ms (a slow receiver, so that two nodes posting one webhook's batches would overlap).
#[derive(Clone, Default)]
pub struct Receiver {
    pub seen: std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>,
}

impl Receiver {
    /// Waits up to 30 s until `expected` distinct points have come (a point may come again
    /// only when its batch was retried); fails if more come.
    pub async fn until_distinct(&self, expected: usize, what: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let mut points = self.points();
            points.sort();
            points.dedup();
            if points.len() >= expected {
                assert_eq!(points.len(), expected, "{what}: points posted");
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: {} of {expected} points reached the webhook in 30 s",
                points.len()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Listens on a free loopback port; the webhook URL.
    pub async fn start(&self) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let seen = self.seen.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    let mut chunk = [0u8; 16_384];
                    loop {
                        // One request: its head, then its body of Content-Length bytes.
                        let head_end = loop {
                            if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                                break i + 4;
                            }
                            match socket.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                            }
                        };
                        let head = String::from_utf8_lossy(&buffer[..head_end]).to_lowercase();
                        let header = |name: &str| {
                            head.lines()
                                .find_map(|l| l.strip_prefix(name))
                                .map(|v| v.trim().to_string())
                                .unwrap_or_default()
                        };
                        let length: usize = header("content-length:").parse().unwrap_or(0);
                        while buffer.len() < head_end + length {
                            match socket.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let body: Value =
                            serde_json::from_slice(&buffer[head_end..head_end + length]).unwrap_or_default();
                        seen.lock().unwrap().push((header("x-devicecloud-delivery:"), body));
                        buffer.drain(..head_end + length);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                        if socket.write_all(ok).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        url
    }

    /// The points received: (device, second, datatype) of every item of every request.
    pub fn points(&self) -> Vec<(String, i64, i64)> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .flat_map(|(_, body)| body["items"].as_array().cloned().unwrap_or_default())
            .map(|item| {
                (
                    item["source_device"].as_str().unwrap_or_default().to_string(),
                    item["timestamp_seconds"].as_i64().unwrap_or_default(),
                    item["datatype"].as_i64().unwrap_or_default(),
                )
            })
            .collect()
    }
}

/// A new group with a measurements webhook, created through `node`, to a receiver of its own.
pub async fn group_with_webhook(node: &Serve, admin: &str, label: &str) -> (String, Receiver) {
    let group = Provisioner::new(&node.base(), admin).create_group(label).await.unwrap();
    let receiver = Receiver::default();
    let url = receiver.start().await;
    let created = reqwest::Client::new()
        .post(format!("{}/api/v2/webhook", node.base()))
        .bearer_auth(admin)
        .json(
            &json!({"label": label, "id_group": group, "forwarding_type": "measurements",
                      "formatter": "json", "url": url}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    (group, receiver)
}

/// HAProxy in front of the nodes, as `deploy/haproxy/haproxy.cfg` puts it (MQTT over TCP, health
/// from each node's `/readyz`), on a free port; `None` (with a note) without `haproxy` on `PATH`,
/// a failure with `DEVICECLOUD_REQUIRE_HAPROXY=1` (CI).
pub struct Haproxy {
    pub mqtt: std::net::SocketAddr,
    pub _child: tokio::process::Child,
    pub _dir: Dir,
}

impl Haproxy {
    pub async fn start(nodes: &[Serve]) -> Option<Haproxy> {
        let found = std::process::Command::new("haproxy").arg("-v").output().is_ok();
        if !found {
            assert!(
                std::env::var("DEVICECLOUD_REQUIRE_HAPROXY").as_deref() != Ok("1"),
                "DEVICECLOUD_REQUIRE_HAPROXY=1 but no haproxy on PATH (Debian: apt-get install haproxy)"
            );
            eprintln!("note: no haproxy on PATH, the test through HAProxy is skipped");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let servers: String = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| format!("    server n{i} {} check port {}\n", n.mqtt, n.http.port()))
            .collect();
        let config = format!(
            "global\n    maxconn 2000\ndefaults\n    timeout connect 2s\n    timeout client 150s\n    timeout server 150s\n\
             frontend mqtt\n    bind 127.0.0.1:{port}\n    mode tcp\n    default_backend nodes\n\
             backend nodes\n    mode tcp\n    balance leastconn\n    option redispatch\n    retries 3\n\
             \x20   option httpchk\n    http-check send meth GET uri /readyz\n    http-check expect status 200\n\
             \x20   default-server inter 500ms fall 2 rise 2 on-marked-down shutdown-sessions\n{servers}"
        );
        let dir = Dir::new("haproxy");
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let child = tokio::process::Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mqtt: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(mqtt).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Health checks see every node up (two passes of 500 ms).
        tokio::time::sleep(Duration::from_millis(1200)).await;
        Some(Haproxy {
            mqtt,
            _child: child,
            _dir: dir,
        })
    }
}

/// Publishes one second of every datatype per message through `mqtt` until `stop`, each message
/// again after a lost connection until it is acknowledged (a new connection each time, as a
/// gateway does); the seconds acknowledged, each with when its PUBACK came.
pub async fn publish_through(
    mqtt: std::net::SocketAddr,
    serial: String,
    token: String,
    first: i64,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<(i64, tokio::time::Instant)> {
    let mut acked = Vec::new();
    let mut second = first;
    'connections: while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let mut options = MqttOptions::new(serial.clone(), mqtt.ip().to_string(), mqtt.port());
        options.set_credentials(serial.clone(), token.clone());
        options.set_keep_alive(Duration::from_secs(30));
        let (client, mut events) = AsyncClient::new(options, 8);
        match tokio::time::timeout(Duration::from_secs(5), events.poll()).await {
            Ok(Ok(Event::Incoming(Packet::ConnAck(ack)))) if ack.code == ConnectReturnCode::Success => {}
            _ => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        }
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let payload = one_second(second);
            if client
                .publish("v1/gateway/measurements", QoS::AtLeastOnce, false, payload)
                .await
                .is_err()
            {
                continue 'connections;
            }
            loop {
                match tokio::time::timeout(Duration::from_secs(5), events.poll()).await {
                    Ok(Ok(Event::Incoming(Packet::PubAck(_)))) => break,
                    Ok(Ok(_)) => {}
                    // The connection is gone: the message goes again on the next one.
                    Ok(Err(_)) | Err(_) => continue 'connections,
                }
            }
            acked.push((second, tokio::time::Instant::now()));
            second += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    acked
}
