//! One simulated gateway on the wire (docs/gateway-protocol.md, "Transport" to "Commands") with
//! rumqttc: connect, hello, assets, commands subscription, measurements at its rate, an answer to
//! every command, and the effects that follow (restart reconnects, GO power cycles, Z-wave outcome
//! events); and its twin (docs/gateway-protocol.md, "Twin"): it applies the desired keys it
//! understands (`reporting_interval_s`) and reports them with the version applied.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use devicecloud_protocol::twin::{self, Reported};
use devicecloud_protocol::{
    COMMANDS_FILTER, CommandRequest, Event, GatewayTopic, Power, PowerState, Timestamp, devices_payload,
    events_payload, measurements_payload,
};
use rumqttc::{AsyncClient, Event as MqttEvent, MqttOptions, Packet, QoS};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use devicecloud_protocol::firmware::UpdateParams;

use crate::firmware;
use crate::model::{FIRMWARE_FAILED_EVENT, FollowUp, Model, UpdateFailure, ZWAVE_EXCLUSION_EVENT};
use crate::spec::{Behaviour, FleetOptions, FleetStats, GatewaySpec, History};

/// What the connection's poller hands to the gateway.
enum Incoming {
    /// The subscription is acknowledged: hello and assets are processed, commands will come.
    Ready,
    /// A command request: its id and payload.
    Command(String, Vec<u8>),
    /// A desired document (`v1/gateway/twin/desired`).
    Desired(Vec<u8>),
    /// The connection ended.
    Closed,
}

/// Why a session ended.
enum Ended {
    Shutdown,
    /// Reconnect after this pause (restart, power cycle, lost connection).
    Reconnect(Duration),
}

/// Unix time now, in seconds.
fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Runs the gateway until `shutdown`, reconnecting whenever a session ends.
pub async fn run(
    spec: GatewaySpec,
    seed: u64,
    options: Arc<FleetOptions>,
    stats: Arc<FleetStats>,
    shutdown: CancellationToken,
) {
    let history = options
        .history
        .filter(|_| spec.kind != devicecloud_protocol::ModuleKind::Go);
    // The model starts where its history does, so counters grow through it.
    let start = now() - history.map_or(0.0, |h| h.span.as_secs_f64());
    let firmware_key = options.firmware.as_ref().map(|source| source.public_key.clone());
    let model = Model::new(&spec.serial, spec.kind, spec.wifi_enabled, seed, start).with_firmware_key(firmware_key);
    let mut gateway = Gateway {
        spec: &spec,
        model,
        interval: options.interval,
        history,
        options: &options,
        stats: &stats,
        shutdown: &shutdown,
    };
    loop {
        match session(&mut gateway).await {
            Ended::Shutdown => return,
            Ended::Reconnect(pause) => {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(pause) => {}
                }
                gateway.model.rebooted(now());
            }
        }
    }
}

/// A simulated gateway between its sessions: what it is, its state, and what it runs under.
struct Gateway<'a> {
    spec: &'a GatewaySpec,
    model: Model,
    /// Time between measurements: the fleet's, until the twin's `reporting_interval_s` says
    /// otherwise (kept across sessions, as firmware keeps its configuration).
    interval: Duration,
    /// The past it still has to send, if any.
    history: Option<History>,
    options: &'a FleetOptions,
    stats: &'a FleetStats,
    shutdown: &'a CancellationToken,
}

