//! One gateway connection: version detection, CONNECT and its authentication, then packets until
//! the connection ends (docs/gateway-protocol.md, "Transport" and "Topics"). Meaning lives in
//! `gateway`; this file only frames, acknowledges and enforces the transport rules.

use std::num::NonZeroU16;
use std::time::Duration;

use bytes::BytesMut;
use futures::{SinkExt, StreamExt};
use rmqtt_codec::types::QoS;
use rmqtt_codec::version::{ProtocolVersion, VersionCodec};
use rmqtt_codec::{MqttCodec, MqttPacket, v3, v5};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

use crate::acks::Acks;
use crate::context::Context;
use crate::packets::{self, Connack, Inbound, Version};
use devicecloud_engine::admission::Entry;
use devicecloud_engine::commands::{Outgoing, Pending};
use devicecloud_engine::gateway;
use devicecloud_engine::gateway::registry::Kick;
use devicecloud_engine::gateway::{AuthError, Gateway, GatewayError, authenticate};
use devicecloud_engine::metrics::{Closed, Failed, Outcome};
use devicecloud_engine::peers::{self, Change};
use devicecloud_protocol::twin::DESIRED_TOPIC;
use devicecloud_protocol::{GatewayTopic, command_topic, subscription_allowed};

/// How long a client may take to send CONNECT after opening the connection (and, on the TLS
/// listener, to complete the handshake before that).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a closing connection waits to acknowledge the measurements it queued (they commit
/// whether or not the PUBACK goes out): a peer that stopped reading cannot hold a shutdown.
const ACKNOWLEDGE_ON_CLOSE: Duration = Duration::from_secs(5);

/// What a connection runs on: a TCP stream, or a TLS stream over one. Generic rather than
/// boxed, so plain TCP connections pay nothing for TLS existing.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Stream for S {}

type Transport<S> = Framed<S, MqttCodec>;

