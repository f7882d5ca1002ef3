//! The one error type of the crate: why a message from a gateway (or a command request, on the
//! simulator side) is refused whole (docs/gateway-protocol.md, "Messages" and "Event codes the
//! cloud records").

use std::fmt;

/// Why a message was refused. The server counts it under [`RejectReason::as_str`] and records
/// [`Rejection::description`] as the `event_value_description` of the rejection event
/// (docs/gateway-protocol.md, "Event codes the cloud records").
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Rejection {
    /// The payload bytes are not UTF-8, so they cannot be JSON (docs/gateway-protocol.md,
    /// "Transport").
    #[error("payload is not UTF-8")]
    NotUtf8,
    /// serde_json refused the text; the message says where. Numbers too large for an `f64`
    /// (`1e400`) and nesting deeper than 128 levels end here too: the JSON reader refuses them.
    #[error("payload is not JSON: {0}")]
    NotJson(String),
    /// Valid JSON that breaks a rule of the protocol. `detail` names the item and key.
    #[error("{detail}")]
    Invalid {
        /// The metric label.
        reason: RejectReason,
        /// Human text naming what is wrong and where.
        detail: String,
    },
}

impl Rejection {
    /// The category, for metric labels.
    pub fn reason(&self) -> RejectReason {
        match self {
            // Text that is not UTF-8 is not JSON either (docs/gateway-protocol.md, "Transport":
            // payloads are UTF-8 JSON).
            Rejection::NotUtf8 | Rejection::NotJson(_) => RejectReason::NotJson,
            Rejection::Invalid { reason, .. } => *reason,
        }
    }

    /// The human text recorded as the rejection event's `event_value_description`.
    pub fn description(&self) -> String {
        self.to_string()
    }

    /// A rejection of `reason` with its text.
    pub fn invalid(reason: RejectReason, detail: impl Into<String>) -> Self {
        Rejection::Invalid {
            reason,
            detail: detail.into(),
        }
    }
}

/// The category of a [`Rejection`]: a small closed set, so it can label a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RejectReason {
    /// Not UTF-8 or not JSON.
    NotJson,
    /// A measurement value that is not a finite number, or an event value that is neither a
    /// string nor a number.
    BadValue,
    /// A datatype (measurement key, event `datatype`) that is not a non-negative 32-bit integer.
    BadDatatype,
    /// A `ts` that is not a number, is before 2000-01-01T00:00:00Z or more than one day ahead.
    BadTimestamp,
    /// Anything else: a missing or mistyped key, a bad serial, an unknown kind or method.
    BadField,
    /// More items in one message than [`crate::MAX_BATCH`].
    TooLarge,
    /// The message would pass a gateway's limit: more child devices than allowed, or more
    /// datatypes on one device (docs/gateway-protocol.md, "Limits"). Decided by the server.
    OverLimit,
}

impl RejectReason {
    /// Every reason, so that a metric can be registered for each before the first rejection.
    pub const ALL: [RejectReason; 7] = [
        RejectReason::NotJson,
        RejectReason::BadValue,
        RejectReason::BadDatatype,
        RejectReason::BadTimestamp,
        RejectReason::BadField,
        RejectReason::TooLarge,
        RejectReason::OverLimit,
    ];

    /// The metric label: `not_json`, `bad_value`, `bad_datatype`, `bad_timestamp`, `bad_field`,
    /// `too_large`, `over_limit`.
    pub fn as_str(&self) -> &'static str {
        match self {
            RejectReason::NotJson => "not_json",
            RejectReason::BadValue => "bad_value",
            RejectReason::BadDatatype => "bad_datatype",
            RejectReason::BadTimestamp => "bad_timestamp",
            RejectReason::BadField => "bad_field",
            RejectReason::TooLarge => "too_large",
            RejectReason::OverLimit => "over_limit",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_and_labels() {
        let labels: Vec<_> = RejectReason::ALL.iter().map(RejectReason::as_str).collect();
        assert_eq!(
            labels,
            [
                "not_json",
                "bad_value",
                "bad_datatype",
                "bad_timestamp",
                "bad_field",
                "too_large",
                "over_limit"
            ]
        );
        assert_eq!(RejectReason::TooLarge.to_string(), "too_large");
        assert_eq!(Rejection::NotUtf8.reason(), RejectReason::NotJson);
        assert_eq!(Rejection::NotJson("x".into()).reason(), RejectReason::NotJson);
        let r = Rejection::invalid(RejectReason::BadValue, "values: \"12\" must be a number");
        assert_eq!(r.reason(), RejectReason::BadValue);
        assert_eq!(r.description(), "values: \"12\" must be a number");
    }

    #[test]
    fn descriptions() {
        assert_eq!(Rejection::NotUtf8.description(), "payload is not UTF-8");
        assert_eq!(
            Rejection::NotJson("EOF while parsing".into()).description(),
            "payload is not JSON: EOF while parsing"
        );
    }
}
