//! MQTT framing apart from meaning: rmqtt-codec's 3.1.1 and 5 packets reduced to the few the
//! gateway protocol uses, and the answers built for the version the client speaks.

use std::num::NonZeroU16;

use bytes::Bytes;
use devicecloud_protocol::GatewayTopic;
use rmqtt_codec::types::QoS;
use rmqtt_codec::{MqttPacket, v3, v5};

/// The protocol version of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V3,
    V5,
}

/// What a client sent, whatever its version.
#[derive(Debug)]
pub enum Inbound {
    Connect {
        client_id: String,
        username: Option<String>,
        password: Option<Bytes>,
        keep_alive: u16,
    },
    Publish {
        /// The gateway topic published to, parsed once as the packet is read (no copy of the name);
        /// `None` for a topic outside the gateway's own (docs/gateway-protocol.md, "Topics").
        topic: Option<GatewayTopic>,
        payload: Bytes,
        qos: QoS,
        packet_id: Option<NonZeroU16>,
    },
    Subscribe {
        packet_id: NonZeroU16,
        filters: Vec<(String, QoS)>,
    },
    Unsubscribe {
        packet_id: NonZeroU16,
        count: usize,
    },
    PingRequest,
    /// A clean DISCONNECT.
    Disconnect,
    /// Acknowledgements of what the cloud published (PUBACK), and anything else the gateway
    /// protocol does not use.
    Other,
}

/// A CONNECT of either version: rmqtt-codec gives the two the same field names over types of
/// their own, so one reading serves both.
macro_rules! connect {
    ($c:ident) => {
        Inbound::Connect {
            client_id: $c.client_id.to_string(),
            username: $c.username.map(|u| u.to_string()),
            password: $c.password,
            keep_alive: $c.keep_alive,
        }
    };
}

/// A PUBLISH of either version, read as [`connect!`] reads a CONNECT.
macro_rules! publish {
    ($p:ident) => {
        Inbound::Publish {
            topic: GatewayTopic::parse(&$p.topic),
            payload: $p.payload,
            qos: $p.qos,
            packet_id: $p.packet_id,
        }
    };
}

impl From<MqttPacket> for Inbound {
    fn from(packet: MqttPacket) -> Inbound {
        match packet {
            MqttPacket::V3(p) => match p {
                v3::Packet::Connect(c) => connect!(c),
                v3::Packet::Publish(p) => publish!(p),
                v3::Packet::Subscribe {
                    packet_id,
                    topic_filters,
                } => Inbound::Subscribe {
                    packet_id,
                    filters: topic_filters.into_iter().map(|(f, q)| (f.to_string(), q)).collect(),
                },
                v3::Packet::Unsubscribe {
                    packet_id,
                    topic_filters,
                } => Inbound::Unsubscribe {
                    packet_id,
                    count: topic_filters.len(),
                },
                v3::Packet::PingRequest => Inbound::PingRequest,
                v3::Packet::Disconnect => Inbound::Disconnect,
                _ => Inbound::Other,
            },
            MqttPacket::V5(p) => match p {
                v5::Packet::Connect(c) => connect!(c),
                v5::Packet::Publish(p) => publish!(p),
                v5::Packet::Subscribe(s) => Inbound::Subscribe {
                    packet_id: s.packet_id,
                    filters: s
                        .topic_filters
                        .into_iter()
                        .map(|(f, o)| (f.to_string(), o.qos))
                        .collect(),
                },
                v5::Packet::Unsubscribe(u) => Inbound::Unsubscribe {
                    packet_id: u.packet_id,
                    count: u.topic_filters.len(),
                },
                v5::Packet::PingRequest => Inbound::PingRequest,
                v5::Packet::Disconnect(_) => Inbound::Disconnect,
                _ => Inbound::Other,
            },
            MqttPacket::Version(_) => Inbound::Other,
        }
    }
}

/// CONNACK outcomes the service uses (MQTT 3.1.1 return codes; 5 has its own reason codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connack {
    Accepted,
    ServiceUnavailable,
    BadUserNameOrPassword,
    NotAuthorized,
}