/// Runs a connection to its end. `entry` holds the connection's places until its CONNECT is
/// answered; an accepted CONNECT then takes a gateway slot, held until the end, and without one
/// (every slot taken) is answered "server unavailable" and the connection closed.
pub(crate) async fn run<S: Stream>(
    stream: S,
    mut entry: Entry,
    ctx: std::sync::Arc<Context>,
    shutdown: CancellationToken,
) {
    let mut framed = Framed::new(stream, MqttCodec::Version(VersionCodec));
    // One deadline for the whole CONNECT, however its bytes are spread.
    let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
    let version = match tokio::time::timeout_at(deadline, framed.next()).await {
        Ok(Some(Ok((MqttPacket::Version(ProtocolVersion::MQTT3), _)))) => Version::V3,
        Ok(Some(Ok((MqttPacket::Version(ProtocolVersion::MQTT5), _)))) => Version::V5,
        _ => return,
    };
    let max = ctx.max_packet_bytes;
    *framed.codec_mut() = match version {
        Version::V3 => MqttCodec::V3(v3::Codec::new(max)),
        Version::V5 => MqttCodec::V5(v5::Codec::new(max, max)),
    };
    let Ok(Some(Ok((packet, _)))) = tokio::time::timeout_at(deadline, framed.next()).await else {
        return;
    };
    let Inbound::Connect {
        client_id,
        username,
        password,
        keep_alive,
    } = Inbound::from(packet)
    else {
        return;
    };

    // The password is a slice of the buffer CONNECT was read into: it is dropped once checked,
    // or it would keep that whole buffer (8 KiB) alive for as long as the connection lasts.
    let authenticated = {
        let (serial, token) = (username.unwrap_or_default(), password.unwrap_or_default());
        Box::pin(authenticate(&ctx.gateway, &serial, &token)).await
    };
    entry.answered();
    let mut gateway = match authenticated {
        Ok(gateway) => gateway,
        Err(e) => {
            let outcome = match e {
                AuthError::BadCredentials => Connack::BadUserNameOrPassword,
                AuthError::NotAuthorized => Connack::NotAuthorized,
                AuthError::Unavailable => Connack::ServiceUnavailable,
            };
            metrics::counter!("devicecloud_mqtt_connect_refused_total", "reason" => e.to_string()).increment(1);
            let _ = framed.send(packets::connack(version, outcome)).await;
            return;
        }
    };
    // A gateway slot is taken only by a connection whose CONNECT is accepted.
    let Some(_slot) = ctx.admission.gateway_slot() else {
        metrics::counter!("devicecloud_mqtt_connect_refused_total", "reason" => "connection limit").increment(1);
        let _ = framed
            .send(packets::connack(version, Connack::ServiceUnavailable))
            .await;
        return;
    };
    let registration = ctx.gateway.gateways.register(&gateway.id);
    ctx.gateway.alarms.connected(&gateway.id).await;
    let (connection, mut kicked, commands) = (registration.id, registration.kicked, registration.commands);
    if framed.send(packets::connack(version, Connack::Accepted)).await.is_err() {
        ctx.gateway.gateways.unregister(&gateway.id, connection);
        Box::pin(gateway.ended(&ctx.gateway, false)).await;
        return;
    }
    metrics::gauge!("devicecloud_mqtt_connections").increment(1.0);
    // A connection of this gateway to another node is taken over by this one.
    peers::apply::tell(
        &ctx.peers,
        Change::Connected {
            device: gateway.id.clone(),
        },
    );
    release_buffers(&mut framed);

    // Keep-alive: no packet within 1.5 times the interval closes the connection
    // (docs/gateway-protocol.md, "Transport"). The deadline moves with inbound packets only:
    // commands the cloud publishes do not count.
    let silence = (keep_alive > 0).then(|| Duration::from_millis(u64::from(keep_alive) * 1500));
    let mut last_inbound = tokio::time::Instant::now();
    let mut taken_over = false;
    let mut waiting = Waiting::default();
    loop {
        let next = async {
            match silence {
                Some(limit) => tokio::time::timeout_at(last_inbound + limit, framed.next()).await.ok(),
                None => Some(framed.next().await),
            }
        };
        let packet = tokio::select! {
            // Shutdown first: no new message is queued once it has begun.
            biased;
            _ = shutdown.cancelled() => {
                // The writer commits what was queued before it stops: acknowledge it.
                acknowledge_on_close(&mut framed, version, &mut waiting.commits).await;
                break;
            }
            kick = &mut kicked => {
                taken_over = kick == Ok(Kick::TakenOver);
                break;
            }
            // `Err` (the registry dropped this connection's queue) disables the branch; the
            // kick that comes with it ends the loop.
            Ok(outgoing) = commands.recv_async() => {
                if publish(&mut framed, version, &mut waiting, *outgoing).await.is_err() {
                    break;
                }
                continue;
            }
            committed = waiting.commits.oldest_committed(), if !waiting.commits.is_empty() => {
                match committed {
                    Ok(Some(id)) => {
                        if framed.send(packets::puback(version, id)).await.is_err() {
                            break;
                        }
                        release_buffers(&mut framed);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        // Not committed: no PUBACK; closing makes the gateway resend after
                        // reconnecting (the later messages too, stored once if they were).
                        tracing::warn!(gateway = %gateway.serial, error = %e, "message not stored");
                        break;
                    }
                }
                continue;
            }
            // With too many messages waiting for their commit, the socket is not read.
            packet = next, if !waiting.commits.is_full() => packet,
        };
        last_inbound = tokio::time::Instant::now();
        let packet = match packet {
            Some(Some(Ok((packet, _)))) => Inbound::from(packet),
            Some(Some(Err(e))) => {
                // Garbage or an oversized packet ends this connection only.
                Outcome::Closed(Closed::ProtocolError).message();
                tracing::debug!(gateway = %gateway.serial, error = %e, "mqtt decode error");
                break;
            }
            Some(None) | None => break,
        };
        // Messages that change what is stored take effect after the measurements before them
        // are committed and acknowledged, as if each message had been handled alone.
        if waits_for_commits(&packet)
            && let Err(failed) = acknowledge_all(&mut framed, version, &mut waiting.commits).await
        {
            // The connection ends before this message is handled: not acknowledged, so the
            // gateway sends it again.
            if matches!(packet, Inbound::Publish { .. }) {
                Outcome::Failed(failed).message();
            }
            break;
        }
        // Boxed: the handling future is large (store calls) and needed only while a packet is
        // handled; inline, every idle connection would carry its space.
        let handled = handle(
            &mut framed,
            version,
            &ctx.gateway,
            &mut gateway,
            &mut waiting,
            &client_id,
            packet,
        );
        match Box::pin(handled).await {
            Ok(true) => release_buffers(&mut framed),
            Ok(false) => {
                // Closing on this message: the ones queued before it are still acknowledged.
                acknowledge_on_close(&mut framed, version, &mut waiting.commits).await;
                break;
            }
            Err(()) => break,
        }
    }
    metrics::gauge!("devicecloud_mqtt_connections").decrement(1.0);
    ctx.gateway.gateways.unregister(&gateway.id, connection);
    // Callers waiting for an answer learn now that none will come on this connection.
    drop(waiting);
    Box::pin(gateway.ended(&ctx.gateway, taken_over)).await;
}