/// One MQTT connection, from CONNECT to its end.
async fn session(gateway: &mut Gateway<'_>) -> Ended {
    let (spec, options) = (gateway.spec, gateway.options);
    let mut mqtt = MqttOptions::new(spec.serial.clone(), options.mqtt_host.clone(), options.mqtt_port);
    mqtt.set_credentials(spec.serial.clone(), spec.token.clone());
    mqtt.set_keep_alive(Duration::from_secs(30));
    mqtt.set_max_packet_size(256 * 1024, 256 * 1024);
    let (client, mut eventloop) = AsyncClient::new(mqtt, 64);
    // Answers are small packets sent right after the request arrives: without TCP_NODELAY,
    // Nagle's algorithm holds them for the peer's delayed ACK (tens of milliseconds).
    let mut network = eventloop.network_options();
    network.set_tcp_nodelay(true);
    eventloop.set_network_options(network);
    let (tx, mut incoming) = mpsc::channel(64);
    // The poller drives the connection; it stops at the first error so that this gateway, not
    // rumqttc, decides when to reconnect.
    let poller = tokio::spawn(async move {
        loop {
            match eventloop.poll().await {
                Ok(MqttEvent::Incoming(Packet::SubAck(_))) => {
                    let _ = tx.send(Incoming::Ready).await;
                }
                Ok(MqttEvent::Incoming(Packet::Publish(p))) => {
                    if let Some(id) = p.topic.strip_prefix("v1/gateway/commands/") {
                        let _ = tx.send(Incoming::Command(id.to_string(), p.payload.to_vec())).await;
                    } else if p.topic == twin::DESIRED_TOPIC {
                        let _ = tx.send(Incoming::Desired(p.payload.to_vec())).await;
                    }
                }
                Ok(_) => {}
                Err(_) => {
                    let _ = tx.send(Incoming::Closed).await;
                    return;
                }
            }
        }
    });
    let ended = connected(gateway, &client, &mut incoming).await;
    let _ = client.disconnect().await;
    // Give the poller a moment to flush the last answer and the DISCONNECT.
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while let Some(message) = incoming.recv().await {
            if matches!(message, Incoming::Closed) {
                break;
            }
        }
    })
    .await;
    poller.abort();
    ended
}

async fn publish(client: &AsyncClient, topic: GatewayTopic, payload: Vec<u8>) -> bool {
    client
        .publish(topic.as_topic(), QoS::AtLeastOnce, false, payload)
        .await
        .is_ok()
}

