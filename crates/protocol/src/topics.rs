//! The MQTT topics of the protocol (docs/gateway-protocol.md, "Topics"): what a gateway may publish
//! to and subscribe to. Every topic is relative to the authenticated gateway, so none carries a
//! serial.

/// Prefix of every topic of protocol v1.
const PREFIX: &str = "v1/gateway/";
/// Prefix of the topics a gateway answers commands on.
const RESPONSES: &str = "v1/gateway/responses/";
/// Prefix of the topics the cloud publishes commands on.
const COMMANDS: &str = "v1/gateway/commands/";

/// The one wildcard filter a gateway subscribes to for its commands.
pub const COMMANDS_FILTER: &str = "v1/gateway/commands/+";

/// Longest request id, in characters.
pub const MAX_REQUEST_ID_LEN: usize = 64;

/// A topic a gateway may publish to (docs/gateway-protocol.md, "Topics").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GatewayTopic {
    /// `v1/gateway/hello`, the birth message (docs/gateway-protocol.md, "Messages").
    Hello,
    /// `v1/gateway/measurements` (docs/gateway-protocol.md, "Messages").
    Measurements,
    /// `v1/gateway/events` (docs/gateway-protocol.md, "Messages").
    Events,
    /// `v1/gateway/devices`, the attached assets (docs/gateway-protocol.md, "Messages").
    Devices,
    /// `v1/gateway/power`, power off (docs/gateway-protocol.md, "Messages").
    Power,
    /// `v1/gateway/twin/reported`, what the gateway or an asset applied (docs/gateway-protocol.md,
    /// "Twin").
    TwinReported,
    /// `v1/gateway/twin/get`, a request for a desired document (docs/gateway-protocol.md, "Twin").
    TwinGet,
    /// `v1/gateway/responses/<request_id>`, the answer to a command (docs/gateway-protocol.md,
    /// "Commands").
    Response {
        /// The id of the request being answered; always valid ([`is_valid_request_id`]).
        request_id: String,
    },
}

impl GatewayTopic {
    /// Parses a topic a gateway publishes to (docs/gateway-protocol.md, "Topics"); `None` for any
    /// other topic (the server refuses it). Exact match only: no trailing slash, no wildcard, no
    /// case folding.
    pub fn parse(topic: &str) -> Option<GatewayTopic> {
        if let Some(id) = topic.strip_prefix(RESPONSES) {
            return is_valid_request_id(id).then(|| GatewayTopic::Response {
                request_id: id.to_owned(),
            });
        }
        match topic.strip_prefix(PREFIX)? {
            "hello" => Some(GatewayTopic::Hello),
            "measurements" => Some(GatewayTopic::Measurements),
            "events" => Some(GatewayTopic::Events),
            "devices" => Some(GatewayTopic::Devices),
            "power" => Some(GatewayTopic::Power),
            "twin/reported" => Some(GatewayTopic::TwinReported),
            "twin/get" => Some(GatewayTopic::TwinGet),
            _ => None,
        }
    }

    /// The topic name, as the gateway (or the simulator) publishes to it.
    pub fn as_topic(&self) -> String {
        match self {
            GatewayTopic::Hello => format!("{PREFIX}hello"),
            GatewayTopic::Measurements => format!("{PREFIX}measurements"),
            GatewayTopic::Events => format!("{PREFIX}events"),
            GatewayTopic::Devices => format!("{PREFIX}devices"),
            GatewayTopic::Power => format!("{PREFIX}power"),
            GatewayTopic::TwinReported => format!("{PREFIX}twin/reported"),
            GatewayTopic::TwinGet => format!("{PREFIX}twin/get"),
            GatewayTopic::Response { request_id } => format!("{RESPONSES}{request_id}"),
        }
    }
}

/// The topic the cloud publishes one command request on: `v1/gateway/commands/<request_id>`.
/// The caller generates the id and keeps it valid ([`is_valid_request_id`]); the gateway answers
/// on the matching [`GatewayTopic::Response`].
pub fn command_topic(request_id: &str) -> String {
    format!("{COMMANDS}{request_id}")
}

