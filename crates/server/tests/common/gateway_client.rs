//! A gateway in tests: provisioned through the API, connected over real MQTT (rumqttc), sending
//! protocol messages and waiting for their PUBACK (sent after the commit).

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
        let token_kept = token.clone();
        let mut options = MqttOptions::new(serial, app.mqtt_addr.ip().to_string(), app.mqtt_addr.port());
        options.set_credentials(serial, &token);
        options.set_keep_alive(Duration::from_secs(30));
        options.set_max_packet_size(1 << 20, 1 << 20);
        let (client, mut events) = AsyncClient::new(options, 64);
        match tokio::time::timeout(Duration::from_secs(10), events.poll()).await {
            Ok(Ok(Event::Incoming(Packet::ConnAck(ack)))) => assert_eq!(ack.code, ConnectReturnCode::Success),
            other => panic!("expected CONNACK, got {other:?}"),
        }
        TestGateway {
            id,
            serial: serial.to_string(),
            group: group.to_string(),
            token: token_kept,
            client,
            events,
        }
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