pub fn connack(version: Version, outcome: Connack) -> MqttPacket {
    match version {
        Version::V3 => {
            let return_code = match outcome {
                Connack::Accepted => v3::ConnectAckReason::ConnectionAccepted,
                Connack::ServiceUnavailable => v3::ConnectAckReason::ServiceUnavailable,
                Connack::BadUserNameOrPassword => v3::ConnectAckReason::BadUserNameOrPassword,
                Connack::NotAuthorized => v3::ConnectAckReason::NotAuthorized,
            };
            MqttPacket::V3(v3::Packet::ConnectAck(v3::ConnectAck {
                return_code,
                session_present: false,
            }))
        }
        Version::V5 => {
            let reason_code = match outcome {
                Connack::Accepted => v5::ConnectAckReason::Success,
                Connack::ServiceUnavailable => v5::ConnectAckReason::ServerUnavailable,
                Connack::BadUserNameOrPassword => v5::ConnectAckReason::BadUserNameOrPassword,
                Connack::NotAuthorized => v5::ConnectAckReason::NotAuthorized,
            };
            // QoS 2 is not offered; retained messages are not kept.
            let ack = v5::ConnectAck {
                reason_code,
                max_qos: QoS::AtLeastOnce,
                retain_available: false,
                wildcard_subscription_available: true,
                shared_subscription_available: false,
                subscription_identifiers_available: false,
                ..v5::ConnectAck::default()
            };
            MqttPacket::V5(v5::Packet::ConnectAck(Box::new(ack)))
        }
    }
}

pub fn puback(version: Version, packet_id: NonZeroU16) -> MqttPacket {
    match version {
        Version::V3 => MqttPacket::V3(v3::Packet::PublishAck { packet_id }),
        Version::V5 => MqttPacket::V5(v5::Packet::PublishAck(v5::PublishAck {
            packet_id,
            reason_code: v5::PublishAckReason::Success,
            properties: Vec::new(),
            reason_string: None,
        })),
    }
}

/// SUBACK: `Some(qos)` granted, `None` refused (0x80 in 3.1.1, 0x87 "not authorized" in 5).
pub fn suback(version: Version, packet_id: NonZeroU16, granted: &[Option<QoS>]) -> MqttPacket {
    match version {
        Version::V3 => MqttPacket::V3(v3::Packet::SubscribeAck {
            packet_id,
            status: granted
                .iter()
                .map(|g| g.map_or(v3::SubscribeReturnCode::Failure, v3::SubscribeReturnCode::Success))
                .collect(),
        }),
        Version::V5 => MqttPacket::V5(v5::Packet::SubscribeAck(v5::SubscribeAck {
            packet_id,
            properties: Vec::new(),
            reason_string: None,
            status: granted
                .iter()
                .map(|g| match g {
                    Some(QoS::AtMostOnce) => v5::SubscribeAckReason::GrantedQos0,
                    Some(_) => v5::SubscribeAckReason::GrantedQos1,
                    None => v5::SubscribeAckReason::NotAuthorized,
                })
                .collect(),
        })),
    }
}

pub fn unsuback(version: Version, packet_id: NonZeroU16, count: usize) -> MqttPacket {
    match version {
        Version::V3 => MqttPacket::V3(v3::Packet::UnsubscribeAck { packet_id }),
        Version::V5 => MqttPacket::V5(v5::Packet::UnsubscribeAck(v5::UnsubscribeAck {
            packet_id,
            properties: Vec::new(),
            reason_string: None,
            status: vec![v5::UnsubscribeAckReason::Success; count],
        })),
    }
}

pub fn pingresp(version: Version) -> MqttPacket {
    match version {
        Version::V3 => MqttPacket::V3(v3::Packet::PingResponse),
        Version::V5 => MqttPacket::V5(v5::Packet::PingResponse),
    }
}

/// A QoS 1 PUBLISH from the cloud (a command request, docs/gateway-protocol.md, "Commands").
pub fn publish(version: Version, topic: String, payload: Vec<u8>, packet_id: NonZeroU16) -> MqttPacket {
    let publish = Box::new(rmqtt_codec::types::Publish {
        dup: false,
        retain: false,
        qos: QoS::AtLeastOnce,
        topic: topic.into(),
        packet_id: Some(packet_id),
        payload: Bytes::from(payload),
        properties: match version {
            Version::V3 => None,
            Version::V5 => Some(v5::PublishProperties::default()),
        },
    });
    match version {
        Version::V3 => MqttPacket::V3(v3::Packet::Publish(publish)),
        Version::V5 => MqttPacket::V5(v5::Packet::Publish(publish)),
    }
}
