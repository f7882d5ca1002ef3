//! The gateway endpoint's TLS listener, with a real client library (rumqttc over rustls) and a
//! certificate made at test time: a gateway is served as over plain TCP and its data stored,
//! clients that fail the handshake (untrusted certificate, plain MQTT, garbage, silence) end only
//! their own connection, and certificate or key files that cannot be used are refused by name.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use common::{TempDir, TestApp, send};
use devicecloud_mqtt::tls::{self, TlsError};
use reqwest::Method;
use rumqttc::{AsyncClient, ConnectReturnCode, ConnectionError, Event, EventLoop, MqttOptions, Packet, QoS, Transport};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A self-signed certificate for `localhost` and its private key, as PEM files.
struct Pem {
    cert: PathBuf,
    key: PathBuf,
    /// The certificate's text, which a client trusts as its CA.
    cert_pem: String,
    _dir: TempDir,
}

fn self_signed(name: &str) -> Pem {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let dir = std::env::temp_dir().join(format!("dc-tls-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let cert_pem = made.cert.pem();
    std::fs::write(&cert, &cert_pem).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    Pem {
        cert,
        key,
        cert_pem,
        _dir: TempDir(dir),
    }
}

/// The service with its TLS listener on `pem`'s certificate; the listener's address.
async fn spawn(pem: &Pem) -> (TestApp, SocketAddr) {
    let app = TestApp::spawn().await;
    let acceptor = tls::acceptor(&pem.cert, &pem.key).expect("acceptor from the PEM files");
    let addr = app.start_mqtts(acceptor).await;
    (app, addr)
}

/// A provisioned gateway: its id, group, serial and token.
struct Provisioned {
    id: String,
    group: String,
    serial: String,
    token: String,
}

async fn provision(app: &TestApp, admin: &str, serial: &str) -> Provisioned {
    let group = app.create_group(admin, &format!("group of {serial}")).await;
    let body = json!({"id_group": group, "serial_hardware": serial, "kind": "CORE"});
    let reply = send(app.request(Method::POST, "/api/v2/physical-device", admin).json(&body)).await;
    let body = reply.expect(201).json();
    Provisioned {
        id: body["id_physical_device"].as_str().unwrap().into(),
        group,
        serial: serial.into(),
        token: body["device_token"].as_str().unwrap().into(),
    }
}

/// A client of the TLS listener at `addr` (reached as `localhost`, the certificate's name)
/// trusting `ca`.
fn tls_client(addr: SocketAddr, ca: &str, gw: &Provisioned) -> (AsyncClient, EventLoop) {
    let mut options = MqttOptions::new(gw.serial.as_str(), "localhost", addr.port());
    options.set_credentials(gw.serial.as_str(), gw.token.as_str());
    options.set_keep_alive(Duration::from_secs(30));
    options.set_transport(Transport::tls(ca.as_bytes().to_vec(), None, None));
    AsyncClient::new(options, 16)
}

/// Polls until the CONNACK or the error that ended the connection.
async fn connect_outcome(events: &mut EventLoop) -> Result<ConnectReturnCode, ConnectionError> {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.poll())
            .await
            .expect("neither CONNACK nor an error in 10 s")
        {
            Ok(Event::Incoming(Packet::ConnAck(ack))) => return Ok(ack.code),
            Ok(_) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Connects over TLS trusting `pem`'s certificate and waits for an accepting CONNACK.
async fn connect(addr: SocketAddr, pem: &Pem, gw: &Provisioned) -> (AsyncClient, EventLoop) {
    let (client, mut events) = tls_client(addr, &pem.cert_pem, gw);
    assert_eq!(connect_outcome(&mut events).await.unwrap(), ConnectReturnCode::Success);
    (client, events)
}

/// Publishes a measurement of datatype 12 at QoS 1 and waits for the PUBACK (sent after commit).
async fn measure(client: &AsyncClient, events: &mut EventLoop, value: f64) {
    let payload = json!({"ts": 1_763_726_400, "values": {"12": value}}).to_string();
    client
        .publish("v1/gateway/measurements", QoS::AtLeastOnce, false, payload)
        .await
        .unwrap();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.poll())
            .await
            .expect("no PUBACK in 10 s")
        {
            Ok(Event::Incoming(Packet::PubAck(_))) => return,
            Ok(_) => {}
            Err(e) => panic!("connection failed before PUBACK: {e}"),
        }
    }
}

/// Values stored in `group`, latest first, read through the REST API.
async fn stored_values(app: &TestApp, admin: &str, group: &str) -> Vec<f64> {
    let path = format!("/api/v2/data?filter[id_group]={group}");
    let body = send(app.get(&path, admin)).await.expect(200).json();
    body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["value"].as_f64().unwrap())
        .collect()
}

/// Asserts the server closes `raw` within `within` without having sent an MQTT packet.
async fn assert_closed_without_mqtt(raw: &mut tokio::net::TcpStream, within: Duration) {
    let mut received = Vec::new();
    let read = tokio::time::timeout(within, raw.read_to_end(&mut received))
        .await
        .expect("connection not closed in time");
    // A TLS alert record (content type 21) may come first; a CONNACK (0x20) never does.
    assert!(
        read.is_err() || received.first().is_none_or(|b| *b == 21),
        "the server answered in the clear: {received:?}"
    );
}