/// What a connection waits for; dropped with the connection.
#[derive(Debug, Default)]
struct Waiting {
    /// Callers waiting for this gateway's answers (dropping them fails the callers).
    answers: Pending,
    /// Measurement messages queued for the writer and not yet acknowledged.
    commits: Acks,
    /// The packet ids of what the cloud publishes (whose PUBACKs it does not wait for).
    packet_ids: PacketIds,
}

/// Whether a packet must wait until the measurements queued before it are committed. Not
/// measurements themselves (they are pipelined), nor command answers, pings and the gateway's
/// own PUBACKs, which store nothing that the order could change and should not wait behind a
/// busy writer (a command answer's PUBACK still queues behind theirs: see `handle`).
fn waits_for_commits(packet: &Inbound) -> bool {
    match packet {
        Inbound::Publish { topic, .. } => {
            !matches!(topic, Some(GatewayTopic::Measurements | GatewayTopic::Response { .. }))
        }
        Inbound::PingRequest | Inbound::Other => false,
        _ => true,
    }
}

/// Waits for every queued measurement message's commit and acknowledges each, in order;
/// `Err` on a failed commit or write (the connection then ends without the remaining PUBACKs),
/// with why.
async fn acknowledge_all<S: Stream>(
    framed: &mut Transport<S>,
    version: Version,
    acks: &mut Acks,
) -> Result<(), Failed> {
    while !acks.is_empty() {
        if let Some(id) = acks.oldest_committed().await.map_err(|e| e.failure())? {
            framed
                .send(packets::puback(version, id))
                .await
                .map_err(|_| Failed::Connection)?;
        }
    }
    release_buffers(framed);
    Ok(())
}

/// [`acknowledge_all`] for a connection about to close, bounded by [`ACKNOWLEDGE_ON_CLOSE`].
async fn acknowledge_on_close<S: Stream>(framed: &mut Transport<S>, version: Version, acks: &mut Acks) {
    let _ = tokio::time::timeout(ACKNOWLEDGE_ON_CLOSE, acknowledge_all(framed, version, acks)).await;
}

/// Queues a measurements message for the writer and its acknowledgement behind the ones before
/// it; `false` closes the connection (the message could not be queued).
async fn queue_measurements(
    ctx: &gateway::Context,
    gateway: &mut Gateway,
    acks: &mut Acks,
    packet_id: Option<NonZeroU16>,
    payload: &[u8],
) -> bool {
    match gateway.queue_measurements(ctx, payload).await {
        Ok((_, receipt)) => acks.push(packet_id, Some(receipt)),
        // A rejected message is still acknowledged, so it is not sent again
        // (docs/gateway-protocol.md, "Messages").
        Err(GatewayError::Rejected(_)) => acks.push(packet_id, None),
        Err(e) => {
            tracing::warn!(gateway = %gateway.serial, error = %e, "message not stored");
            return false;
        }
    }
    true
}

/// Packet identifiers of the cloud's QoS 1 publishes: 1 to 65535, then round again (MQTT 3.1.1
/// §2.3.1). The gateway's PUBACKs need no tracking: a command not answered in time fails anyway.
#[derive(Debug, Default)]
struct PacketIds(u16);

impl PacketIds {
    fn next(&mut self) -> NonZeroU16 {
        self.0 = self.0.checked_add(1).unwrap_or(1);
        NonZeroU16::new(self.0).unwrap_or(NonZeroU16::MIN)
    }
}

/// Publishes what the cloud has for the gateway at QoS 1: a command request, remembering its
/// caller (a request whose caller already gave up is not published), or a desired document.
/// `Err` on a write failure.
async fn publish<S: Stream>(
    framed: &mut Transport<S>,
    version: Version,
    waiting: &mut Waiting,
    outgoing: Outgoing,
) -> Result<(), ()> {
    let (topic, payload) = match outgoing {
        Outgoing::Command(outbound) => match waiting.answers.insert(outbound) {
            Some((request_id, payload)) => (command_topic(&request_id), payload),
            None => return Ok(()),
        },
        Outgoing::Desired(payload) => (DESIRED_TOPIC.to_string(), payload),
    };
    let packet = packets::publish(version, topic, payload, waiting.packet_ids.next());
    framed.send(packet).await.map_err(drop)?;
    release_buffers(framed);
    Ok(())
}

/// Lets go of buffer space an idle connection does not need: the framing starts with 8 KiB for
/// reading and 8 KiB for writing, and a large message leaves its size behind. An empty buffer
/// grows again while a packet is read or written (architecture: small sessions).
fn release_buffers<S>(framed: &mut Transport<S>) {
    const KEEP: usize = 512;
    if framed.read_buffer().is_empty() && framed.read_buffer().capacity() > KEEP {
        *framed.read_buffer_mut() = BytesMut::new();
    }
    if framed.write_buffer().is_empty() && framed.write_buffer().capacity() > KEEP {
        *framed.write_buffer_mut() = BytesMut::new();
    }
}

