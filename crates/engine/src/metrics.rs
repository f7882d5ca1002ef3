//! Prometheus metrics. The `metrics` facade has one process-wide recorder, so it is installed
//! once here and every service in the process (tests start several) shares it.
//!
//! Also here: [`Outcome`], how every gateway message and every point of a measurements message
//! ends. Each ends exactly once, and is counted once, in one of two families:
//! [`MESSAGES`] and [`POINTS`] (docs/operations.md, "Metrics").

use std::sync::OnceLock;

use devicecloud_protocol::RejectReason;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The handle that renders `/metrics`, installing the recorder on first use.
pub fn handle() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed by an embedding program; the handle
            // then renders only what reaches ours, which is still a valid (empty) exposition.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// Gateway messages (MQTT PUBLISH packets, packets that break the protocol, HTTP gateway
/// requests that passed authentication) by outcome.
pub const MESSAGES: &str = "devicecloud_gateway_messages_total";
/// Points of measurements messages handed to the ingest queue, by outcome.
pub const POINTS: &str = "devicecloud_ingest_points_total";

/// How a gateway message, or one point, ended: the `outcome` label and, for the outcomes that
/// are not a success, the `reason` label. Every value is one of a closed set, whatever gateways
/// send. Model: a message ends once, where its fate is decided — the ingest writer for a queued
/// measurements message, the gateway for every other message and for a measurements message
/// that never reached the queue, the MQTT connection for what the transport refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Took effect: stored (a measurements message: committed, its points stored or
    /// duplicates), or for a command answer, handed to the caller waiting for it. A point:
    /// stored for the first time.
    Stored,
    /// A point stored before (the gateway sent it again, or twice in one batch): kept once.
    /// Points only.
    Duplicate,
    /// Refused whole by validation: nothing stored, an event 212 records why, and the message
    /// is still acknowledged so that it is not sent again (docs/gateway-protocol.md, "Messages").
    Rejected(RejectReason),
    /// Acknowledged and dropped by rule, with nothing to record.
    Dropped(Dropped),
    /// Not taken: the service closes the connection (docs/gateway-protocol.md, "Transport").
    Closed(Closed),
    /// Not stored, for a fault on the service's side or a connection that broke first: not
    /// acknowledged (HTTP: 503), so the gateway sends it again.
    Failed(Failed),
}

/// Why a message was acknowledged and dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// A command answer no caller waits for (unknown, or its caller gave up).
    UnknownRequest,
}

/// Why a message closed the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// A PUBLISH at QoS 2, which the endpoint does not take.
    Qos2,
    /// A PUBLISH to a topic outside the gateway's own.
    TopicNotAllowed,
    /// A hello with another module kind than the one provisioned.
    KindMismatch,
    /// A packet that cannot be decoded (garbage, over the packet size limit) or a second
    /// CONNECT.
    ProtocolError,
}

/// Why a message or point could not be stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failed {
    /// The store refused the write (logged with the details).
    Store,
    /// The service is stopping: the ingest queue takes no more.
    Stopped,
    /// A fault of the service itself (a task of the ingest writer failed).
    Internal,
    /// The connection could not be written to (the gateway went away) before the message was
    /// handled.
    Connection,
}

impl Outcome {
    /// Every outcome, for tests and for reading `/metrics`: the label sets are this closed set.
    pub const ALL: [Outcome; 18] = [
        Outcome::Stored,
        Outcome::Duplicate,
        Outcome::Rejected(RejectReason::NotJson),
        Outcome::Rejected(RejectReason::BadValue),
        Outcome::Rejected(RejectReason::BadDatatype),
        Outcome::Rejected(RejectReason::BadTimestamp),
        Outcome::Rejected(RejectReason::BadField),
        Outcome::Rejected(RejectReason::TooLarge),
        Outcome::Rejected(RejectReason::OverLimit),
        Outcome::Dropped(Dropped::UnknownRequest),
        Outcome::Closed(Closed::Qos2),
        Outcome::Closed(Closed::TopicNotAllowed),
        Outcome::Closed(Closed::KindMismatch),
        Outcome::Closed(Closed::ProtocolError),
        Outcome::Failed(Failed::Store),
        Outcome::Failed(Failed::Stopped),
        Outcome::Failed(Failed::Internal),
        Outcome::Failed(Failed::Connection),
    ];