#[tokio::test]
async fn a_gateway_over_tls_is_served_and_its_data_stored() {
    let pem = self_signed("served");
    let (app, mqtts) = spawn(&pem).await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-TLS").await;
    let (client, mut events) = connect(mqtts, &pem, &gw).await;
    measure(&client, &mut events, 21.5).await;
    // The PUBACK came after the commit: the value is readable now.
    assert_eq!(stored_values(&app, &admin, &gw.group).await, [21.5]);
    let device = send(app.get(&format!("/api/v2/physical-device/{}", gw.id), &admin))
        .await
        .expect(200)
        .json();
    assert!(device["last_data_at"].as_i64().is_some(), "{device}");

    // The same gateway with a wrong token is refused as over plain TCP.
    let wrong = Provisioned {
        token: "wrong".into(),
        ..gw
    };
    let (_wrong_client, mut wrong_events) = tls_client(mqtts, &pem.cert_pem, &wrong);
    assert!(
        matches!(
            connect_outcome(&mut wrong_events).await,
            Err(ConnectionError::ConnectionRefused(
                ConnectReturnCode::BadUserNamePassword
            ))
        ),
        "a wrong token over TLS must be refused with return code 4"
    );
}

#[tokio::test]
async fn failed_handshakes_end_only_their_own_connection() {
    let pem = self_signed("handshakes");
    let (app, mqtts) = spawn(&pem).await;
    let (_, admin) = app.admin().await;
    let gw = provision(&app, &admin, "GW-TLS-OK").await;
    let (client, mut events) = connect(mqtts, &pem, &gw).await;

    // A client trusting another certificate refuses the server's: no MQTT is exchanged.
    let stranger = self_signed("stranger");
    let other = provision(&app, &admin, "GW-TLS-UNTRUSTING").await;
    let (_c, mut untrusting) = tls_client(mqtts, &stranger.cert_pem, &other);
    let refused = connect_outcome(&mut untrusting).await;
    assert!(
        matches!(refused, Err(ConnectionError::Tls(_))),
        "an untrusted certificate must fail the handshake: {refused:?}"
    );

    // A plain MQTT client on the TLS port gets no CONNACK.
    let mut options = MqttOptions::new("plain", mqtts.ip().to_string(), mqtts.port());
    options.set_credentials(other.serial.as_str(), other.token.as_str());
    let (_c, mut plain) = AsyncClient::new(options, 16);
    let outcome = connect_outcome(&mut plain).await;
    assert!(outcome.is_err(), "plain MQTT on the TLS port must fail: {outcome:?}");

    // Bytes that are neither TLS nor MQTT: the connection is closed.
    let mut raw = tokio::net::TcpStream::connect(mqtts).await.unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    assert_closed_without_mqtt(&mut raw, Duration::from_secs(5)).await;

    // The gateway connected before all this is unaffected, and new ones are still served.
    measure(&client, &mut events, 1.0).await;
    let later = provision(&app, &admin, "GW-TLS-LATER").await;
    let (later_client, mut later_events) = connect(mqtts, &pem, &later).await;
    measure(&later_client, &mut later_events, 2.0).await;
    assert_eq!(stored_values(&app, &admin, &gw.group).await, [1.0]);
    assert_eq!(stored_values(&app, &admin, &later.group).await, [2.0]);
    let metrics = app.state.metrics.render();
    assert!(
        metrics.contains("devicecloud_mqtt_tls_handshake_failures_total{reason=\"failed\"}"),
        "failed handshakes are counted"
    );
}

#[tokio::test]
async fn a_silent_client_is_closed_by_the_handshake_timeout() {
    let pem = self_signed("silent");
    let (app, mqtts) = spawn(&pem).await;
    let (_, admin) = app.admin().await;
    let mut silent = tokio::net::TcpStream::connect(mqtts).await.unwrap();
    // Meanwhile a gateway completes its handshake and is served.
    let gw = provision(&app, &admin, "GW-TLS-BESIDE").await;
    let (client, mut events) = connect(mqtts, &pem, &gw).await;
    measure(&client, &mut events, 3.0).await;
    // The handshake has the 10 s of a CONNECT; a little more for a loaded machine.
    assert_closed_without_mqtt(&mut silent, Duration::from_secs(15)).await;
}

#[test]
fn unusable_files_are_refused_naming_the_file() {
    let pem = self_signed("files");
    let other = self_signed("files-other");
    let missing = pem.cert.with_file_name("missing.pem");

    let error = tls::acceptor(&missing, &pem.key).err().expect("refused");
    assert!(matches!(error, TlsError::Read { .. }), "{error:?}");
    assert!(error.to_string().contains("missing.pem"), "{error}");

    // A key file given as the certificate, and the reverse.
    let error = tls::acceptor(&pem.key, &pem.key).err().expect("refused");
    assert!(matches!(error, TlsError::NoCertificate(_)), "{error:?}");
    assert!(error.to_string().contains("key.pem"), "{error}");
    let error = tls::acceptor(&pem.cert, &pem.cert).err().expect("refused");
    assert!(matches!(error, TlsError::NoPrivateKey(_)), "{error:?}");

    let broken = pem.cert.with_file_name("broken.pem");
    std::fs::write(&broken, "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n").unwrap();
    let error = tls::acceptor(&broken, &pem.key).err().expect("refused");
    assert!(matches!(error, TlsError::Pem { .. }), "{error:?}");
    assert!(error.to_string().contains("broken.pem"), "{error}");

    // Another certificate's key does not go with this certificate.
    let error = tls::acceptor(&pem.cert, &other.key).err().expect("refused");
    assert!(matches!(error, TlsError::Unusable { .. }), "{error:?}");

    assert!(tls::acceptor(&pem.cert, &pem.key).is_ok());
}