async fn connected(gateway: &mut Gateway<'_>, client: &AsyncClient, incoming: &mut mpsc::Receiver<Incoming>) -> Ended {
    let Gateway {
        spec,
        model,
        interval,
        history,
        options,
        stats,
        shutdown,
    } = gateway;
    let retry = Ended::Reconnect(Duration::from_secs(1));
    // Hello first, then assets, then the subscription: the server handles a connection's
    // packets in order, so SUBACK means the gateway is known connected with its assets.
    if !publish(client, GatewayTopic::Hello, model.hello().to_payload()).await
        || !publish(client, GatewayTopic::Devices, devices_payload(&model.assets())).await
        || client.subscribe(COMMANDS_FILTER, QoS::AtLeastOnce).await.is_err()
        || client.subscribe(twin::DESIRED_TOPIC, QoS::AtLeastOnce).await.is_err()
    {
        return retry;
    }
    let mut ready = false;
    let mut tick = ticker(*interval);
    let power_cycle = async {
        match (spec.kind, options.power_cycle) {
            (devicecloud_protocol::ModuleKind::Go, Some(every)) => tokio::time::sleep(every).await,
            _ => std::future::pending().await,
        }
    };
    tokio::pin!(power_cycle);
    let ended = loop {
        tokio::select! {
            _ = shutdown.cancelled() => break Ended::Shutdown,
            _ = tick.tick(), if ready && *interval > Duration::ZERO => {
                let readings = model.measurements(now());
                if !publish(client, GatewayTopic::Measurements, measurements_payload(&readings)).await {
                    break retry;
                }
                stats.measurements.fetch_add(readings.len() as u64, Ordering::Relaxed);
            }
            () = &mut power_cycle => {
                // "The device is turned off": the data session closes; turned on again, a new one
                // opens.
                let off = Power { state: PowerState::Off };
                publish(client, GatewayTopic::Power, off.to_payload()).await;
                stats.power_cycles.fetch_add(1, Ordering::Relaxed);
                break Ended::Reconnect(options.power_off);
            }
            message = incoming.recv() => match message {
                Some(Incoming::Ready) => {
                    if !ready {
                        if let Some(past) = history.take()
                            && !send_history(client, model, past, stats).await
                        {
                            break retry;
                        }
                        ready = true;
                        stats.connected.fetch_add(1, Ordering::Relaxed);
                        stats.connects.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Some(Incoming::Desired(payload)) => match desired(client, &payload).await {
                    Ok(Some(applied)) if applied != *interval => {
                        *interval = applied;
                        tick = ticker(applied);
                    }
                    Ok(_) => {}
                    Err(()) => break retry,
                },
                Some(Incoming::Command(id, payload)) => {
                    if let Some(ended) = command(spec, model, options, stats, client, id, &payload).await {
                        break ended;
                    }
                }
                Some(Incoming::Closed) | None => break retry,
            },
        }
    };
    if ready {
        stats.connected.fetch_sub(1, Ordering::Relaxed);
    }
    ended
}

/// The measurement timer of `interval`; a zero interval sends no measurements, and the timer
/// then only needs a valid period.
fn ticker(interval: Duration) -> tokio::time::Interval {
    let period = if interval.is_zero() {
        Duration::from_secs(3600)
    } else {
        interval
    };
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}

/// Longest `reporting_interval_s` the simulated firmware applies (a day).
const MAX_REPORTING_INTERVAL_S: u64 = 86_400;

/// Applies a desired document: the gateway's own `reporting_interval_s` (1 s to a day) when
/// given, which it reports back with the version (an asset's document has nothing the simulator
/// applies; it reports the version alone). Returns the measurement interval it applied, if any;
/// `Err` when the report could not be sent. A document that does not read is ignored, as
/// firmware would.
async fn desired(client: &AsyncClient, payload: &[u8]) -> Result<Option<Duration>, ()> {
    let Ok(doc) = twin::parse_desired(payload) else {
        return Ok(None);
    };
    let mut reported = serde_json::Map::new();
    let mut interval = None;
    if doc.device.is_none()
        && let Some(seconds) = doc
            .desired
            .get("reporting_interval_s")
            .and_then(serde_json::Value::as_u64)
        && (1..=MAX_REPORTING_INTERVAL_S).contains(&seconds)
    {
        reported.insert("reporting_interval_s".into(), seconds.into());
        interval = Some(Duration::from_secs(seconds));
    }
    let report = Reported {
        device: doc.device,
        reported: serde_json::Value::Object(reported),
        version: Some(doc.version),
    };
    if publish(client, GatewayTopic::TwinReported, report.to_payload()).await {
        Ok(interval)
    } else {
        Err(())
    }
}

/// Readings per history message (about 100 KiB for a PLUS module).
const HISTORY_BATCH: usize = 200;

/// Publishes the readings of `past` up to now, oldest first, in batches.
async fn send_history(client: &AsyncClient, model: &mut Model, past: History, stats: &FleetStats) -> bool {
    let end = now();
    let step = past.step.as_secs_f64().max(1.0);
    let mut t = end - past.span.as_secs_f64();
    let mut batch = Vec::new();
    let mut steps = 0;
    while t < end {
        batch.extend(model.measurements(t));
        steps += 1;
        t += step;
        if steps % HISTORY_BATCH == 0 || t >= end {
            if !publish(client, GatewayTopic::Measurements, measurements_payload(&batch)).await {
                return false;
            }
            stats.measurements.fetch_add(batch.len() as u64, Ordering::Relaxed);
            batch.clear();
        }
    }
    true
}

/// Answers one command as the gateway's behaviour says; `Some` when the session must end.
async fn command(
    spec: &GatewaySpec,
    model: &mut Model,
    options: &FleetOptions,
    stats: &FleetStats,
    client: &AsyncClient,
    request_id: String,
    payload: &[u8],
) -> Option<Ended> {
    let Ok(request) = CommandRequest::parse(payload) else {
        // An unreadable request gets a 400 from the device, as firmware would answer.
        let response = devicecloud_protocol::CommandResponse::failure(400, "Invalid request");
        publish(client, GatewayTopic::Response { request_id }, response.to_payload()).await;
        return None;
    };
    let (response, follow_up) = model.answer(&request, now());
    if request.method == devicecloud_protocol::CommandMethod::Update && follow_up.is_none() {
        stats.update_failures.fetch_add(1, Ordering::Relaxed);
    }
    let topic = GatewayTopic::Response { request_id };
    match spec.behaviour {
        Behaviour::Silent => return None,
        Behaviour::Slow(delay) => {
            // Answered later without holding up this gateway's other traffic.
            let client = client.clone();
            let payload = response.to_payload();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                publish(&client, topic, payload).await;
            });
        }
        Behaviour::Normal => {
            if !publish(client, topic, response.to_payload()).await {
                return Some(Ended::Reconnect(Duration::from_secs(1)));
            }
        }
    }
    stats.commands.fetch_add(1, Ordering::Relaxed);
    match follow_up? {
        FollowUp::Restart => Some(Ended::Reconnect(Duration::from_millis(200))),
        FollowUp::PublishLatest => {
            let readings = model.measurements(now());
            publish(client, GatewayTopic::Measurements, measurements_payload(&readings)).await;
            stats.measurements.fetch_add(readings.len() as u64, Ordering::Relaxed);
            None
        }
        FollowUp::ZwaveOutcome { node, value } => {
            let event = Event {
                device: Some(node),
                ts: Timestamp::from_unix_f64(now()),
                event_type: ZWAVE_EXCLUSION_EVENT,
                value,
                datatype: None,
            };
            publish(client, GatewayTopic::Events, events_payload(&[event])).await;
            None
        }
        FollowUp::Install(params) => install(spec, model, options, stats, client, &params).await,
    }
}