/// Whether a SUBSCRIBE filter is allowed (docs/gateway-protocol.md, "Topics"): exactly the commands
/// filter, one `v1/gateway/commands/<id>` topic, or the twin's desired topic. Anything else (`#`,
/// other prefixes) gets SUBACK 0x80.
pub fn subscription_allowed(filter: &str) -> bool {
    filter == COMMANDS_FILTER
        || filter == crate::twin::DESIRED_TOPIC
        || filter.strip_prefix(COMMANDS).is_some_and(is_valid_request_id)
}

/// A request id is 1 to 64 characters of `[A-Za-z0-9_-]`: enough for a UUID in any common
/// spelling, and no MQTT wildcard, separator or control character can hide in a topic level.
pub fn is_valid_request_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_REQUEST_ID_LEN
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_gateway_topic() {
        let cases = [
            ("v1/gateway/hello", GatewayTopic::Hello),
            ("v1/gateway/measurements", GatewayTopic::Measurements),
            ("v1/gateway/events", GatewayTopic::Events),
            ("v1/gateway/devices", GatewayTopic::Devices),
            ("v1/gateway/power", GatewayTopic::Power),
            ("v1/gateway/twin/reported", GatewayTopic::TwinReported),
            ("v1/gateway/twin/get", GatewayTopic::TwinGet),
            (
                "v1/gateway/responses/0190c2a4-7e1b-7c3d-9f00-1234567890ab",
                GatewayTopic::Response {
                    request_id: "0190c2a4-7e1b-7c3d-9f00-1234567890ab".into(),
                },
            ),
        ];
        for (text, topic) in cases {
            assert_eq!(GatewayTopic::parse(text), Some(topic.clone()), "{text}");
            assert_eq!(topic.as_topic(), text);
        }
    }

    #[test]
    fn refuses_other_topics() {
        let long = format!("v1/gateway/responses/{}", "a".repeat(65));
        for text in [
            "",
            "v1/gateway/",
            "v1/gateway/hello/",
            "v1/gateway/Hello",
            "/v1/gateway/hello",
            "v1/gateway/hello/x",
            "v2/gateway/hello",
            "v1/gateway/#",
            "v1/gateway/+",
            "v1/gateway/commands/abc",
            "v1/gateway/twin/desired",
            "v1/gateway/twin",
            "v1/gateway/responses/",
            "v1/gateway/responses/+",
            "v1/gateway/responses/#",
            "v1/gateway/responses/a/b",
            "v1/gateway/responses/a b",
            "v1/gateway/responses/é",
            "v1/gateway/responses/a\u{0}",
            &long,
        ] {
            assert_eq!(GatewayTopic::parse(text), None, "{text:?}");
        }
        let longest = format!("v1/gateway/responses/{}", "a".repeat(64));
        assert!(GatewayTopic::parse(&longest).is_some());
    }

    #[test]
    fn command_topics_and_subscriptions() {
        assert_eq!(command_topic("r-1"), "v1/gateway/commands/r-1");
        assert!(subscription_allowed(COMMANDS_FILTER));
        assert!(subscription_allowed("v1/gateway/commands/r-1"));
        assert!(subscription_allowed(&command_topic("AZaz09_-")));
        assert!(subscription_allowed("v1/gateway/twin/desired"));
        for filter in [
            "",
            "#",
            "+",
            "v1/#",
            "v1/gateway/#",
            "v1/gateway/+",
            "v1/gateway/commands/#",
            "v1/gateway/commands/",
            "v1/gateway/commands/+/x",
            "v1/gateway/commands/a/b",
            "v1/gateway/commands/+x",
            "v1/gateway/responses/+",
            "v1/gateway/hello",
            "v1/gateway/commands/a.b",
            "v1/gateway/twin/+",
            "v1/gateway/twin/reported",
        ] {
            assert!(!subscription_allowed(filter), "{filter:?}");
        }
    }

    #[test]
    fn request_ids() {
        assert!(is_valid_request_id("a"));
        assert!(is_valid_request_id(&"Z".repeat(64)));
        assert!(!is_valid_request_id(&"Z".repeat(65)));
        assert!(!is_valid_request_id(""));
        assert!(!is_valid_request_id("a/b"));
        assert!(!is_valid_request_id("a+b"));
        assert!(!is_valid_request_id("ü"));
    }
}
