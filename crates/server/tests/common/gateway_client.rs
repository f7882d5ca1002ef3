//! A gateway in tests: provisioned through the API, connected over real MQTT (rumqttc), sending
//! protocol messages and waiting for their PUBACK (sent after the commit).

use std::collections::VecDeque;
use std::time::Duration;

use reqwest::Method;
use rumqttc::{AsyncClient, ConnectReturnCode, Event, EventLoop, MqttOptions, Packet, QoS};
use serde_json::{Value, json};

use super::{TestApp, send};

/// A provisioned, connected gateway.
pub struct TestGateway {
    pub id: String,
    pub serial: String,
    pub group: String,
    pub token: String,
    client: AsyncClient,
    events: EventLoop,
    /// What the service published to the gateway while it waited for something else: topic
    /// and payload.
    inbox: VecDeque<(String, Vec<u8>)>,
}

impl TestGateway {
    /// Provisions `serial` of `kind` into `group` (as `admin`) and connects it.
    pub async fn connect(app: &TestApp, admin: &str, group: &str, serial: &str, kind: &str) -> TestGateway {
        let body = json!({"id_group": group, "serial_hardware": serial, "kind": kind});
        let reply = send(app.request(Method::POST, "/api/v2/physical-device", admin).json(&body)).await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        let body = reply.json();
        let id = body["id_physical_device"].as_str().unwrap().to_string();
        let token = body["device_token"].as_str().unwrap().to_string();
        TestGateway::reconnect(app, &id, group, serial, &token).await
    }

    /// Connects again with the credentials of a gateway provisioned before.
    pub async fn reconnect(app: &TestApp, id: &str, group: &str, serial: &str, token: &str) -> TestGateway {
        let token_kept = token.to_string();
        let mut options = MqttOptions::new(serial, app.mqtt_addr.ip().to_string(), app.mqtt_addr.port());
        options.set_credentials(serial, token);
        options.set_keep_alive(Duration::from_secs(30));
        options.set_max_packet_size(1 << 20, 1 << 20);
        let (client, mut events) = AsyncClient::new(options, 64);
        match tokio::time::timeout(Duration::from_secs(10), events.poll()).await {
            Ok(Ok(Event::Incoming(Packet::ConnAck(ack)))) => assert_eq!(ack.code, ConnectReturnCode::Success),
            other => panic!("expected CONNACK, got {other:?}"),
        }
        TestGateway {
            id: id.to_string(),
            serial: serial.to_string(),
            group: group.to_string(),
            token: token_kept,
            client,
            events,
            inbox: VecDeque::new(),
        }
    }

    /// The next message the service publishes on `topic` (kept ones first), as JSON; `None`
    /// when none comes within `wait`.
    pub async fn received(&mut self, topic: &str, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(at) = self.inbox.iter().position(|(t, _)| t == topic) {
                let (_, payload) = self.inbox.remove(at).unwrap();
                return Some(serde_json::from_slice(&payload).expect("a JSON payload"));
            }
            match tokio::time::timeout_at(deadline, self.events.poll()).await {
                Err(_) => return None,
                Ok(Ok(Event::Incoming(Packet::Publish(p)))) => self.inbox.push_back((p.topic, p.payload.to_vec())),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => panic!("connection failed while waiting on {topic}: {e}"),
            }
        }
    }

    /// Subscribes to `filter` and waits for the SUBACK.
    pub async fn subscribe(&mut self, filter: &str) {
        self.client.subscribe(filter, QoS::AtLeastOnce).await.unwrap();
        loop {
            match tokio::time::timeout(Duration::from_secs(10), self.events.poll())
                .await
                .expect("no SUBACK in 10 s")
            {
                Ok(Event::Incoming(Packet::SubAck(_))) => return,
                Ok(Event::Incoming(Packet::Publish(p))) => self.inbox.push_back((p.topic, p.payload.to_vec())),
                Ok(_) => {}
                Err(e) => panic!("connection failed before SUBACK: {e}"),
            }
        }
    }

    /// Disconnects cleanly and waits until the connection is closed.
    pub async fn disconnect(mut self) {
        self.client.disconnect().await.unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            while self.events.poll().await.is_ok() {}
        })
        .await;
    }

    /// Publishes at QoS 1 and waits for the PUBACK.
    pub async fn publish(&mut self, topic: &str, payload: &Value) {
        self.client
            .publish(topic, QoS::AtLeastOnce, false, payload.to_string())
            .await
            .unwrap();
        loop {
            match tokio::time::timeout(Duration::from_secs(10), self.events.poll())
                .await
                .expect("no PUBACK in 10 s")
            {
                Ok(Event::Incoming(Packet::PubAck(_))) => return,
                Ok(Event::Incoming(Packet::Publish(p))) => self.inbox.push_back((p.topic, p.payload.to_vec())),
                Ok(_) => {}
                Err(e) => panic!("connection failed before PUBACK: {e}"),
            }
        }
    }

    /// Waits until the service closes the connection (panics after 10 s).
    pub async fn until_closed(&mut self) {
        loop {
            match tokio::time::timeout(Duration::from_secs(10), self.events.poll()).await {
                Err(_) => panic!("the connection was not closed within 10 s"),
                Ok(Err(_)) => return,
                Ok(Ok(_)) => {}
            }
        }
    }

    /// A hello of `kind` over cellular, with any extra fields merged in.
    pub async fn hello(&mut self, kind: &str, extra: Value) {
        let mut hello = json!({"kind": kind, "connection": "cellular", "signal": 20,
            "platform_software_version": "5.1.2", "app_software_version": "2.4.0", "wifi_enabled": true});
        if let (Some(map), Value::Object(extra)) = (hello.as_object_mut(), extra) {
            map.extend(extra);
        }
        self.publish("v1/gateway/hello", &hello).await;
    }

    pub async fn measurements(&mut self, batch: &Value) {
        self.publish("v1/gateway/measurements", batch).await;
    }

    pub async fn events(&mut self, events: &Value) {
        self.publish("v1/gateway/events", events).await;
    }

    pub async fn power_off(&mut self) {
        self.publish("v1/gateway/power", &json!({"state": "off"})).await;
    }
}
