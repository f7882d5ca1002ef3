//! A gateway that publishes QoS 1 measurement messages over a real MQTT client (rumqttc) and
//! remembers which messages the server acknowledged, when, and how long the PUBACK took.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Result;
use devicecloud_protocol::{Measurement, Timestamp, measurements_payload};
use rumqttc::{AsyncClient, ConnectReturnCode, Event, MqttOptions, Outgoing, Packet, QoS};
use tokio::sync::mpsc;

use super::server::GatewayCredentials;

/// One message: `points` points at seconds `first_second..first_second + measurements`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    pub first_second: i64,
    pub measurements: i64,
    pub datatypes: u32,
}

impl Message {
    /// The protocol payload: one measurement a second, values for datatypes 1..=datatypes.
    pub fn payload(&self) -> Vec<u8> {
        let batch: Vec<Measurement> = (0..self.measurements)
            .map(|i| Measurement {
                device: None,
                ts: Some(Timestamp {
                    seconds: self.first_second + i,
                    microseconds: 0,
                }),
                values: (1..=self.datatypes)
                    .map(|d| (d, (self.first_second + i) as f64 * 0.5 + f64::from(d)))
                    .collect(),
            })
            .collect();
        measurements_payload(&batch)
    }
}

/// What a publisher saw.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Messages acknowledged by PUBACK.
    pub acked: Vec<Message>,
    /// Sent but not acknowledged when the connection ended.
    pub unacked: Vec<Message>,
    /// PUBACK latencies, from the packet leaving the client to its PUBACK.
    pub latencies: Vec<Duration>,
    /// When each PUBACK arrived, in the order of `acked`.
    pub acked_at: Vec<Instant>,
    /// Whether the connection was refused or failed before the end.
    pub failed: bool,
}

/// Publishes `messages` (in order, at most `inflight` unacknowledged) until they are all
/// acknowledged, `deadline` passes, or the connection fails.
pub async fn publish(
    mqtt: std::net::SocketAddr,
    gateway: &GatewayCredentials,
    messages: Vec<Message>,
    inflight: u16,
    deadline: Instant,
) -> Result<Outcome> {
    publish_paced(mqtt, gateway, messages, inflight, deadline, None).await
}

/// A steady rate for one publisher: a message every `every`, the first after `offset`.
/// Publishers given offsets spread over `every` send evenly over time, not all at once.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    pub every: Duration,
    pub offset: Duration,
}

impl Pace {
    /// The pace of publisher `index` of `count`, each sending one message every `every`: the
    /// publishers' first messages spread evenly over `every`.
    pub fn spread(every: Duration, index: usize, count: usize) -> Pace {
        let offset = every.mul_f64(index as f64 / count.max(1) as f64);
        Pace { every, offset }
    }
}

/// [`publish`] at a pace (late messages go out at once): a steady rate rather than as fast as
/// the server acknowledges.
pub async fn publish_paced(
    mqtt: std::net::SocketAddr,
    gateway: &GatewayCredentials,
    messages: Vec<Message>,
    inflight: u16,
    deadline: Instant,
    pace: Option<Pace>,
) -> Result<Outcome> {
    let mut options = MqttOptions::new(gateway.serial.clone(), mqtt.ip().to_string(), mqtt.port());
    options.set_credentials(gateway.serial.clone(), gateway.token.clone());
    options.set_keep_alive(Duration::from_secs(30));
    options.set_inflight(inflight.max(1));
    options.set_max_packet_size(1 << 20, 1 << 20);
    let (client, mut events) = AsyncClient::new(options, usize::from(inflight.max(1)) * 2);
    let mut outcome = Outcome::default();
    // Messages go out in order; rumqttc reports each packet id as it writes the packet.
    let (queued_tx, mut queued) = mpsc::unbounded_channel::<Message>();
    let total = messages.len();
    let feeder = {
        let client = client.clone();
        tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            for (i, message) in messages.into_iter().enumerate() {
                if let Some(Pace { every, offset }) = pace {
                    let at = start + offset + every * u32::try_from(i).unwrap_or(u32::MAX);
                    tokio::time::sleep_until(at).await;
                }
                if queued_tx.send(message).is_err() {
                    break;
                }
                if client
                    .publish("v1/gateway/measurements", QoS::AtLeastOnce, false, message.payload())
                    .await
                    .is_err()
                {
                    break;
                }
            }
        })
    };
    let mut sent: HashMap<u16, (Message, Instant)> = HashMap::new();
    let mut done = 0;
    while done < total && Instant::now() < deadline {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let event = match tokio::time::timeout(remaining, events.poll()).await {
            Err(_) => break,
            Ok(Err(_)) => {
                outcome.failed = true;
                break;
            }
            Ok(Ok(event)) => event,
        };
        match event {
            Event::Incoming(Packet::ConnAck(ack)) if ack.code != ConnectReturnCode::Success => {
                outcome.failed = true;
                break;
            }
            Event::Outgoing(Outgoing::Publish(pkid)) => {
                if let Some(message) = queued.recv().await {
                    sent.insert(pkid, (message, Instant::now()));
                }
            }
            Event::Incoming(Packet::PubAck(ack)) => {
                if let Some((message, at)) = sent.remove(&ack.pkid) {
                    outcome.latencies.push(at.elapsed());
                    outcome.acked_at.push(Instant::now());
                    outcome.acked.push(message);
                    done += 1;
                }
            }
            _ => {}
        }
    }
    feeder.abort();
    outcome.unacked = sent.into_values().map(|(m, _)| m).collect();
    // The request queue may be full of messages that will never go out: do not wait on it.
    let _ = client.try_disconnect();
    // Let the DISCONNECT go out.
    let _ = tokio::time::timeout(Duration::from_millis(200), events.poll()).await;
    Ok(outcome)
}

/// Measurements, and values each, of a [`flood`] message: 500 points.
pub const FLOOD_MEASUREMENTS: i64 = 50;
pub const FLOOD_DATATYPES: u32 = 10;

/// Every gateway of `fleet` publishing 500-point messages (50 measurements of 10 values, one a
/// second from `first_second`), 16 in flight, as fast as they are acknowledged until
/// `deadline`: full-rate ingest for a benchmark to measure something else under.
pub fn flood(
    mqtt: std::net::SocketAddr,
    fleet: &[GatewayCredentials],
    first_second: i64,
    deadline: Instant,
) -> Vec<tokio::task::JoinHandle<Result<Outcome>>> {
    fleet
        .iter()
        .cloned()
        .map(|gateway| {
            tokio::spawn(async move {
                // More messages than can go out in time; the deadline ends the run.
                let messages = (0..20_000)
                    .map(|i| Message {
                        first_second: first_second + i * FLOOD_MEASUREMENTS,
                        measurements: FLOOD_MEASUREMENTS,
                        datatypes: FLOOD_DATATYPES,
                    })
                    .collect();
                publish(mqtt, &gateway, messages, 16, deadline).await
            })
        })
        .collect()
}
