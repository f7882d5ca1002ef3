//! A webhook receiver on loopback for the webhook tests: a real HTTP server that records every
//! request and answers queued statuses, the helpers that read what it got (items, headers,
//! signature), and `Setup`, a service with a group, a gateway and an administrator.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use devicecloud_server::Settings;
use hmac::{KeyInit, Mac};
use reqwest::Method;
use serde_json::{Value, json};

use super::{TestApp, send};

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// A receiver on loopback: records every request, answers the queued statuses first, then 200.
#[derive(Clone, Default)]
pub struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    answers: Arc<Mutex<Vec<u16>>>,
}

/// The path receivers of this test process listen on. A port is free again once a test lets
/// go of it, and a service of another test process may still deliver to it (the refused
/// connection test lets its port go on purpose): such requests use their own process's path
/// and are answered 404 without being recorded.
pub fn hook_path() -> String {
    format!("/hook/{}", std::process::id())
}

impl Receiver {
    pub async fn start(answers: Vec<u16>) -> (Receiver, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}{}", listener.local_addr().unwrap(), hook_path());
        (Receiver::serve(listener, answers), url)
    }

    pub fn serve(listener: tokio::net::TcpListener, answers: Vec<u16>) -> Receiver {
        let receiver = Receiver {
            got: Arc::default(),
            answers: Arc::new(Mutex::new(answers)),
        };
        let app = axum::Router::new()
            .route(&hook_path(), axum::routing::post(receive))
            .with_state(receiver.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        receiver
    }

    pub fn requests(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// Waits until `done` holds for the requests received (at most 30 s).
    pub async fn until(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        for _ in 0..600 {
            let got = self.requests();
            if done(&got) {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "receiver: {what} did not happen in 30 s; got {:?}",
            self.requests().len()
        );
    }
}

pub async fn receive(State(receiver): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    receiver.got.lock().unwrap().push(Received { headers, body });
    let mut answers = receiver.answers.lock().unwrap();
    let status = if answers.is_empty() { 200 } else { answers.remove(0) };
    StatusCode::from_u16(status).unwrap()
}

pub fn header<'a>(r: &'a Received, name: &str) -> &'a str {
    r.headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

/// The records of a request: `items` of a json body, the lines of an ndjson body.
pub fn items(r: &Received) -> Vec<Value> {
    if header(r, "content-type") == "application/x-ndjson" {
        let text = std::str::from_utf8(&r.body).unwrap();
        assert!(text.ends_with('\n'), "every ndjson line ends with a newline");
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    } else {
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        body["items"].as_array().unwrap().clone()
    }
}

pub fn all_items(got: &[Received]) -> Vec<Value> {
    got.iter().flat_map(items).collect()
}

/// Checks the signature the way a receiver does: HMAC-SHA256 of the body with the secret.
pub fn assert_signed(r: &Received, secret: &str) {
    let mut mac = hmac::Hmac::<sha2_hmac::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(&r.body);
    let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    assert_eq!(header(r, "x-devicecloud-signature"), expected);
}

/// A service that allows loopback receivers, with its delivery worker running.
pub struct Setup {
    pub app: TestApp,
    pub admin: String,
    pub group: String,
    pub serial: String,
    pub device: String,
    pub device_token: String,
}

pub async fn setup() -> Setup {
    setup_with(Settings::default()).await
}

/// [`setup`] with other settings (private addresses always allowed: receivers are on loopback).
pub async fn setup_with(settings: Settings) -> Setup {
    let settings = Settings {
        webhook_allow_private: true,
        ..settings
    };
    let app = TestApp::spawn_with(settings).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "Plant").await;
    let serial = format!("GW-{}", devicecloud_store::new_id());
    let body = json!({"id_group": group, "serial_hardware": serial, "kind": "CORE"});
    let created = send(app.request(Method::POST, "/api/v2/physical-device", &admin).json(&body))
        .await
        .expect(201)
        .json();
    Setup {
        device: created["id_physical_device"].as_str().unwrap().into(),
        device_token: created["device_token"].as_str().unwrap().into(),
        app,
        admin,
        group,
        serial,
    }
}

impl Setup {
    /// Creates a webhook as the administrator; returns the creation answer.
    pub async fn webhook(&self, body: Value) -> Value {
        send(
            self.app
                .request(Method::POST, "/api/v2/webhook", &self.admin)
                .json(&body),
        )
        .await
        .expect(201)
        .json()
    }

    pub fn hook_body(&self, kind: &str, formatter: &str, url: &str) -> Value {
        json!({"label": "to the plant", "id_group": self.group, "forwarding_type": kind,
               "formatter": formatter, "url": url, "authorization": "Bearer 0123456789abcdef-TOKEN"})
    }

    /// Sends measurements through the HTTP gateway endpoint and expects them stored.
    pub async fn measure(&self, payload: Value) {
        let request = self
            .app
            .http
            .post(self.app.url("/gateway/v1/measurements"))
            .basic_auth(&self.serial, Some(&self.device_token))
            .json(&payload);
        send(request).await.expect(200);
    }

    /// One measurement of datatype 1 with the value `n` at second 1_763_726_400 + n.
    pub async fn measure_n(&self, n: i64) {
        self.measure(json!([{"ts": 1_763_726_400 + n, "values": {"1": n}}]))
            .await;
    }

    pub async fn attempts(&self, id: &str, query: &str) -> Value {
        send(
            self.app
                .get(&format!("/api/v2/webhook/{id}/attempt{query}"), &self.admin),
        )
        .await
        .expect(200)
        .json()
    }

    /// The attempt log once it holds at least `count` attempts (10 s at most): the receiver
    /// records a request before answering it, and the attempt is logged on the answer.
    pub async fn logged_attempts(&self, id: &str, query: &str, count: usize) -> Value {
        for _ in 0..200 {
            let log = self.attempts(id, query).await;
            if log["items"].as_array().unwrap().len() >= count {
                return log;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("fewer than {count} attempts logged after 10 s");
    }

    pub async fn view(&self, id: &str) -> Value {
        send(
            self.app
                .get(&format!("/api/v2/webhook/{id}?expand=backlog"), &self.admin),
        )
        .await
        .expect(200)
        .json()
    }

    /// The webhook once the service has set it inactive (10 s at most).
    pub async fn until_inactive(&self, id: &str) -> Value {
        for _ in 0..200 {
            let view = self.view(id).await;
            if view["is_active"] == 0 {
                return view;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("webhook {id} still active after 10 s");
    }

    /// The events 214 recorded on a webhook, through the event endpoint.
    pub async fn disabled_events(&self, id: &str) -> Vec<Value> {
        let path = format!("/api/v2/event?filter[event_type]=214&filter[source_device]={id}");
        let page = send(self.app.get(&path, &self.admin)).await.expect(200).json();
        page["items"].as_array().unwrap().clone()
    }

    pub async fn patch(&self, id: &str, body: Value) -> Value {
        send(
            self.app
                .request(Method::PATCH, &format!("/api/v2/webhook/{id}"), &self.admin)
                .json(&body),
        )
        .await
        .expect(200)
        .json()
    }
}

/// The values of measurement items, as integers.
pub fn values(items: &[Value]) -> Vec<i64> {
    items.iter().map(|i| i["value"].as_f64().unwrap() as i64).collect()
}
