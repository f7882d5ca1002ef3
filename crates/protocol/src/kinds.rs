//! The two closed vocabularies of hello (docs/gateway-protocol.md, "Messages"): the kind of
//! connectivity module and the link it uses to reach the cloud.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::rejection::{RejectReason, Rejection};

/// The kind of a connectivity module. It decides which commands the module supports
/// ([`crate::CommandMethod::supported_by`]) and whether it has data sessions (GO).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ModuleKind {
    /// `GO`: battery powered; its data is grouped in data sessions.
    Go,
    /// `CORE`.
    Core,
    /// `PLUS`.
    Plus,
}

impl ModuleKind {
    /// Every kind, in the order of the specification.
    pub const ALL: [ModuleKind; 3] = [ModuleKind::Go, ModuleKind::Core, ModuleKind::Plus];

    /// The wire spelling: `GO`, `CORE` or `PLUS`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ModuleKind::Go => "GO",
            ModuleKind::Core => "CORE",
            ModuleKind::Plus => "PLUS",
        }
    }
}

impl fmt::Display for ModuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ModuleKind {
    type Err = Rejection;

    /// Exact, case-sensitive: the protocol has one spelling per kind.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ModuleKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| Rejection::invalid(RejectReason::BadField, "kind must be GO, CORE or PLUS"))
    }
}

/// How a module reaches the cloud, reported in hello and recorded as event 208
/// (docs/gateway-protocol.md, "Messages").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConnectionKind {
    /// `cellular`.
    Cellular,
    /// `wifi`.
    Wifi,
    /// `ethernet`.
    Ethernet,
}

impl ConnectionKind {
    /// Every connection kind.
    pub const ALL: [ConnectionKind; 3] = [ConnectionKind::Cellular, ConnectionKind::Wifi, ConnectionKind::Ethernet];

    /// The wire spelling: `cellular`, `wifi` or `ethernet`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ConnectionKind::Cellular => "cellular",
            ConnectionKind::Wifi => "wifi",
            ConnectionKind::Ethernet => "ethernet",
        }
    }

    /// The value of event 208 (cloud connectivity change) for this link: wifi 1, cellular 2,
    /// ethernet 3 (docs/gateway-protocol.md, "Messages"). 0 is "disconnected" and belongs to no
    /// kind.
    pub fn event_value(&self) -> u8 {
        match self {
            ConnectionKind::Wifi => 1,
            ConnectionKind::Cellular => 2,
            ConnectionKind::Ethernet => 3,
        }
    }
}

impl fmt::Display for ConnectionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ConnectionKind {
    type Err = Rejection;

    /// Exact, case-sensitive.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ConnectionKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| Rejection::invalid(RejectReason::BadField, "connection must be cellular, wifi or ethernet"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_kinds() {
        for (kind, text) in [
            (ModuleKind::Go, "GO"),
            (ModuleKind::Core, "CORE"),
            (ModuleKind::Plus, "PLUS"),
        ] {
            assert_eq!(kind.as_str(), text);
            assert_eq!(kind.to_string(), text);
            assert_eq!(text.parse::<ModuleKind>(), Ok(kind));
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{text}\""));
            assert_eq!(
                serde_json::from_str::<ModuleKind>(&format!("\"{text}\"")).unwrap(),
                kind
            );
        }
        for bad in ["go", "Go", "", " GO", "MAX"] {
            let err = bad.parse::<ModuleKind>().unwrap_err();
            assert_eq!(err.reason(), RejectReason::BadField);
        }
    }

    #[test]
    fn connection_kinds() {
        let cases = [
            (ConnectionKind::Cellular, "cellular", 2),
            (ConnectionKind::Wifi, "wifi", 1),
            (ConnectionKind::Ethernet, "ethernet", 3),
        ];
        for (kind, text, value) in cases {
            assert_eq!(kind.as_str(), text);
            assert_eq!(kind.to_string(), text);
            assert_eq!(kind.event_value(), value);
            assert_eq!(text.parse::<ConnectionKind>(), Ok(kind));
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{text}\""));
        }
        for bad in ["WIFI", "lte", "", "wi-fi"] {
            assert!(bad.parse::<ConnectionKind>().is_err());
        }
    }
}