/// Downloads, checks and installs an accepted update, then restarts on it (`Some`: the
/// session ends); a failure is reported as event 221 and the gateway carries on. A rehearsed
/// failure (`--fail-updates`) is reported the same way, or restarts on the old version.
async fn install(
    spec: &GatewaySpec,
    model: &mut Model,
    options: &FleetOptions,
    stats: &FleetStats,
    client: &AsyncClient,
    params: &UpdateParams,
) -> Option<Ended> {
    let source = options.firmware.as_ref()?;
    let downloaded = firmware::download(firmware::http(), source, &spec.serial, &spec.token, params).await;
    let failure = match downloaded {
        Err(cause) => Err(cause),
        Ok(()) => match model.update_fails(source.fail_percent) {
            None => Ok(()),
            Some(UpdateFailure::Reported) => Err("flash verification failed (rehearsed)".to_string()),
            Some(UpdateFailure::RolledBack) => {
                stats.update_failures.fetch_add(1, Ordering::Relaxed);
                return Some(Ended::Reconnect(Duration::from_millis(200)));
            }
        },
    };
    match failure {
        Ok(()) => {
            model.install(&params.component, &params.version);
            stats.updates.fetch_add(1, Ordering::Relaxed);
            Some(Ended::Reconnect(Duration::from_millis(200)))
        }
        Err(cause) => {
            stats.update_failures.fetch_add(1, Ordering::Relaxed);
            let event = Event {
                device: None,
                ts: Timestamp::from_unix_f64(now()),
                event_type: FIRMWARE_FAILED_EVENT,
                value: cause,
                datatype: None,
            };
            if publish(client, GatewayTopic::Events, events_payload(&[event])).await {
                None
            } else {
                Some(Ended::Reconnect(Duration::from_secs(1)))
            }
        }
    }
}