/// Handles one packet; `Ok(false)` ends the connection normally, `Err` on a write failure.
async fn handle<S: Stream>(
    framed: &mut Transport<S>,
    version: Version,
    ctx: &gateway::Context,
    gateway: &mut Gateway,
    waiting: &mut Waiting,
    client_id: &str,
    packet: Inbound,
) -> Result<bool, ()> {
    match packet {
        Inbound::Publish {
            topic,
            payload,
            qos,
            packet_id,
        } => {
            // QoS 2 is refused by closing the connection (documented in docs/gateway-protocol.md).
            if qos == QoS::ExactlyOnce {
                Outcome::Closed(Closed::Qos2).message();
                return Ok(false);
            }
            // A publish to any other topic closes the connection (MQTT 3.1.1 has no refusal).
            let Some(topic) = topic else {
                Outcome::Closed(Closed::TopicNotAllowed).message();
                return Ok(false);
            };
            let packet_id = packet_id.filter(|_| qos == QoS::AtLeastOnce);
            // Desired documents to publish once the message is acknowledged.
            let mut desired = Vec::new();
            let outcome = match topic {
                // Right after an accepted hello, the documents the devices are behind on.
                GatewayTopic::Hello => match gateway.hello(ctx, &payload, client_id).await {
                    Ok(()) => gateway.twins_behind(ctx).await.map(|docs| desired = docs),
                    Err(e) => Err(e),
                },
                // Acknowledged once committed, by the connection loop (see `acks`).
                GatewayTopic::Measurements => {
                    return Ok(queue_measurements(ctx, gateway, &mut waiting.commits, packet_id, &payload).await);
                }
                GatewayTopic::Events => gateway.events(ctx, &payload).await.map(drop),
                GatewayTopic::Devices => gateway.devices(ctx, &payload).await.map(drop),
                GatewayTopic::Power => gateway.power(ctx, &payload).await,
                GatewayTopic::TwinReported => gateway.twin_reported(ctx, &payload).await,
                GatewayTopic::TwinGet => gateway.twin_get(ctx, &payload).await.map(|doc| desired.push(doc)),
                // An answer goes to the caller waiting for it; a late or unknown one is dropped.
                // An unreadable one fails its caller and is recorded as a rejection.
                GatewayTopic::Response { request_id } => {
                    gateway.response(ctx, &mut waiting.answers, request_id, &payload).await
                }
            };
            // The gateway counted the message's outcome.
            match outcome {
                // A rejected message is still acknowledged, so it is not sent again
                // (docs/gateway-protocol.md, "Messages").
                Ok(()) | Err(GatewayError::Rejected(_)) => {}
                Err(GatewayError::KindMismatch(_)) => return Ok(false),
                Err(e) => {
                    // Not committed: no PUBACK; closing makes the gateway resend after
                    // reconnecting.
                    tracing::warn!(gateway = %gateway.serial, error = %e, "message not stored");
                    return Ok(false);
                }
            }
            match packet_id {
                // Measurements before it still wait for their commit (only a command answer
                // gets here with some): its PUBACK goes out after theirs (MQTT 3.1.1 §4.6).
                Some(id) if !waiting.commits.is_empty() => waiting.commits.push(Some(id), None),
                Some(id) => framed.send(packets::puback(version, id)).await.map_err(drop)?,
                None => {}
            }
            for doc in desired.into_iter().filter(|d| !d.is_empty()) {
                publish(framed, version, waiting, Outgoing::Desired(doc)).await?;
            }
            Ok(true)
        }
        Inbound::Subscribe { packet_id, filters } => {
            let granted: Vec<Option<QoS>> = filters
                .iter()
                .map(|(filter, qos)| {
                    subscription_allowed(filter).then_some(if *qos == QoS::AtMostOnce {
                        QoS::AtMostOnce
                    } else {
                        QoS::AtLeastOnce
                    })
                })
                .collect();
            framed
                .send(packets::suback(version, packet_id, &granted))
                .await
                .map_err(drop)?;
            Ok(true)
        }
        Inbound::Unsubscribe { packet_id, count } => {
            framed
                .send(packets::unsuback(version, packet_id, count))
                .await
                .map_err(drop)?;
            Ok(true)
        }
        Inbound::PingRequest => {
            framed.send(packets::pingresp(version)).await.map_err(drop)?;
            Ok(true)
        }
        Inbound::Disconnect => Ok(false),
        // A second CONNECT is a protocol violation.
        Inbound::Connect { .. } => {
            Outcome::Closed(Closed::ProtocolError).message();
            Ok(false)
        }
        Inbound::Other => Ok(true),
    }
}