    /// The `outcome` label.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Stored => "stored",
            Outcome::Duplicate => "duplicate",
            Outcome::Rejected(_) => "rejected",
            Outcome::Dropped(_) => "dropped",
            Outcome::Closed(_) => "closed",
            Outcome::Failed(_) => "failed",
        }
    }

    /// The `reason` label; none for `stored` and `duplicate`.
    pub fn reason(self) -> Option<&'static str> {
        Some(match self {
            Outcome::Stored | Outcome::Duplicate => return None,
            Outcome::Rejected(reason) => reason.as_str(),
            Outcome::Dropped(Dropped::UnknownRequest) => "unknown_request",
            Outcome::Closed(Closed::Qos2) => "qos_2",
            Outcome::Closed(Closed::TopicNotAllowed) => "topic_not_allowed",
            Outcome::Closed(Closed::KindMismatch) => "kind_mismatch",
            Outcome::Closed(Closed::ProtocolError) => "protocol_error",
            Outcome::Failed(Failed::Store) => "store",
            Outcome::Failed(Failed::Stopped) => "stopped",
            Outcome::Failed(Failed::Internal) => "internal",
            Outcome::Failed(Failed::Connection) => "connection",
        })
    }

    /// Counts one message that ended so.
    pub fn message(self) {
        self.count(MESSAGES, 1);
    }

    /// Counts `n` points that ended so.
    pub fn points(self, n: usize) {
        self.count(POINTS, n as u64);
    }

    fn count(self, family: &'static str, n: u64) {
        match self.reason() {
            None => metrics::counter!(family, "outcome" => self.label()).increment(n),
            Some(reason) => metrics::counter!(family, "outcome" => self.label(), "reason" => reason).increment(n),
        }
    }
}

/// How many messages or points (`family`: [`MESSAGES`] or [`POINTS`]) a Prometheus text
/// exposition (`/metrics`, or [`handle`]`().render()`) counts with `outcome`; 0 when none was.
pub fn read(exposition: &str, family: &str, outcome: Outcome) -> u64 {
    let series = match outcome.reason() {
        Some(reason) => format!("{family}{{outcome=\"{}\",reason=\"{reason}\"}} ", outcome.label()),
        None => format!("{family}{{outcome=\"{}\"}} ", outcome.label()),
    };
    exposition
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_a_closed_set_of_distinct_pairs() {
        let pairs: Vec<(&str, Option<&str>)> = Outcome::ALL.iter().map(|o| (o.label(), o.reason())).collect();
        let distinct: std::collections::HashSet<_> = pairs.iter().collect();
        assert_eq!(distinct.len(), Outcome::ALL.len());
        assert!(pairs.iter().all(|(label, reason)| {
            reason.is_none_or(|r| {
                r.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            }) && !label.is_empty()
        }));
        assert_eq!(
            RejectReason::ALL.map(|r| Outcome::Rejected(r).reason()),
            RejectReason::ALL.map(|r| Some(r.as_str()))
        );
        assert_eq!((Outcome::Stored.label(), Outcome::Stored.reason()), ("stored", None));
        assert_eq!(
            (
                Outcome::Failed(Failed::Store).label(),
                Outcome::Failed(Failed::Store).reason()
            ),
            ("failed", Some("store"))
        );
    }

    #[test]
    fn read_finds_one_series() {
        let text = "# TYPE devicecloud_gateway_messages_total counter\n\
                    devicecloud_gateway_messages_total{outcome=\"stored\"} 7\n\
                    devicecloud_gateway_messages_total{outcome=\"closed\",reason=\"qos_2\"} 2\n";
        assert_eq!(read(text, MESSAGES, Outcome::Stored), 7);
        assert_eq!(read(text, MESSAGES, Outcome::Closed(Closed::Qos2)), 2);
        assert_eq!(read(text, MESSAGES, Outcome::Closed(Closed::KindMismatch)), 0);
        assert_eq!(read(text, POINTS, Outcome::Stored), 0);
    }
}
